/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The rule scan (ipf_scanlist, ipf-reference 2.3): last match wins
 * unless quick, skip, groups, call now and deferred calls, the candidate
 * index.
 */
#ifndef SLUICE_SCAN_H
#define SLUICE_SCAN_H

#include "common.h"
#include "match.h"

int sl_state_create(__u32 slot, __u32 idx, __u32 pass, __u64 now);

/* quick_state adds the state of a quick keep-state rule during the scan
 * (§2.3): it returns 0 when the entry cannot be added, and the scan then
 * restores the previous verdict and goes on with the next rule. Rules with
 * a keep limit are left to the creation after the scan, which counts the
 * connection as well. */
static __always_inline int quick_state(struct scan *s, struct pktinfo *p)
{
	__u32 pass = s->pass;
	struct rule *r;

	if (!(pass & FR_KEEPSTATE) || (pass & FR_CMDMASK) == FR_AUTH ||
	    (p->flags & PF_STATE) || s->rule == 0)
		return 1;
	r = rule_at(s->slot, s->rule - 1);
	if (!r || r->keep_limit)
		return 1;
	if (sl_state_create(s->slot, s->rule - 1, pass, s->now) <= 0)
		return 0;
	p->flags |= PF_STATE;
	return 1;
}

/* call_group returns the list a srcgrpmap/dstgrpmap call names for the
 * packet's address, 0 when the address is not in the group-map or the
 * group is not in the set. */
static __always_inline __u32 call_group(const struct rule *r, const struct pktinfo *p, __u32 slot)
{
	struct pool_key k = {};
	struct pool_val *v;

	if (!KHAS(FEAT_POOL) || r->call == CALL_NONE)
		return 0;
	k.prefixlen = 96 + (p->family == 4 ? 32 : 128);
	k.slot = slot;
	k.table = r->call_table;
	k.family = p->family;
	__builtin_memcpy(k.addr, r->call == CALL_DSTGRPMAP ? p->dst : p->src, 16);
	v = bpf_map_lookup_elem(&pools, &k);
	return v ? v->group : 0;
}

/* scan_quick ends the scan at a quick rule; inside a called group only
 * that group's scan ends (the caller goes on with its result). */
static __always_inline long scan_quick(struct scan *s)
{
	if (s->ncall == 0) {
		s->done = 1;
		return 1;
	}
	s->pos = s->end;
	return 0;
}

/* scan_apply is the part of ipf_scanlist that follows a match of rule pos
 * (slot-relative): the rule itself, or the result of a `call now`. */
/* scan_act records what a matching rule at pos does to the scan: a log
 * rule queues a record, a skip rule sets the skip, any other rule gives
 * the verdict (the full rule's scan_apply and the hot list's compact
 * path share it). */
static __always_inline void scan_act(struct scan *s, __u32 act, __u32 skip, __u32 pos)
{
	__u32 passo = s->pass;

	s->rule = pos + 1;
	if ((act & (FR_CMDMASK | FR_LOG)) == FR_LOG) {
		if (s->nlogs < MAX_LOGS) {
			s->logs[s->nlogs & (MAX_LOGS - 1)] = pos;
			s->nlogs++;
		}
	} else if ((act & FR_CMDMASK) == FR_SKIP) {
		s->skip = skip;
	} else {
		s->passo = passo;
		s->pass = act;
	}
}

