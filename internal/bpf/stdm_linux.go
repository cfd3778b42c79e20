package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// dmIdx is c/lib/state.h's dm_idx: the slot of state key k in st_dm.
func dmIdx(k filterStateKey) uint32 {
	h := k.Src[0] * 0x9e3779b1
	h = (h ^ h>>16 ^ k.Dst[0]) * 0x85ebca77
	h = (h ^ h>>16 ^ (uint32(k.Sport) | uint32(k.Dport)<<16)) * 0xc2b2ae3d
	h = (h ^ h>>16 ^ k.Src[1] ^ k.Src[2] ^ k.Src[3] ^ k.Dst[1] ^ k.Dst[2] ^ k.Dst[3] ^ dmPfwt(k)) * 0x27d4eb2f
	h ^= h >> 16
	return h & (stDMSlots - 1)
}

// dmPfwt is dm_pfwt: the key's protocol, family, wildcard and twin bytes
// as the slot holds them in one word (0: the slot is empty).
func dmPfwt(k filterStateKey) uint32 {
	return uint32(k.Proto) | uint32(k.Family)<<8 | uint32(k.Wild)<<16 | uint32(k.Twin)<<24
}

// slotHolds is dm_key_eq: slot s holds state key k.
func slotHolds(s *filterStSlot, k filterStateKey) bool {
	return s.Kpfwt != 0 && s.Ksrc == k.Src[0] && s.Kdst == k.Dst[0] &&
		s.Kports == uint32(k.Sport)|uint32(k.Dport)<<16 && s.Kpfwt == dmPfwt(k) &&
		s.Khi == [6]uint32{k.Src[1], k.Src[2], k.Src[3], k.Dst[1], k.Dst[2], k.Dst[3]}
}

// withSlot gives v, the element of state key k as read from the hash,
// what its st_dm slot holds of it while the slot holds it (est11, est15):
// the established packets decided through the slot moved the lifetime,
// the window tracking and the last packet there, and counted there. The
// slot is read under its lock (BPF_F_LOCK), as the kernel's writers hold
// it, and only if it was filled from this element (its creation time).
func (d *Datapath) withSlot(k filterStateKey, v *filterStateEntry) error {
	if d.objs.StDm == nil || k.Twin != 0 || k.Wild != 0 {
		return nil
	}
	var s filterStSlot
	if err := d.objs.StDm.LookupWithFlags(dmIdx(k), &s, ebpf.LookupLock); err != nil {
		return fmt.Errorf("reading the state entry's slot: %w", err)
	}
	if !slotHolds(&s, k) || s.Valid == 0 || s.Created != v.Created {
		return nil
	}
	v.Expire, v.Last, v.Tcp = s.Expire, s.Last, s.Tcp
	for i := range s.Pkts {
		v.Cnt[0].Pkts[i] += s.Pkts[i]
		v.Cnt[0].Bytes[i] += s.Bytes[i]
	}
	return nil
}
