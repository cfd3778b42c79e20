package ipfctl

import (
	"time"

	"sluice/internal/bpf"
	"sluice/internal/ipflog"
)

// firstGroupList is the datapath's first list id for groups (0 in, 1 out,
// 2 and 3 accounting).
const firstGroupList = 4

// Convert turns a kernel log record into the ipflog record ipmon prints:
// ifname and group are the names of its interface and group ("" for the
// main lists), wall its time, seq its sequence number.
func Convert(k *bpf.LogRecord, ifname, group string, wall time.Time, seq uint32) ipflog.Record {
	r := ipflog.Record{
		Type:   ipflog.TypeIPF,
		Seq:    seq,
		Count:  1,
		Time:   wall,
		Iface:  ifname,
		Group:  group,
		Rule:   k.RuleNo - 1,
		Flags:  k.Pass, // the datapath uses IPFilter's FR_*/FF_* values, as ipflog
		LFlags: k.Flags,
		Out:    k.Out,
		LogTag: k.Tag,
		Level:  ipflog.NoLevel,
		Reason: bpf.LogReason(k.Reason),
		Family: k.Family,
		Data:   k.Data,
	}
	if k.RuleNo < 0 {
		r.Rule, r.GroupUnset = -1, true
	}
	if r.Family == 0 && len(k.Data) > 0 {
		r.Family = k.Data[0] >> 4
	}
	r.HLen = headerLen(k.Data)
	r.BodyLen = len(k.Data) - r.HLen
	return r
}

// headerLen is the length of the IP and transport headers at the start of
// b (clamped to len(b)), which ipmon -b leaves out of the body dump.
func headerLen(b []byte) int {
	if len(b) < 1 {
		return 0
	}
	var n int
	var proto byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return len(b)
		}
		n, proto = int(b[0]&0xf)*4, b[9]
		if b[6]&0x1f != 0 || b[7] != 0 {
			return min(n, len(b)) // a later fragment has no transport header
		}
	case 6:
		if len(b) < 40 {
			return len(b)
		}
		n, proto = 40, b[6]
	default:
		return len(b)
	}
	switch proto {
	case 6:
		if len(b) >= n+13 {
			n += int(b[n+12]>>4) * 4
		} else {
			n += 20
		}
	case 17:
		n += 8
	case 1, 58:
		n += 8
	}
	return min(n, len(b))
}