static __always_inline long scan_apply(struct scan *s, struct pktinfo *p, const struct rule *r, __u32 pos)
{
	__u32 passo = s->pass;

	scan_act(s, r->action, r->skip, pos);
	if (r->head) {
		struct list *l;
		__u32 lk = s->lbase + r->head;

		l = bpf_map_lookup_elem(&lists, &lk);
		if (l && l->count && s->depth < MAX_DEPTH) {
			__u32 d = s->depth & (MAX_DEPTH - 1);

			s->stack_pos[d] = s->pos;
			s->stack_end[d] = s->end;
			s->stack_passo[d] = passo;
			/* a head frame's rule slot holds the head (its state
			 * add at the group's end, below) */
			s->stack_rule[d] = pos + 1;
			s->stack_call[d] = 0;
			s->stack_skip[d] = s->skip;
			s->skip = 0;
			s->depth++;
			s->pos = l->start;
			s->end = l->start + l->count;
			return 0;
		}
	}
	/* quick is the verdict's: a log or skip rule ends the scan when the
	 * pass it leaves is quick (a called group starts from the call rule's) */
	if (s->pass & FR_QUICK) {
		if (quick_state(s, p))
			return scan_quick(s);
		s->pass = passo;
	}
	return 0;
}

/* run_hash is the runs bitmap's hash of an IPv4 run's entry (runs.go
 * runHash): two multiplies, so that addresses a few bits apart (a
 * blocklist's consecutive hosts) spread over the whole bitmap. */
static __always_inline __u64 run_hash(__u32 head, __u32 addr)
{
	__u64 x = (((__u64)head << 32) | addr) * RUN_HASH_K1;

	x ^= x >> 32;
	return x * RUN_HASH_K2;
}

/* run_flat_mask is the three bits of entry hash x in its word of the
 * small sets' bitmap (RUN_FLAT; runs.go runFlatBits). */
static __always_inline __u64 run_flat_mask(__u64 x)
{
	return (1ULL << ((x >> 48) & 63)) | (1ULL << ((x >> 42) & 63)) | (1ULL << ((x >> 36) & 63));
}

/* run_flat_absent says that slot's IPv4 runs have no entry of hash x: one
 * of its three bits in the slot's small bitmap is clear. The key is the
 * caller's (a place on its stack). */
static __always_inline int run_flat_absent(__u32 slot, __u64 x, __u32 *key)
{
	__u64 *word;

	*key = slot * RUN_FLAT_WORDS + (__u32)(x >> (64 - RUN_FLAT_LOG));
	word = bpf_map_lookup_elem(&run_flat, key);
	return word && (*word & run_flat_mask(x)) != run_flat_mask(x);
}

/* run_big_word is the word of bit h (a hash shifted by run_bits' shift)
 * in slot's words of the large sets' bitmap (RUN_BIG), or NULL where the
 * array has none (the datapath's one-entry array: run_bits then). The
 * word's index is masked to the slot's words. */
static __always_inline __u64 *run_big_word(__u32 slot, __u64 h, __u32 *key)
{
	*key = 1 + slot * RUN_BIG_WORDS + (__u32)((h >> 6) & (RUN_BIG_WORDS - 1));
	return bpf_map_lookup_elem(&run_flat_big, key);
}

/* run_absent says that slot's IPv4 runs have no entry (head, addr): its
 * bit in the slot's bitmap is clear. shift is the bitmap's, from the
 * run's compact match (RUN_FLAT: the small sets' bitmap; RUN_BIG: the
 * large sets' array, else run_bits); without one (0: a slot an older
 * Sluice wrote) or a bitmap it says nothing. It never says so of an
 * entry the runs have (TestPrivilegedRunBits). */
static __always_inline int run_absent(__u32 slot, __u32 head, __u32 addr, __u32 shift)
{
	__u64 *word, h;
	__u32 wi;
	void *bits;

	if (shift & RUN_FLAT)
		return slot < NSLOTS && run_flat_absent(slot, run_hash(head, addr), &wi);
	if (shift & RUN_BIG) {
		shift &= ~RUN_BIG;
		if (shift == 0 || shift > 63 || slot >= NSLOTS)
			return 0;
		h = run_hash(head, addr) >> shift;
		word = run_big_word(slot, h, &wi);
		if (word)
			return !(*word & (1ULL << (h & 63)));
	}
	if (shift == 0 || shift > 63)
		return 0;
	bits = bpf_map_lookup_elem(&run_bits, &slot);
	if (!bits)
		return 0;
	h = run_hash(head, addr) >> shift;
	wi = h >> 6;
	word = bpf_map_lookup_elem(bits, &wi);
	return word && !(*word & (1ULL << (h & 63)));
}

