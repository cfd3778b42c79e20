package bpf

import "sluice/internal/ruleset"

// cblockCount is how many blocks of compact matches n rules take.
func cblockCount(n int) int { return (n + 1<<blockBits - 1) >> blockBits }

// cblocks are the compact matches of the image's rules by block (struct
// cblock), as the scan reads them; the places past the last rule never
// match.
func (im *Image) cblocks() []filterCblock {
	out := make([]filterCblock, cblockCount(len(im.rules)))
	if len(out) > 0 {
		last := &out[len(out)-1]
		for k := range last.M {
			last.M[k].Flags = cmNever
		}
	}
	for i := range im.rules {
		r := &im.rules[i]
		b, k := i>>blockBits, i&(1<<blockBits-1)
		out[b].M[k] = im.runMatch(i)
		if r.RunLen > 1 {
			out[b].RunLen[k] = r.RunLen
		}
	}
	return out
}

// cmFull's tests: what rule_match_but tests that struct cmatch does not
// hold. A rule with any of them is matched whole after its compact match.
const cmOther = mIface | mTos | mTTL | mICMP | mWith | mOpt | mSec | mSrcPool | mDstPool | mExpr

// compactMatch is rule r's compact match (struct cmatch): the tests of r
// that the scan can make in place, and CM_FULL when r tests more. It never
// holds a test r does not make, so a packet that fails it fails r; a
// packet that passes it matches r unless CM_FULL is set. A run's first
// rule (run) leaves out the run's address: the runs table decides it.
func compactMatch(r *filterRule, run bool) filterCmatch {
	c := filterCmatch{Family: r.Family}
	m := r.Match
	if run {
		m &^= r.RunField
		c.Flags |= cmRun
	}
	if r.Action&ruleset.FROutQue != 0 {
		c.Flags |= cmOut
	}
	if m&mNever != 0 {
		c.Flags |= cmNever
	}
	if m&cmOther != 0 {
		c.Flags |= cmFull
	}
	if m&mExpr != 0 {
		// an exp rule tests nothing but its expression (and direction,
		// family, interface): the rest of its fields mean nothing
		return c
	}
	if m&mProto != 0 {
		c.Flags |= cmProto
		c.Proto = r.Proto
	}
	if m&mTCPUDP != 0 {
		c.Flags |= cmTCPUDP
	}
	// addresses: IPv4 rules only (the packet is then IPv4 and one word
	// decides); others are left to the whole match
	if m&mSrc != 0 {
		if r.Family == 4 {
			c.Flags |= cmSrc
			c.Src, c.Smask = r.Src[0], r.Smask[0]
			if m&mNotSrc != 0 {
				c.Flags |= cmNotSrc
			}
		} else {
			c.Flags |= cmFull
		}
	}
	if m&mDst != 0 {
		if r.Family == 4 {
			c.Flags |= cmDst
			c.Dst, c.Dmask = r.Dst[0], r.Dmask[0]
			if m&mNotDst != 0 {
				c.Flags |= cmNotDst
			}
		} else {
			c.Flags |= cmFull
		}
	}
	if m&(mSport|mDport|mFlags) != 0 {
		c.Flags |= cmPorts
	}
	if m&mSport != 0 {
		c.Flags |= cmSport
		c.SportOp, c.SportLo, c.SportHi = r.SportOp, r.SportLo, r.SportHi
	}
	if m&mDport != 0 {
		c.Flags |= cmDport
		c.DportOp, c.DportLo, c.DportHi = r.DportOp, r.DportLo, r.DportHi
	}
	if m&mFlags != 0 {
		c.Flags |= cmFlags
		c.Tcpf, c.TcpfMask = r.Tcpf, r.TcpfMask
	}
	if run && c.Flags&cmFull == 0 && r.Family == 4 {
		// the run's address mask in the word of its field the compact
		// match does not use (the run's address is not among its tests):
		// a hot list looks the packet up in the runs table in place, so
		// a packet no rule of the run has costs one hash lookup, not a
		// call, the run's rule and its whole match (scan.h, scan_hot)
		c.Flags |= cmRun4
		if r.RunField == mSrc {
			c.Flags |= cmRunSrc
			c.Smask = r.Smask[0]
		} else {
			c.Dmask = r.Dmask[0]
		}
	}
	return c
}
