/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * keep state (max-srcs N, max-per-src M[/bits]): IPFilter's source
 * tracking (ipf_state_add's checks against is_srcnodes), as the Go
 * engine's Table.admit and insert keep it. A rule's entries are counted by
 * their source masked to the rule's bits (SRC_ADDR keys) and the sources
 * with entries by rule (SRC_RULE keys); an entry of a new source past N,
 * or one more of a source past M, is refused. Only the making and the end
 * of an entry come here, never a packet of an established flow.
 *
 * A key's count moves by atomic add, so a count's step from 0 to 1 and
 * from 1 to 0 is taken by exactly one CPU (the add returns the count it
 * found): the one that takes a
 * source's count from 0 counts the source in its rule, the one that takes
 * it back to 0 gives the source back, then marks the key SRC_DEAD and
 * deletes it (a key at zero would hold a place in the table for ever
 * under a flood of sources; the mark is a compare-and-swap from 0, so a
 * getter that came in between keeps it). A getter meeting a dead key
 * fails: the entry
 * is refused, as when the table is full (fail closed; the window is the
 * few instructions before the delete). What stays open: the limits are
 * read before the count moves, so CPUs adding entries of one rule at once
 * may pass a limit by one each, as state_limit's check may; and a CPU
 * whose new source its rule's limit refuses takes the source's count back
 * to zero without giving a source back, which another CPU counting that
 * source meanwhile (not a new one to it) leaves the rule a source short
 * of its entries until they go.
 */
#ifndef SLUICE_SRCS_H
#define SLUICE_SRCS_H

#include <bpf/bpf_endian.h>
#include "common.h"

#define SRC_FAIL (-1) /* the table is full, or the key is being deleted */
#define SRC_OVER (-2) /* the count is at the limit */

/* src_mask keeps the first bits of family's address a, as the engine's
 * netip.Prefix: bits 0 or past the address's length keep it whole. */
static __always_inline void src_mask(__u32 *a, __u8 family, __u32 bits)
{
	__u32 len = family == 4 ? 32 : 128;

	if (bits == 0 || bits > len)
		bits = len;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 lo = i * 32;

		if (bits <= lo)
			a[i] = 0;
		else if (bits < lo + 32)
			a[i] &= bpf_htonl(~0U << (32 - (bits - lo)));
	}
}

/* src_get counts one more under k unless limit (0: none) is reached and
 * returns the count before, SRC_OVER or SRC_FAIL. The limit is read
 * before the add, as state_limit's: CPUs adding at once may pass it by
 * one each (an add taken back when over it made the verifier's walk and
 * the frame larger, at the end of the longest call chain). */
static __always_inline long src_get(struct work *w, struct src_key *k, __u64 limit)
{
	__u64 *v = bpf_map_lookup_elem(&srcs, k);
	__u64 o;

	if (!v) {
		/* a limit is at least 1: the first is always let in (the 1
		 * from the work area: the frames that count stay small, the
		 * stack being full at their depth) */
		w->src_one = 1;
		if (bpf_map_update_elem(&srcs, k, &w->src_one, BPF_NOEXIST) == 0)
			return 0;
		/* full, or another CPU made it meanwhile */
		v = bpf_map_lookup_elem(&srcs, k);
		if (!v)
			return SRC_FAIL;
	}
	o = *(volatile __u64 *)v;
	if (o & SRC_DEAD)
		return SRC_FAIL;
	if (limit && o >= limit)
		return SRC_OVER;
	o = __sync_fetch_and_add(v, 1);
	if (o & SRC_DEAD) {
		/* its releaser is deleting it: refused */
		__sync_fetch_and_add(v, -1);
		return SRC_FAIL;
	}
	return o;
}

/* src_put counts one less under k and returns 1 when it took the count to
 * zero (the key is then deleted, unless a getter came in between). A put
 * finding zero or a dead key (a count it never held: an entry of an older
 * Sluice, or the narrow races above) leaves it. */
static __always_inline int src_put(struct src_key *k)
{
	__u64 *v = bpf_map_lookup_elem(&srcs, k);
	__u64 o;

	if (!v || *(volatile __u64 *)v == 0)
		return 0;
	o = __sync_fetch_and_add(v, -1);
	if (o == 0 || (o & SRC_DEAD)) {
		__sync_fetch_and_add(v, 1); /* never below zero */
		return 0;
	}
	if (o == 1 && __sync_val_compare_and_swap(v, 0, SRC_DEAD) == 0)
		bpf_map_delete_elem(&srcs, k);
	return o == 1;
}

/* src_hold counts an entry of source key k (SRC_ADDR; its address is
 * masked to the work area's src_bits here): limits src_mps (max-per-src)
 * and src_ms (max-srcs), 0 for none, as ipf_state_add checks them, the
 * source first (in the work area, not arguments: kept in registers
 * across the map calls they made the frames larger). Returns 0 when
 * counted, SRC_OVER or SRC_FAIL when not (nothing counted). Only in
 * global functions (sl_state_create by src_new, sl_src_entry): verified
 * once, not at each caller. */
static __always_inline long src_hold(struct work *w, struct src_key *k)
{
	struct src_key *rk;
	long n;

	src_mask(k->addr, k->family, w->src_bits);
	/* the rule's key in the work area: the stack is full at the depth
	 * of state_create */
	rk = &w->srck_rule;
	n = src_get(w, k, w->src_mps);
	if (n > 0)
		return 0;
	if (n < 0)
		return n;
	/* a new source for the rule */
	*rk = *k;
	__builtin_memset(rk->addr, 0, sizeof(rk->addr));
	rk->kind = SRC_RULE;
	n = src_get(w, rk, w->src_ms);
	if (n < 0) {
		/* not counted in the rule: so taking it back to zero must not
		 * give a source back */
		src_put(k);
		return n;
	}
	return 0;
}

/* src_release gives back what src_hold counted under k (SRC_ADDR):
 * the entry, and the source when it was its last; k is left masked to
 * bits and, when it was the last, its rule's key (no room on the stack
 * for a copy). */
static __always_inline int src_release(struct src_key *k, __u32 bits)
{
	src_mask(k->addr, k->family, bits);
	if (!src_put(k))
		return 0;
	__builtin_memset(k->addr, 0, sizeof(k->addr));
	k->kind = SRC_RULE;
	src_put(k);
	return 1;
}


#endif