/* run4_absent is run_absent for the packet and the IPv4 run at pos whose
 * compact match (CM_RUN4) is c. */
static __always_inline int run4_absent(const struct pktinfo *p, const struct cmatch *c, __u32 slot, __u32 pos)
{
	int src = c->flags & CM_RUNSRC;

	return run_absent(slot, pos, (src ? p->src[0] : p->dst[0]) & (src ? c->smask : c->dmask), src ? c->src : c->dst);
}

/* scan_run decides the run that starts at rule pos (r): when the packet
 * passes the tests its rules share, the runs table names the one rule of
 * the run its address matches, if any, and that rule matches as the scan
 * would have found it. The caller has moved the scan past the run. */
static __always_inline long scan_run(struct scan *s, struct pktinfo *p, const struct rule *r, __u32 pos)
{
	__u32 slot = s->slot, *idx, src = r->run_field == M_SRC;
	const __u32 *a = src ? p->src : p->dst, *m = src ? r->smask : r->dmask;
	/* one key's room for either table (the frame is nearly full) */
	union {
		struct run_key k;
		struct run4_key k4;
	} k = {};
	struct rule *mr;
	void *tab = NULL;

	if (!rule_match_but(r, p, slot, r->run_field))
		return 0;
	if (r->family == 4) {
		/* an IPv4 run: the packet is IPv4 (rule_match_but) */
		tab = bpf_map_lookup_elem(&runs4, &slot);
		if (tab) {
			k.k4.head = pos;
			k.k4.addr = a[0] & m[0];
			idx = bpf_map_lookup_elem(tab, &k.k4);
		}
	}
	if (!tab) {
		/* an IPv6 run, or a slot an older Sluice wrote */
		tab = bpf_map_lookup_elem(&runs, &slot);
		if (!tab)
			return 0;
		k.k.head = pos;
		k.k.addr[0] = a[0] & m[0];
		k.k.addr[1] = a[1] & m[1];
		k.k.addr[2] = a[2] & m[2];
		k.k.addr[3] = a[3] & m[3];
		idx = bpf_map_lookup_elem(tab, &k.k);
	}
	if (!idx)
		return 0;
	pos = *idx & (RULE_CAP - 1);
	mr = rule_at(slot, pos);
	if (!mr)
		return 0;
	rule_count(mr, p->plen);
	return scan_apply(s, p, mr, pos);
}

/* lowbit is the index of the lowest set bit of x (x != 0). */
static __always_inline __u32 lowbit(__u64 x)
{
	__u32 n = 0;

	if (!(x & 0xffffffffULL)) {
		n += 32;
		x >>= 32;
	}
	if (!(x & 0xffff)) {
		n += 16;
		x >>= 16;
	}
	if (!(x & 0xff)) {
		n += 8;
		x >>= 8;
	}
	if (!(x & 0xf)) {
		n += 4;
		x >>= 4;
	}
	if (!(x & 0x3)) {
		n += 2;
		x >>= 2;
	}
	if (!(x & 0x1))
		n += 1;
	return n;
}

/* next_candidate is where the scan goes from block blk, which is not a
 * candidate (rest: its word of the bitmap from blk on): the first rule of
 * the next candidate block, or the end of the list. */
