/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The fragment cache (ip_frag.c, ipf-reference 3.8): the verdict of a
 * datagram's first fragment for the rest of it.
 */
#ifndef SLUICE_FRAG_H
#define SLUICE_FRAG_H

#include "common.h"

static __always_inline void frag_key_of(struct frag_key *k, const struct pktinfo *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->src, p->src, 16);
	__builtin_memcpy(k->dst, p->dst, 16);
	k->id = p->ipid;
	k->ifindex = p->ifindex;
	/* IPF_OPTCOPY: only the options every fragment carries (the
	 * engine's fragKeyOf), bits 8-18; the IPSO authority (ipfr_auth)
	 * in the word's free bits, its high byte in 24-31, its low one in
	 * 0-7, so that the key keeps the size a pinned table has
	 * (semantics frag-key-ipso-authority) */
	k->opt = (p->optbits & 0x07ff00) | (__u32)(p->auth >> 8) << 24 | (p->auth & 0xff);
	k->proto = p->proto;
	k->family = p->family;
	k->secclass = p->secclass;
}

/* frag_count_add moves the fragment cache's count by d */
static __always_inline void frag_count_add(__s64 d)
{
	__u32 zero = 0;
	__s64 *n = bpf_map_lookup_elem(&frag_count, &zero);

	if (n)
		__sync_fetch_and_add(n, d);
}

/* frag_del removes the entry at k, counting it out if this call did */
static __always_inline void frag_del(const struct frag_key *k)
{
	if (bpf_map_delete_elem(&frags, k) == 0)
		frag_count_add(-1);
}

/* frag_full is ipf_frag_new's ipfr_inuse >= ipfr_size: frag_size
 * entries live (FRAG_SIZE_DEF when the configuration has none), at most
 * the map's capacity */
static __always_inline int frag_full(void)
{
	__u32 zero = 0;
	__s64 *n = bpf_map_lookup_elem(&frag_count, &zero);
	__u64 size = cfg(CFG_FRAG_SIZE);

	if (!size)
		size = FRAG_SIZE_DEF;
	if (size > FRAG_CAP)
		size = FRAG_CAP;
	return n && *n > 0 && (__u64)*n >= size;
}

/* first_end is where a first fragment ends for the fragments that follow,
 * in 8-byte units (ipfr_firstend; the engine's firstFragEnd): an IPv4 TCP
 * first fragment counts as at least 20 bytes long, even when its header is
 * cut (a fragment at 16 overlaps it, one at 24 does not); behind an IPv4
 * AH header the least is AH's 12 bytes instead, whatever follows it. */
static __always_inline __u32 first_end(const struct pktinfo *p)
{
	__u32 e = p->dlen >> 3, least = 0;

	if (p->family == 4 && p->proto == IPPROTO_AH)
		least = 2;
	else if (p->family == 4 && p->l4proto == IPPROTO_TCP)
		least = 3;
	return e < least ? least : e;
}

/* frag_makes_entry reports whether ipfr_frag_new makes an entry for this
 * fragment: none for one IPFilter calls bad (SYN|FIN, ...), nor for a
 * first fragment too short for its header, except IPv4 TCP (first_end),
 * ICMP, ICMPv6 (an error quoting less than the 40-byte header it should)
 * and an IPv4 AH header cut short (nothing parsed behind it). */
static __always_inline int frag_makes_entry(const struct pktinfo *p)
{
	if ((p->flags & (PF_FRAG | PF_BAD)) != PF_FRAG)
		return 0;
	return !(p->flags & PF_SHORT) || p->fragoff || p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6 ||
	       (p->family == 4 && p->l4proto == IPPROTO_TCP) ||
	       (p->proto == IPPROTO_AH && p->l4proto == 59);
}

/* sl_frag_lookup finds the cached verdict of an earlier fragment of this
 * packet's datagram (ipf_frag_lookup, §3.8). It returns 1 on a hit, 0 on
 * none (also a retransmitted first fragment, and with keep frags (strict)
 * a fragment out of order, and a fragment that starts inside the first
 * one: an attack on reassembly, which it marks PF_BAD | PF_BADFRAG). */
