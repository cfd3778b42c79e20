//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"sluice/internal/qos"
	"sluice/internal/rules/ipqos"
)

// Limits of the maps in qos.c.
const (
	maxRules    = 4096
	maxPolicies = 1024
	maxFilters  = 4096
	maxAdapters = 64
	confChunk   = 4096
	confChunks  = 64
	noDSCP      = 0xff
)

// slotLayout gives each adapter's policies, filters and rules a base slot
// in the flat maps. It depends only on the ruleset, so the counters can be
// named again later from the stored configuration text.
type slotLayout struct {
	policy, filter, rule []uint32
}

func layout(rs *qos.Ruleset) (slotLayout, error) {
	var l slotLayout
	var p, f, r uint32
	for _, a := range rs.Adapters {
		l.policy = append(l.policy, p)
		l.filter = append(l.filter, f)
		l.rule = append(l.rule, r)
		p += uint32(len(a.Policies))
		f += uint32(len(a.Filters))
		r += uint32(len(a.Rules))
	}
	switch {
	case len(rs.Adapters) > maxAdapters:
		return l, fmt.Errorf("%d adapters, at most %d are supported", len(rs.Adapters), maxAdapters)
	case p > maxPolicies:
		return l, fmt.Errorf("%d policy slots, at most %d are supported", p, maxPolicies)
	case f > maxFilters:
		return l, fmt.Errorf("%d filter slots, at most %d are supported", f, maxFilters)
	case r > maxRules:
		return l, fmt.Errorf("%d rules, at most %d are supported", r, maxRules)
	}
	return l, nil
}

func encodeRule(r *qos.Rule, policyBase, filterBase uint32) qosQosRule {
	var o qosQosRule
	o.SrcLo.Hi, o.SrcLo.Lo = r.SrcLo.Hi, r.SrcLo.Lo
	o.SrcHi.Hi, o.SrcHi.Lo = r.SrcHi.Hi, r.SrcHi.Lo
	o.DstLo.Hi, o.DstLo.Lo = r.DstLo.Hi, r.DstLo.Lo
	o.DstHi.Hi, o.DstHi.Lo = r.DstHi.Hi, r.DstHi.Lo
	o.Flags, o.Family, o.Proto = r.Flags, r.Family, r.Proto
	o.SportLo, o.SportHi, o.DportLo, o.DportHi = r.SportLo, r.SportHi, r.DportLo, r.DportHi
	o.DscpLo, o.DscpHi = r.DSCPLo, r.DSCPHi
	o.Mac = r.MAC
	o.Policy = policyBase + r.Policy
	o.Filter = filterBase + r.Filter
	return o
}

// port describes where an adapter's program sees packets.
type port struct {
	ifindex uint32
	l2len   uint32 // 14 for Ethernet, 0 for devices without a link header
}

// newObjects loads a fresh, unpinned copy of the program and maps and
// fills them for the ruleset. ports maps adapter names to interfaces;
// adapters missing from it get no entry (their traffic is not touched).
func newObjects(rs *qos.Ruleset, ports map[string]port) (*qosObjects, error) {
	l, err := layout(rs)
	if err != nil {
		return nil, err
	}
	objs := &qosObjects{}
	if err := loadQosObjects(objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading qos program: %+v", ve)
		}
		return nil, fmt.Errorf("loading qos program: %w", err)
	}
	if err := fill(objs, rs, l, ports); err != nil {
		objs.Close()
		return nil, err
	}
	return objs, nil
}

func fill(objs *qosObjects, rs *qos.Ruleset, l slotLayout, ports map[string]port) error {
	for ai, a := range rs.Adapters {
		for i := range a.Rules {
			v := encodeRule(&a.Rules[i], l.policy[ai], l.filter[ai])
			if err := objs.Rules.Put(l.rule[ai]+uint32(i), &v); err != nil {
				return fmt.Errorf("writing rule: %w", err)
			}
		}
		for i := range a.Policies {
			p := &a.Policies[i]
			v := qosQosPolicy{Priority: p.Priority(), Dscp: noDSCP}
			if p.DSCP >= 0 {
				v.Dscp = uint8(p.DSCP)
			}
			if err := objs.Policies.Put(l.policy[ai]+uint32(i), &v); err != nil {
				return fmt.Errorf("writing policy: %w", err)
			}
		}
		pt, ok := ports[a.Name]
		if !ok {
			continue
		}
		v := qosQosAdapter{FirstRule: l.rule[ai], Nrules: uint32(len(a.Rules)), L2len: pt.l2len}
		if err := objs.Adapters.Put(pt.ifindex, &v); err != nil {
			return fmt.Errorf("writing adapter %s: %w", a.Name, err)
		}
	}
	text := []byte(ipqos.Format(rs.Config))
	if len(text) >= confChunk*confChunks {
		return fmt.Errorf("configuration text is %d bytes, at most %d fit", len(text), confChunk*confChunks-1)
	}
	for i := 0; i*confChunk <= len(text); i++ {
		var c qosQosConfChunk
		copy(c.Data[:], text[i*confChunk:])
		if err := objs.Conf.Put(uint32(i), &c); err != nil {
			return fmt.Errorf("writing configuration text: %w", err)
		}
	}
	return nil
}

// readConf reads the configuration text back from a conf map.
func readConf(m *ebpf.Map) (string, error) {
	var buf []byte
	for i := uint32(0); i < confChunks; i++ {
		var c qosQosConfChunk
		if err := m.Lookup(i, &c); err != nil {
			return "", fmt.Errorf("reading configuration text: %w", err)
		}
		if n := bytes.IndexByte(c.Data[:], 0); n >= 0 {
			return string(append(buf, c.Data[:n]...)), nil
		}
		buf = append(buf, c.Data[:]...)
	}
	return string(buf), nil
}

// compileText turns stored configuration text back into a ruleset.
func compileText(text string) (*qos.Ruleset, error) {
	cfg, err := ipqos.Parse("active configuration", []byte(text))
	if err != nil {
		return nil, err
	}
	return qos.Compile(cfg)
}

// sumCounter reads a per-CPU counter slot.
func sumCounter(m *ebpf.Map, slot uint32) (packets, bytes uint64, err error) {
	var per []qosQosCounter
	if err := m.Lookup(slot, &per); err != nil {
		return 0, 0, err
	}
	for _, c := range per {
		packets += c.Packets
		bytes += c.Bytes
	}
	return packets, bytes, nil
}