static __always_inline __u32 next_candidate(const struct scan *s, __u32 blk, __u64 rest)
{
	__u32 next = s->end, w = (blk >> 6) + 1;

	if (rest) {
		next = (blk + lowbit(rest)) << BLOCK_SHIFT;
	} else {
		for (int i = 0; i < BLOCK_WORDS; i++) {
			__u64 c;

			if (w >= BLOCK_WORDS || ((w << 6) << BLOCK_SHIFT) >= s->end)
				break;
			c = s->cand[w & (BLOCK_WORDS - 1)];
			if (c) {
				next = ((w << 6) + lowbit(c)) << BLOCK_SHIFT;
				break;
			}
			w++;
		}
	}
	return next < s->end ? next : s->end;
}

#define CM_FOUND 0x80000000

/* sl_cm_next tests the rules from pos to the end of pos's block (or of
 * the list, end) by their compact matches. It returns the first one the
 * packet passes, with CM_FOUND, or where the scan goes on when none does
 * (a run that fails is passed over whole). */
GLOBAL __u32 sl_cm_next(__u32 slot, __u32 pos, __u32 end)
{
	struct work *w = get_work();
	struct cblock *cb;
	__u32 bend;

	if (!w)
		return pos | CM_FOUND;
	cb = slot_elem(&cblocks, slot, pos >> BLOCK_SHIFT);
	if (!cb)
		return pos | CM_FOUND;
	bend = (pos | ((1 << BLOCK_SHIFT) - 1)) + 1;
	if (end < bend)
		bend = end;
	for (int j = 0; j < (1 << BLOCK_SHIFT); j++) {
		__u32 k, n;

		if (pos >= bend)
			break;
		k = pos & ((1 << BLOCK_SHIFT) - 1);
		/* an IPv4 run the packet's address has no bit of is passed
		 * over like a run the packet fails */
		if (cm_ok(&cb->m[k], &w->p) &&
		    !((cb->m[k].flags & CM_RUN4) && run4_absent(&w->p, &cb->m[k], slot, pos)))
			return pos | CM_FOUND;
		n = cb->run_len[k];
		pos += n > 1 ? n : 1;
	}
	return pos;
}

