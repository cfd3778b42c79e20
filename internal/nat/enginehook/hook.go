// Package enginehook plugs the NAT engine (sluice/internal/nat) into the
// filter engine's NAT hook (sluice/internal/engine.NAT).
package enginehook

import (
	"sluice/internal/engine"
	"sluice/internal/nat"
	"sluice/internal/packet"
	"sluice/internal/state"
)

// Hook adapts a *nat.NAT to engine.NAT. Translated packets are re-parsed
// with engine.Packet.Rewritten (NAT keeps checksums consistent) and
// marked FlagNATed ("with nat"). Divert rules change the packet's length: p.Data then needs 28 bytes of spare capacity, and is replaced
// by the re-sliced packet.
type Hook struct {
	NAT *nat.NAT
}

var _ engine.NAT = Hook{}

// In runs NAT for an inbound packet before filtering; false means the
// translation failed and the engine blocks the packet.
func (h Hook) In(p *engine.Packet) bool {
	b, r, tag := h.NAT.InPacketTag(p.Data, p.IfName)
	p.NATTag = tag
	return finish(p, b, r)
}

// Out runs NAT for an outbound packet that passed the filter; tag is the
// matching rule's set-tag(nat=…).
func (h Hook) Out(p *engine.Packet, tag string) bool {
	if tag == engine.NATTagNone {
		tag = nat.TagNone
	}
	b, r := h.NAT.OutPacket(p.Data, p.IfName, tag)
	return finish(p, b, r)
}

func finish(p *engine.Packet, b []byte, r nat.Result) bool {
	switch r {
	case nat.Failed:
		return false
	case nat.Translated:
		n := len(p.Data)
		p.Data = b
		p.Info.Flags |= packet.FlagNATed
		p.Rewritten(n)
	}
	return true
}

// StateAdder returns the nat.Config.AddState function that opens e's
// state table for the connections NAT proxies expect.
func StateAdder(e *engine.Engine) func(nat.ProxyState) bool {
	return func(ps nat.ProxyState) bool {
		sp := state.Packet{V: 4, Proto: ps.Proto, Src: ps.Src, Dst: ps.Dst, SPort: ps.SPort, DPort: ps.DPort,
			Out: ps.Out, IfName: ps.IfName, PLen: ps.PLen}
		if ps.V6 {
			sp.V = 6
		}
		lim := state.Limits{RuleNum: -1, WildSrcPort: ps.WildSrcPort, WildDstPort: ps.WildDstPort, Clone: ps.Clone, NoCount: ps.NoCount}
		_, err := e.States.Add(&sp, ps.Pass, &lim)
		return err == state.AddOK
	}
}