GLOBAL int sl_frag_lookup(__u64 now)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct frag_entry *e;
	__u32 o;

	if (!w)
		return 0;
	p = &w->p;
	frag_key_of(&w->fk, p);
	e = bpf_map_lookup_elem(&frags, &w->fk);
	if (!e)
		return 0;
	if (e->expire <= now) {
		frag_del(&w->fk);
		return 0;
	}
	o = p->fragoff >> 3;
	if (e->seen0) {
		if (o == 0)
			return 0;
		if (e->first_end && o < e->first_end) {
			/* bad, and on to the rules (ipf_frag_lookup) */
			p->flags |= PF_BAD | PF_BADFRAG;
			return 0;
		}
	} else if (o == 0) {
		e->seen0 = 1;
		e->first_end = first_end(p);
	}
	if ((e->pass & FR_FRSTRICT) && o != e->next_off)
		return 0;
	if (o == e->next_off)
		e->next_off = o + (p->dlen >> 3);
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	w->hit_slot = e->slot;
	w->hit_idx = e->rule;
	w->hit_rev = 0;
	return 1;
}

/* sl_frag_add caches the verdict of this fragment, which frag_add has put
 * in the work area's fe (the rule's pass, numbers, slot and index; the
 * time in expire), for the rest of its datagram (ipf_frag_new). An
 * entry that has not expired stays; with keep frags (strict) only the
 * first fragment makes one. */
GLOBAL int sl_frag_add(void)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct frag_entry *old, *e;
	__u32 pass;
	__u64 now;

	if (!w)
		return 0;
	p = &w->p;
	pass = w->fe.pass;
	now = w->fe.expire;
	if ((pass & FR_FRSTRICT) && p->fragoff)
		return 0;
	frag_key_of(&w->fk, p);
	old = bpf_map_lookup_elem(&frags, &w->fk);
	if (old) {
		if (old->expire > now)
			return 0;
		frag_del(&w->fk);
	}
	/* a full table refuses new datagrams (ipf_frag_new); the sweeper
	 * takes out the entries of those whose rest never came */
	if (frag_full())
		return 0;
	e = &w->fe;
	e->expire = now + cfg(CFG_FRAG_TTL);
	e->next_off = (p->fragoff >> 3) + (p->dlen >> 3);
	if (p->fragoff == 0) {
		e->seen0 = 1;
		e->first_end = first_end(p);
	}
	if (bpf_map_update_elem(&frags, &w->fk, e, BPF_NOEXIST) == 0)
		frag_count_add(1);
	return 0;
}

/* frag_add_w is sl_frag_add for the rule at idx of slot, the entry made
 * in w: filter() passes its own, so that what it reads from w for the
 * arguments is not kept across a lookup of it (in its frame) */
static __always_inline void frag_add_w(struct work *w, __u32 pass, __u32 rule_no, __u32 group_no, __u32 logtag,
				       __u64 now, __u32 slot, __u32 idx)
{
	/* the arguments in the entry it makes (now in expire): spilled
	 * across the call's first helper they made its frame 48 bytes, at
	 * the end of the longest call chain (sl_state_create's) */
	__builtin_memset(&w->fe, 0, sizeof(w->fe));
	w->fe.expire = now;
	w->fe.pass = pass;
	w->fe.rule_no = rule_no;
	w->fe.group_no = group_no;
	w->fe.logtag = logtag;
	w->fe.slot = slot;
	w->fe.rule = idx;
	sl_frag_add();
}

/* frag_add is frag_add_w in this CPU's work area */
static __always_inline void frag_add(__u32 pass, __u32 rule_no, __u32 group_no, __u32 logtag, __u64 now,
				     __u32 slot, __u32 idx)
{
	struct work *w = get_work();

	if (w)
		frag_add_w(w, pass, rule_no, group_no, logtag, now, slot, idx);
}

#endif