static long scan_step(__u32 i, void *ctx)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct scan *s;
	struct rule *r;
	__u32 pos;

	if (!w)
		return 1;
	p = &w->p;
	s = &w->s;

	if (s->pos >= s->end) {
		__u32 d;

		if (s->depth == 0) {
			s->done = 1;
			return 1;
		}
		s->depth--;
		d = s->depth & (MAX_DEPTH - 1);
		s->pos = s->stack_pos[d];
		s->end = s->stack_end[d];
		/* a skip counts within its own list (ipf_scanlist's local) */
		s->skip = s->stack_skip[d];
		if (s->stack_call[d]) {
			/* end of a called group: its last matching rule, if
			 * any, stands for the call rule (ipf_scanlist) */
			__u32 gr = s->rule;

			s->ncall--;
			s->pass = s->stack_pass[d];
			s->rule = s->stack_rule[d];
			if (!gr)
				return 0;
			pos = (gr - 1) & (RULE_CAP - 1);
			r = rule_at(s->slot, pos);
			if (!r)
				return 1;
			rule_count(r, p->plen);
			return scan_apply(s, p, r, pos);
		}
		if (s->pass & FR_QUICK) {
			/* ipf_scanlist adds the entry of a quick keep-state
			 * verdict the group left for the head (fin_fr = fr),
			 * not for a group rule whose own add failed (faith17:
			 * its full limit made a quick block head pass) */
			if ((s->pass & FR_KEEPSTATE) && (s->pass & FR_CMDMASK) != FR_AUTH &&
			    !(p->flags & PF_STATE))
				s->rule = s->stack_rule[d];
			if (quick_state(s, p))
				return scan_quick(s);
			s->pass = s->stack_passo[d];
		}
		return 0;
	}
	pos = s->pos;
	if (pos >= RULE_CAP)
		return 1;
	if (s->use_index && s->skip == 0) {
		__u32 blk = pos >> BLOCK_SHIFT;

		__u64 rest = s->cand[(blk >> 6) & (BLOCK_WORDS - 1)] >> (blk & 63);

		if (!(rest & 1)) {
			/* straight to the next candidate block, in this step:
			 * a step each 64 blocks made a 10 000-rule scan that
			 * matches nothing a dozen steps of skipping */
			s->pos = next_candidate(s, blk, rest);
			return 0;
		}
	}
	if (s->skip == 0) {
		/* the rules of this block the packet fails by their compact
		 * matches, passed over in this step */
		__u32 n = sl_cm_next(s->slot, pos, s->end);

		if (!(n & CM_FOUND)) {
			s->pos = n;
			return 0;
		}
		pos = n & (RULE_CAP - 1);
	}
	s->pos = pos + 1;
	if (s->skip) {
		s->skip--;
		return 0;
	}
	r = rule_at(s->slot, pos);
	if (!r)
		return 1;
	if (r->run_len > 1) {
		s->pos = pos + r->run_len;
		return scan_run(s, p, r, pos);
	}
	if (!rule_match(r, p, s->slot))
		return 0;

	if (r->action & FR_CALLNOW) {
		/* call now: scan the group the group-map names; no entry,
		 * no group or nothing matching there and the rule is passed
		 * over */
		__u32 g = call_group(r, p, s->slot);
		struct list *l;
		__u32 lk, d;

		__sync_fetch_and_add(&r->hits, 1);
		if (!g || s->depth >= MAX_DEPTH)
			return 0;
		lk = s->lbase + g;
		l = bpf_map_lookup_elem(&lists, &lk);
		if (!l || !l->count)
			return 0;
		d = s->depth & (MAX_DEPTH - 1);
		s->stack_pos[d] = s->pos;
		s->stack_end[d] = s->end;
		s->stack_passo[d] = s->passo;
		s->stack_pass[d] = s->pass;
		s->stack_rule[d] = s->rule;
		s->stack_call[d] = 1;
		s->stack_skip[d] = s->skip;
		s->skip = 0;
		s->depth++;
		s->ncall++;
		s->pass = r->action;
		s->rule = 0;
		s->pos = l->start;
		s->end = l->start + l->count;
		return 0;
	}
	rule_count(r, p->plen);
	return scan_apply(s, p, r, pos);
}

/* index_port looks a port up in a port dimension of the index: a packet
 * without ports has its own entry, a port no rule names the 0x20000 one. */
static __always_inline struct blocks *index_port(void *map, __u32 slot, struct pktinfo *p, __u16 port)
{
	struct port_key pk = {};
	struct blocks *b;

	pk.slot = slot;
	pk.port = (p->flags & PF_PORTS) ? port : 0x10000;
	b = bpf_map_lookup_elem(map, &pk);
	if (!b && (p->flags & PF_PORTS)) {
		pk.port = 0x20000;
		b = bpf_map_lookup_elem(map, &pk);
	}
	return b;
}

/* index_addr looks an address up in an address dimension of the index. */
static __always_inline struct blocks *index_addr(void *map, __u32 slot, struct pktinfo *p, const __u32 *addr)
{
	struct lpm_key lk = {};

	lk.prefixlen = 64 + (p->family == 4 ? 32 : 128);
	lk.slot = slot;
	lk.family = p->family;
	__builtin_memcpy(lk.addr, addr, 16);
	if (p->family == 4) {
		lk.addr[1] = lk.addr[2] = lk.addr[3] = 0;
	}
	return bpf_map_lookup_elem(map, &lk);
}

