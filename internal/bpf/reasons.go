package bpf

import (
	"strconv"

	"sluice/internal/ipflog"
)

// Reasons lists the block reasons the datapath counts (Stats.Drops) and
// logs, each a #define RSN_* in c/include/filter.h.
var Reasons = [...]uint32{RSNFilter, RSNLogFail, RSNPPS, RSNJumbo, RSNStateAdd, RSNPullup, RSNBadFrag, RSNBad, RSNDCA, RSNScanCut}

// LogReason maps a datapath block reason to a log record's: the datapath
// numbers IPFilter's FRB_* from 1, so that 0 means none, where log
// records (ipflog, IPFilter's fin_reason) number them from 0, with
// filter-rule, which ipmon does not print. The datapath's own reasons,
// from RSNBad, keep their number.
func LogReason(r uint32) uint8 {
	switch {
	case r == RSNNone:
		return 0
	case r < RSNBad:
		return uint8(r - 1)
	case r > 255:
		return 255
	}
	return uint8(r)
}

// ReasonName names a datapath block reason as ipmon prints it (the names
// are ipflog's, the one table of them); a reason without a name is
// "reason-N".
func ReasonName(r uint32) string {
	if r != RSNNone {
		if name := ipflog.ReasonName(LogReason(r)); name != "" {
			return name
		}
	}
	return "reason-" + strconv.FormatUint(uint64(r), 10)
}