static __always_inline void load_index(struct scan *s, struct pktinfo *p, __u32 slot, __u64 on)
{
	struct blocks *a, *b, *c, *d;

	s->use_index = 0;
	if (!(on & IDX_ON))
		return;
	a = index_addr(&idx_dst, slot, p, p->dst);
	b = index_port(&idx_dport, slot, p, p->dport);
	if (!a || !b)
		return;
	/* a dimension the slot lacks selects everything: AND a again */
	c = a;
	d = b;
	if (on & IDX_SRC) {
		c = index_addr(&idx_src, slot, p, p->src);
		if (!c)
			return;
	}
	if (on & IDX_SPORT) {
		d = index_port(&idx_sport, slot, p, p->sport);
		if (!d)
			return;
	}
#pragma unroll
	for (int w = 0; w < BLOCK_WORDS; w++)
		s->cand[w] = a->w[w] & b->w[w] & c->w[w] & d->w[w];
	s->use_index = 1;
}

/* sl_hot_run decides the run at pos of a hot list whose compact match
 * the packet passed (scan_run). It returns 1 when the scan ends there. */
GLOBAL int sl_hot_run(__u32 slot, __u32 pos)
{
	struct work *w = get_work();
	struct rule *r;

	if (!w)
		return 1;
	slot %= NSLOTS;
	pos &= RULE_CAP - 1;
	r = rule_at(slot, pos);
	if (!r)
		return 1;
	return scan_run(&w->s, &w->p, r, pos) != 0;
}

/* sl_rule_match matches rule pos whole (a rule that tests more than its
 * compact match holds). */
GLOBAL int sl_rule_match(__u32 slot, __u32 pos)
{
	struct work *w = get_work();
	struct rule *r;

	if (!w)
		return 0;
	slot %= NSLOTS;
	r = rule_at(slot, pos);
	return r && rule_match(r, &w->p, slot);
}

/* sl_hot_quick is quick_state for a hot list's rule (a call of its own
 * keeps the rule lookup and the state creation off sl_scan's stack). */
GLOBAL int sl_hot_quick(void)
{
	struct work *w = get_work();

	return w ? quick_state(&w->s, &w->p) : 1;
}

/* sl_hot_run_may says whether a rule of the run at pos (a hot list's
 * entry with CM_RUN4, which the packet passed, flags its compact match's,
 * mask its run's address mask and shift its slot's bitmap's) may match:
 * the packet's IPv4 address, masked as the run's rules mask it, has its
 * bit in the runs bitmap (most packets of a blocklist's traffic do not:
 * one line read) and is in the IPv4 runs table (scan_run's key). A call
 * of its own: sl_scan's frame has no room left. */
GLOBAL int sl_hot_run_may(__u32 pos, __u32 flags, __u32 mask, __u32 shift)
{
	struct work *w = get_work();
	struct run4_key k4;
	struct run_key *k;
	__u32 addr;
	void *tab;

	if (!w)
		return 1;
	addr = ((flags & CM_RUNSRC) ? w->p.src[0] : w->p.dst[0]) & mask;
	if (run_absent(w->s.slot, pos, addr, shift))
		return 0;
	tab = bpf_map_lookup_elem(&runs4, &w->s.slot);
	if (tab) {
		k4.head = pos;
		k4.addr = addr;
		return bpf_map_lookup_elem(tab, &k4) != NULL;
	}
	/* a slot an older Sluice wrote: its IPv4 runs are in runs, the
	 * other words 0 */
	tab = bpf_map_lookup_elem(&runs, &w->s.slot);
	if (!tab)
		return 1;
	k = &w->hk;
	k->head = pos;
	k->addr[0] = addr;
	k->addr[1] = k->addr[2] = k->addr[3] = 0;
	return bpf_map_lookup_elem(tab, k) != NULL;
}

/* scan_hot scans a short main list without groups or calls from its
 * compact form: one lookup for the list, the compact match of each rule
 * in place, and what a matching rule does (scan_apply: a hot list has no
 * head rules) without fetching it. */
static __always_inline void scan_hot(struct work *w, const struct hotlist *hl, __u32 hk)
{
	struct scan *s = &w->s;
	struct pktinfo *p = &w->p;

	for (int i = 0; i < HOT_MAX; i++) {
		struct hot_count *hc;
		const struct hot *h;
		__u32 passo, pos;

		if (i >= hl->n)
			break;
		if (s->skip) {
			s->skip--;
			continue;
		}
		h = &hl->r[i];
		if (!cm_ok(&h->m, p))
			continue;
		pos = h->pos;
		if (h->m.flags & CM_RUN) {
			/* most packets have no rule in a blocklist's run: then
			 * one lookup and on (a hit is decided whole by
			 * sl_hot_run, which looks it up again) */
			if ((h->m.flags & CM_RUN4) &&
			    !sl_hot_run_may(pos, h->m.flags, (h->m.flags & CM_RUNSRC) ? h->m.smask : h->m.dmask,
					    (h->m.flags & CM_RUNSRC) ? h->m.src : h->m.dst))
				continue;
			if (sl_hot_run(s->slot, pos))
				break;
			continue;
		}
		if ((h->m.flags & CM_FULL) && !sl_rule_match(s->slot, pos))
			continue;
		hc = bpf_map_lookup_elem(&hot_counts, &hk);
		if (hc) {
			hc->c[i].hits++;
			hc->c[i].bytes += p->plen;
		}
		passo = s->pass;
		scan_act(s, h->action, h->skip, pos);
		if (s->pass & FR_QUICK) {
			if (sl_hot_quick())
				break;
			s->pass = passo;
		}
	}
	s->done = 1;
}

/* scan_list runs the scan over one list and returns the pass flags;
 * main: the list may be a main list, with a compact form. */
static __always_inline __u32 scan_list(struct scan *s, __u32 slot, __u32 list, __u32 pass, int main)
{
	struct list *l;
	__u32 lk = slot * MAX_LISTS + list;

	s->lbase = slot * MAX_LISTS;
	s->slot = slot;
	s->pass = pass;
	s->rule = 0;
	s->depth = 0;
	s->ncall = 0;
	s->skip = 0;
	s->nlogs = 0;
	s->done = 0;
	s->cut = 0;
	/* a main list in compact form needs nothing of lists: its rules'
	 * positions are in the hot list (one line fewer per packet) */
	if (main && list < LIST_GROUP0) {
		__u32 hk = slot * LIST_GROUP0 + list;
		struct hotlist *hl = bpf_map_lookup_elem(&hotlists, &hk);
		struct work *w = get_work();

		if (hl && (hl->ok & HOT_COMPACT) && w) {
			scan_hot(w, hl, hk);
			return s->pass;
		}
	}
	l = bpf_map_lookup_elem(&lists, &lk);
	if (!l || l->count == 0)
		return pass;
	s->pos = l->start;
	s->end = l->start + l->count;
	bpf_loop(SCAN_BUDGET, scan_step, NULL, 0);
	if (!s->done) {
		/* cannot happen for a set the loader checked (CompileSet
		 * proves every scan ends within SCAN_BUDGET steps); should it,
		 * no rule is skipped silently: the caller blocks the packet */
		s->cut = 1;
		stat_inc(ST_SCANCUT);
	}
	return s->pass;
}

GLOBAL int sl_scan(__u32 slot, __u32 list, __u32 pass)
{
	struct work *w = get_work();

	if (!w)
		return pass;
	return scan_list(&w->s, slot, list, pass, 1);
}

/* sl_call runs the deferred call of rule idx after the scan (ipf_firewall):
 * it scans the group the group-map names and returns its last matching
 * rule + 1, 0 when there is none. */
GLOBAL int sl_call(__u32 slot, __u32 idx, __u32 pass)
{
	struct work *w = get_work();
	struct rule *r;
	__u32 g;

	if (!w)
		return 0;
	r = rule_at(slot, idx);
	if (!r)
		return 0;
	g = call_group(r, &w->p, slot);
	if (!g)
		return 0;
	/* a group: never a main list's compact form */
	scan_list(&w->s, slot, g, pass, 0);
	return w->s.rule;
}

#endif
