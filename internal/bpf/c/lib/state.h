/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The state table (ipf_state.c, ipf-reference 3): keys, lookup forward,
 * reverse and wildcard, the TCP state machine and window tracking,
 * creation with its limits, ICMP errors matched to the flow they quote.
 */
#ifndef SLUICE_STATE_H
#define SLUICE_STATE_H

#include <linux/in.h>
#include "common.h"
#include "parse.h" /* sl_ipv4_options, for a quoted header */
#include "frag.h"
#include "srcs.h"

static __always_inline void make_key(struct state_key *k, const struct pktinfo *p, int rev)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->proto = p->proto;
	k->family = p->family;
	if (!rev) {
		__builtin_memcpy(k->src, p->src, 16);
		__builtin_memcpy(k->dst, p->dst, 16);
		k->sport = p->sport;
		k->dport = p->dport;
	} else {
		__builtin_memcpy(k->src, p->dst, 16);
		__builtin_memcpy(k->dst, p->src, 16);
		k->sport = p->dport;
		k->dport = p->sport;
	}
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		k->sport = p->icmpid;
		k->dport = p->icmp >> 8;
	} else if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) {
		k->sport = k->dport = 0;
	}
}

/* query_of returns the query type an ICMP reply answers, or -1. */
static __always_inline int query_of(__u8 proto, __u8 type)
{
	if (proto == IPPROTO_ICMP) {
		switch (type) {
		case 0: return 8;
		case 14: return 13;
		case 16: return 15;
		case 18: return 17;
		}
		return -1;
	}
	switch (type) {
	case 129: return 128;
	case 131: return 130;
	case 134: return 133;
	case 136: return 135;
	case 140: return 139;
	}
	return -1;
}

/* canon_order puts k's two ends in a fixed order, the same for both
 * directions of a flow (any total order does: word by word as loaded),
 * and returns 1 when it swapped them. ICMP keys order the addresses only
 * (their ports, id and query type, are the flow's both ways). *sym is set
 * when both ends are the same: either direction is then the entry's own. */
static __always_inline __u8 canon_order(struct state_key *k, int icmp, int *sym)
{
	int c = 0;

#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (c == 0 && k->src[i] != k->dst[i])
			c = k->src[i] < k->dst[i] ? -1 : 1;
	}
	if (!icmp && c == 0 && k->sport != k->dport)
		c = k->sport < k->dport ? -1 : 1;
	*sym = c == 0;
	if (c <= 0)
		return 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 t = k->src[i];

		k->src[i] = k->dst[i];
		k->dst[i] = t;
	}
	if (!icmp) {
		__u16 t = k->sport;

		k->sport = k->dport;
		k->dport = t;
	}
	return 1;
}

static __always_inline int is_icmp(__u8 proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

/* canon_key makes k the canonical key of p's flow and returns p's
 * orientation in it (canon_order's, written in order at once: this is
 * every state lookup's key). An ICMP reply is keyed by the query it
 * answers. */
static __always_inline __u8 canon_key(struct state_key *k, const struct pktinfo *p, int *sym)
{
	__u16 sp = p->sport, dp = p->dport;
	int icmp = is_icmp(p->proto), c = 0;

	if (icmp) {
		int q = query_of(p->proto, p->icmp >> 8);

		sp = p->icmpid;
		dp = q >= 0 ? q : p->icmp >> 8;
	} else if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) {
		sp = dp = 0;
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (c == 0 && p->src[i] != p->dst[i])
			c = p->src[i] < p->dst[i] ? -1 : 1;
	}
	if (!icmp && c == 0 && sp != dp)
		c = sp < dp ? -1 : 1;
	*sym = c == 0;
	k->proto = p->proto;
	k->family = p->family;
	k->wild = 0;
	k->twin = 0;
	if (c <= 0) {
		__builtin_memcpy(k->src, p->src, 16);
		__builtin_memcpy(k->dst, p->dst, 16);
		k->sport = sp;
		k->dport = dp;
		return 0;
	}
	__builtin_memcpy(k->src, p->dst, 16);
	__builtin_memcpy(k->dst, p->src, 16);
	k->sport = icmp ? sp : dp;
	k->dport = icmp ? dp : sp;
	return 1;
}

/* dm_idx is k's slot in st_dm: a multiplicative hash of its words (the
 * high bits folded down at each step; IPv6's other address words XORed
 * into one). Go's dmIdx is the same. */
static __always_inline __u32 dm_pfwt(const struct state_key *k)
{
	return (__u32)k->proto | ((__u32)k->family << 8) | ((__u32)k->wild << 16) | ((__u32)k->twin << 24);
}

static __always_inline __u32 dm_idx(const struct state_key *k)
{
	__u32 h = k->src[0] * 0x9e3779b1;

	h = (h ^ (h >> 16) ^ k->dst[0]) * 0x85ebca77;
	h = (h ^ (h >> 16) ^ ((__u32)k->sport | ((__u32)k->dport << 16))) * 0xc2b2ae3d;
	h = (h ^ (h >> 16) ^ k->src[1] ^ k->src[2] ^ k->src[3] ^ k->dst[1] ^ k->dst[2] ^ k->dst[3] ^ dm_pfwt(k)) *
	    0x27d4eb2f;
	h ^= h >> 16;
	return h & (ST_DM_SLOTS - 1);
}

/* dm_key_eq: slot s holds key k. The IPv4 words first (line 0); an IPv6
 * key's other words are in line 3. */
static __always_inline int dm_key_eq(const struct st_slot *s, const struct state_key *k)
{
	if ((s->ksrc ^ k->src[0]) | (s->kdst ^ k->dst[0]) |
	    (s->kports ^ ((__u32)k->sport | ((__u32)k->dport << 16))) | (s->kpfwt ^ dm_pfwt(k)))
		return 0;
	if (k->family != 6)
		return 1;
	return !((s->khi[0] ^ k->src[1]) | (s->khi[1] ^ k->src[2]) | (s->khi[2] ^ k->src[3]) |
		 (s->khi[3] ^ k->dst[1]) | (s->khi[4] ^ k->dst[2]) | (s->khi[5] ^ k->dst[3]));
}

static __always_inline void dm_key_set(struct st_slot *s, const struct state_key *k)
{
	s->ksrc = k->src[0];
	s->kdst = k->dst[0];
	s->kports = (__u32)k->sport | ((__u32)k->dport << 16);
	s->khi[0] = k->src[1];
	s->khi[1] = k->src[2];
	s->khi[2] = k->src[3];
	s->khi[3] = k->dst[1];
	s->khi[4] = k->dst[2];
	s->khi[5] = k->dst[3];
	s->kpfwt = dm_pfwt(k);
}

static __always_inline struct st_slot *dm_slot(const struct state_key *k)
{
	__u32 i = dm_idx(k);

	return bpf_map_lookup_elem(&st_dm, &i);
}

/* dm_slot_k is dm_slot for a key the caller may write: the index is put
 * in k's port word for the lookup (the helper reads its key from memory)
 * and the ports put back: slot_detach needs no stack of its own. */
static __always_inline struct st_slot *dm_slot_k(struct state_key *k)
{
	__u32 *w = (__u32 *)&k->sport, ports = *w;
	struct st_slot *s;

	*w = dm_idx(k);
	s = bpf_map_lookup_elem(&st_dm, w);
	*w = ports;
	return s;
}

/* slot_writeback gives e what slot s took of it (under s's lock): the
 * lifetime and the window tracking, which packets decided through the
 * slot moved there, and the counts, added to CPU stripe cpu. Only to the
 * element the slot was filled from (its creation time): a key's element
 * replaced meanwhile is another entry. */
static __always_inline void slot_writeback(struct st_slot *s, struct state_entry *e, __u32 cpu)
{
	struct state_cnt *c = &e->cnt[cpu & (STATE_STRIPES - 1)];

	if (s->created != e->created)
		return;
	e->expire = s->expire;
	e->last = s->last;
	__builtin_memcpy(e->tcp, s->tcp, sizeof(e->tcp));
#pragma unroll
	for (int i = 0; i < 4; i++) {
		c->pkts[i] += s->pkts[i];
		c->bytes[i] += s->bytes[i];
		s->pkts[i] = 0;
		s->bytes[i] = 0;
	}
}

/* slot_detach empties the slot of key k (a concrete entry's) if it holds
 * it, writing what it took back into e, k's element: every writer of an
 * entry but the established path calls it first, so the element is whole
 * again before it is read or changed. seq moves by two: a packet that
 * read the slot before fails its commit, a fill in flight its check. A
 * function of its own, with no stack (dm_slot_k): inlined, its spills
 * grew the deepest call chain's frames past the verifier's 512 bytes. */
static __always_inline void slot_detach_inl(struct state_key *k, struct state_entry *e)
{
	struct st_slot *s = dm_slot_k(k);
	__u32 cpu;

	if (!s || !dm_key_eq(s, k))
		return;
	cpu = bpf_get_smp_processor_id();
	bpf_spin_lock(&s->lock);
	if (dm_key_eq(s, k)) {
		/* a packet that read the slot before this fails its swap */
		__sync_fetch_and_add(&s->seq, 2);
		if (s->valid && e)
			slot_writeback(s, e, cpu);
		s->kpfwt = 0;
		s->valid = 0;
	}
	bpf_spin_unlock(&s->lock);
}

static __noinline void slot_detach(struct state_key *k, struct state_entry *e)
{
	slot_detach_inl(k, e);
}

/* slot_sync writes what the slot of k took back into e and keeps the slot:
 * the sweeper reads the element's lifetime, state and last packet. */
static __always_inline void slot_sync(const struct state_key *k, struct state_entry *e)
{
	struct st_slot *s = dm_slot(k);
	__u32 cpu;

	if (!s || !dm_key_eq(s, k))
		return;
	cpu = bpf_get_smp_processor_id();
	bpf_spin_lock(&s->lock);
	if (dm_key_eq(s, k) && s->valid)
		slot_writeback(s, e, cpu);
	bpf_spin_unlock(&s->lock);
}

/* state_find looks up canonical key k for a packet of orientation swap:
 * the flow's entry, going the packet's way (*rev = 0) when fwd_ok or the
 * other way (*rev = 1) when rev_ok. A flow with entries both ways
 * (SF_TWIN) gives its twin first, unless notwin: the twin is always the
 * newer of the two (state_put adds it beside the key's entry, and
 * state_promote leaves one), and IPFilter's lookup walks a hash bucket
 * newest first (ipf_state_insert puts an entry at its head), taking the
 * first entry that matches the packet, whichever way it goes, as the
 * engine's Lookup does; the key's entry is the older one, tried after
 * the twin refused the packet (sl_state_lookup). One hash lookup, two
 * for a flow with entries both ways. k then names the entry returned. */
static __always_inline struct state_entry *state_find(struct state_key *k, __u8 swap, int sym, int fwd_ok,
						      int rev_ok, int *rev, int notwin)
{
	struct state_entry *e = bpf_map_lookup_elem(&states, k), *t;
	int fwd;

	if (!e)
		return NULL;
	/* the pipeline reads and writes the element: whole again first */
	slot_detach(k, e);
	if (sym) {
		/* both ends the same: one entry, either way round */
		*rev = !fwd_ok;
		return e;
	}
	fwd = !!(e->flags & SF_SWAP) == swap;
	if ((e->flags & SF_TWIN) && !notwin) {
		/* the twin goes the other way round from the key's entry */
		k->twin = 1;
		t = bpf_map_lookup_elem(&states, k);
		if (t && (fwd ? rev_ok : fwd_ok)) {
			*rev = fwd;
			return t;
		}
		k->twin = 0;
	}
	if (fwd ? fwd_ok : rev_ok) {
		*rev = !fwd;
		return e;
	}
	return NULL;
}

/* SET stores v in x unless x holds it already: a flow's entry is shared
 * by the CPUs its two directions run on, and a store that changes nothing
 * still takes the cache line from the other CPU. (The clock is the coarse
 * one: a lifetime changes once a tick, not once a packet.) */
#define SET(x, v) do { __typeof__(x) v_ = (v); if ((x) != v_) (x) = v_; } while (0)

static __always_inline __u64 tcp_timeout(__u8 st)
{
	return cfg(CFG_TO_TCP + ((st & 15) < 12 ? (st & 15) : 11));
}

/* tcp_life is the lifetime a TCP entry gets from a packet that leaves its
 * side in state st: the rule's age for the packet's direction when the
 * rule has one (keep state (age N[/M]): IPFilter queues the entry on the
 * rule's queue, is_tqehead[rev], and ipf_tcp_age leaves a rule-based
 * entry there whatever the state; ipftest -Dv shows the rule's ticks),
 * else the state's timeout. */
static __always_inline __u64 tcp_life(__u32 age, __u8 st)
{
	return age ? (__u64)age * 1000000000ULL : tcp_timeout(st);
}

/*
 * The state count's invariant (rel10): at quiescence state_count[0] equals
 * the number of entries in `states`, state_count[1] the wildcard ones
 * among them, and each rule's rule_states count the entries it made (of
 * its slot's generation). Every entry is counted once, by whoever put it
 * in, and given back once, by whoever took it out: the map's insert
 * (BPF_NOEXIST) and delete are atomic per key, so of CPUs racing for a
 * key exactly one succeeds, and only the success moves the count. The
 * paths, each keeping it where it is written:
 *   - state_create: counts before state_put and gives it back when the
 *     put fails (two CPUs inserting the same key: the loser inserted
 *     nothing and keeps no count); counted only after the put, an unlink
 *     racing in between left its rule a count too many. A replace (a
 *     packet the old entry could not match) removes the old through
 *     state_unlink, then puts again.
 *   - state_unlink (expiry on lookup, a new SYN on a closed flow, the
 *     sweeper, the watermark flush, ipf -FS through sluice_control): deletes
 *     through state_take, only while the key still holds the entry the
 *     caller saw, and releases what the deleted entry held, only when its
 *     own delete succeeded; a delete that finds the key gone or holding
 *     another entry (another CPU, the sweeper or a flush was first)
 *     changes nothing.
 *   - wild_fill moves a wildcard entry: its delete decides who moves it,
 *     the count goes with it; the put under the concrete key failing
 *     (an entry is there) releases it.
 *   - state_promote moves a twin to its key's own place: the copy is
 *     counted as an entry of its own before it is visible and the twin
 *     released when its delete succeeds (it once went uncounted between
 *     the two, and a sweeper or packet removing the copy meanwhile then
 *     released it once too often).
 * The est path (lib/est.h) changes entries in place and never adds or
 * removes one. What is left open: the few instructions between
 * state_take's lookup and its delete (an entry replaced there is removed
 * in the new one's stead), and a twin added while its key's entry goes,
 * left without SF_TWIN on the key (found by no lookup, counted, it
 * expires).
 */

/* state_held_of fills h with what entry e holds. */
static __always_inline void state_held_of(struct state_held *h, const struct state_entry *e)
{
	h->slot = e->slot;
	h->rule = e->rule;
	h->gen = e->gen;
	h->flags = e->flags;
	h->srcbits = e->srcbits;
}

/* src_of_entry makes sk the source key of an entry under key k made by
 * rule of slot in generation gen, with flags in how's low byte: the
 * creating packet's source, the key's dst for an entry made the key's
 * reverse way (SF_SWAP), else its src (a wildcard key's is the packet's).
 * Unmasked (src_hold and src_release mask it). */
static __always_inline void src_of_entry(struct src_key *sk, const struct state_key *k, __u32 slot, __u32 rule,
					 __u32 gen, __u32 how)
{
	__builtin_memset(sk, 0, sizeof(*sk));
	sk->slot = slot;
	sk->rule = rule;
	sk->gen = gen;
	sk->family = k->family;
	__builtin_memcpy(sk->addr, (how & SF_SWAP) && !k->wild ? k->dst : k->src, 16);
}

/* sl_src_undo, at the end of sl_state_create, gives back what src_new
 * counted when the create failed, and the source of the entry a replace
 * in state_create removed (state_unlink_later). */
GLOBAL int sl_src_undo(__u32 failed)
{
	struct work *w = get_work();

	if (!w)
		return 0;
	if (w->src_held && failed)
		src_release(&w->srck, w->src_held);
	w->src_held = 0;
	if (w->held.srcbits) {
		src_of_entry(&w->srck_rel, &w->rel_key, w->held.slot, w->held.rule, w->held.gen, w->held.flags);
		src_release(&w->srck_rel, w->held.srcbits);
	}
	w->held.srcbits = 0;
	return 0;
}

/* src_new counts the entry state_create is to make for the packet in
 * the work area, by rule idx of slot (of the slot's generation) if it
 * has max-srcs; the source key stays in the work area (srck) for
 * sl_src_undo. Returns src_hold's. Inline in sl_state_create, first: as
 * a call of its own its frame (32 bytes) ended the longest call chain,
 * sluice_ingress > sl_scan > scan_step > sl_state_create > it, past the
 * verifier's 512-byte limit; inline, its values die before
 * state_create's live, and the frame does not grow. */
static __always_inline long src_new(__u32 slot, __u32 idx)
{
	struct work *w = get_work();
	struct src_key *sk;
	struct rule *r;
	long n;

	if (!w)
		return SRC_FAIL;
	sk = &w->srck;
	w->src_held = 0;
	w->held.srcbits = 0;
	r = rule_at(slot, idx);
	if (!r || !r->src_bits)
		return 0;
	__builtin_memset(sk, 0, sizeof(*sk));
	sk->slot = slot;
	sk->rule = idx;
	sk->gen = cfg(CFG_GEN0 + (slot % NSLOTS));
	sk->family = w->p.family;
	__builtin_memcpy(sk->addr, w->p.src, 16);
	w->src_bits = r->src_bits;
	w->src_mps = r->max_per_src;
	w->src_ms = r->max_srcs;
	n = src_hold(w, sk);
	if (n == 0)
		w->src_held = w->src_bits;
	return n;
}

/* sl_src_entry counts (how >> 16: take) or gives back the source of the
 * entry under key k made by rule of slot in generation gen, how being its
 * flags | its source's bits << 8 (src_of_entry). The source key is built
 * in the work area: no stack at the depths that unlink entries. Returns
 * src_hold's. */
GLOBAL long sl_src_entry(struct state_key *k, __u32 slot, __u32 rule, __u32 gen, __u32 how)
{
	struct work *w = get_work();

	if (!k || !w)
		return SRC_FAIL;
	src_of_entry(&w->srck_rel, k, slot, rule, gen, how);
	if (how >> 16) {
		w->src_bits = (how >> 8) & 0xff;
		w->src_mps = 0;
		w->src_ms = 0;
		return src_hold(w, &w->srck_rel);
	}
	src_release(&w->srck_rel, (how >> 8) & 0xff);
	return 0;
}

/* state_src calls sl_src_entry for h (in scalars: h's address taken
 * would put it on the callers' stack, at its limit in state_create). */
static __always_inline long state_src(struct state_held *h, struct state_key *k, __u32 take)
{
	return sl_src_entry(k, h->slot, h->rule, h->gen, h->flags | (__u32)h->srcbits << 8 | take << 16);
}

/* state_hold takes what state_release gives back but the source's, for
 * the entry h describes (state_promote's copy, which takes its twin's
 * source count over as it is: see there). */
static __always_inline void state_hold(struct state_held *h)
{
	__u32 zero = 0, slot = h->slot;
	__u32 *n;
	__s64 *cnt;

	n = slot_elem(&rule_states, slot % NSLOTS, h->rule);
	cnt = bpf_map_lookup_elem(&state_count, &zero);
	if (n && h->gen == cfg(CFG_GEN0 + (slot % NSLOTS)))
		__sync_fetch_and_add(n, 1);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
}

/* state_release gives back what an entry held: its place in state_count
 * and in its rule's count (keep state (limit N)), when the slot still
 * holds the rules of the generation that made it, and its source's
 * (max-srcs, whatever the generation: that is keyed by it) when src, k
 * being the key its flags in h are relative to. */
static __always_inline void state_release(struct state_held *h, struct state_key *k, int src)
{
	__u32 zero = 0, slot = h->slot;
	__u32 *n = slot_elem(&rule_states, slot % NSLOTS, h->rule);
	__s64 *cnt = bpf_map_lookup_elem(&state_count, &zero);

	if (n && *n > 0 && h->gen == cfg(CFG_GEN0 + (slot % NSLOTS)))
		__sync_fetch_and_add(n, -1);
	if (cnt)
		__sync_fetch_and_add(cnt, -1);
	if (src && h->srcbits)
		state_src(h, k, 0);
}

/* wild_add moves state_count[1], the wildcard entries' count. */
static __always_inline void wild_add(__s64 n)
{
	__u32 one = 1;
	__s64 *w = bpf_map_lookup_elem(&state_count, &one);

	if (w)
		__sync_fetch_and_add(w, n);
}

/* state_take deletes the entry under k if it is still e and returns 1
 * when this call deleted it, with what it held in *h: read from the
 * entry at the key just before the delete, not from what the caller saw
 * earlier. A caller's e may have gone meanwhile (another CPU unlinked it,
 * or promoted a twin to its key; the map may even have given its memory
 * to the new entry): releasing what e held then gave back another rule's
 * count, and the rule of the entry deleted kept one too many for ever
 * (TestPrivilegedStateCountRaces, on main: a twin's rule). What stays
 * open is the few instructions between this lookup and the delete. */
static __always_inline int state_take(struct state_key *k, struct state_entry *e, struct state_held *h)
{
	struct state_entry *cur = bpf_map_lookup_elem(&states, k);

	if (!cur || cur != e)
		return 0;
	state_held_of(h, cur);
	if (bpf_map_delete_elem(&states, k) != 0)
		return 0;
	/* after the delete: a fill checks the hash after it writes, so
	 * either it finds the element gone or this finds its slot (est11) */
	slot_detach(k, NULL);
	return 1;
}

/* state_promote moves the twin of canonical key k (the flow's entry the
 * other way round) to k itself, whose entry has just gone: a key's twin is
 * only looked for through the key's own entry. The copy goes in first, so
 * that a packet of the twin's way finds one of them throughout; while both
 * are there each is an entry of its own, counted and released as any
 * (the invariant above): the sweeper may meet and remove either. But for
 * its source's count (max-srcs), which the pair holds once, as one entry:
 * the copy takes the twin's over, and whoever removes the copy gives it
 * back; here only the twin's removal by this call gives nothing back,
 * and when another CPU removed the twin (and gave it back) the copy's
 * removal here gives nothing back either. */
static __always_inline void state_promote(struct state_key *k)
{
	struct state_entry *t, *m;
	struct state_held h; /* the twin's: held by the copy, then taken */

	k->twin = 1;
	t = bpf_map_lookup_elem(&states, k);
	k->twin = 0;
	if (!t)
		return;
	state_held_of(&h, t);
	/* counted before it can be found: an unlink racing in finds the
	 * count raised, and a packet reading the count (the pipeline looks
	 * state up only when it is above zero) never sees fewer entries than
	 * there are */
	state_hold(&h);
	if (bpf_map_update_elem(&states, k, t, BPF_NOEXIST) != 0) {
		/* the key has an entry again (another CPU made one): the twin
		 * stays where it is */
		state_release(&h, k, 0);
		return;
	}
	m = bpf_map_lookup_elem(&states, k);
	k->twin = 1;
	if (state_take(k, t, &h)) {
		state_release(&h, k, 0);
	} else if (m) {
		/* another CPU removed (and released) the twin meanwhile:
		 * so does the copy go, unless someone removed it first */
		k->twin = 0;
		if (state_take(k, m, &h))
			state_release(&h, k, 0);
	}
	k->twin = 0;
}

/* state_unlink removes the entry e under k from the table and, when this
 * call is the one that removed it (another CPU, the sweeper or ipf -FS may
 * race for it), releases it: every removal goes through here, so
 * state_count always equals the number of entries. */
static __always_inline int state_unlink(struct state_key *k, struct state_entry *e)
{
	struct state_held h;
	int wild = k->wild;

	if (!state_take(k, e, &h))
		return 0;
	state_release(&h, k, 1);
	if (wild)
		wild_add(-1);
	if (!k->twin && !wild && (h.flags & SF_TWIN))
		state_promote(k);
	return 1;
}

/* state_unlink_later is state_unlink for state_create's replace: what
 * the entry held goes straight to the work area (w->held, under its key
 * w->rel_key), and its source's count is given back at the end of
 * sl_state_create (sl_src_undo), whose frame has no room for the call.
 * Not through a struct on the stack: its fields, kept across the map
 * calls that release the counts, made sl_state_create's frame 16 bytes
 * larger, past the 512-byte limit of the longest call chain. */
static __always_inline int state_unlink_later(struct state_key *k, struct state_entry *e, struct work *w)
{
	struct state_held *h = &w->held;
	int wild = k->wild;

	if (!state_take(k, e, h)) {
		/* state_take may have filled h before a failed delete: this
		 * call removed nothing, so nothing is to be given back */
		h->srcbits = 0;
		return 0;
	}
	state_release(h, k, 0);
	if (h->srcbits)
		w->rel_key = *k;
	if (wild)
		wild_add(-1);
	if (!k->twin && !wild && (h->flags & SF_TWIN))
		state_promote(k);
	return 1;
}

/* state_put adds entry ep under canonical (or wildcard) key k: as the
 * key's entry, or as its twin when that one goes the other way round.
 * It returns 1 when added, 0 when an entry going ep's way is there
 * already (*old, under k), -1 when neither could be done. */
static __always_inline int state_put(struct state_key *k, struct state_entry *ep, struct state_entry **old)
{
	struct state_entry *e;

	k->twin = 0;
	ep->flags &= ~SF_TWIN;
	*old = NULL;
	if (bpf_map_update_elem(&states, k, ep, BPF_NOEXIST) == 0)
		return 1;
	e = bpf_map_lookup_elem(&states, k);
	if (!e)
		return -1;
	if ((e->flags & SF_SWAP) == (ep->flags & SF_SWAP) || k->wild) {
		*old = e;
		return 0;
	}
	k->twin = 1;
	if (bpf_map_update_elem(&states, k, ep, BPF_NOEXIST) == 0) {
		state_flags_set(e, SF_TWIN);
		/* after the flag: a slot filled before it holds the flags
		 * without SF_TWIN, and goes */
		k->twin = 0;
		slot_detach(k, e);
		k->twin = 1;
		return 1;
	}
	*old = bpf_map_lookup_elem(&states, k);
	return *old ? 0 : -1;
}

/* tcp_fsm_sides applies IPFilter's per-direction TCP state machine (§3.3)
 * to the packet's side me, the other side and the lifetime *expire, and
 * returns 0 when the packet must be rejected. They are the entry's own
 * (tcp_fsm) or the copies the established path checks before it stores
 * them (lib/est.h). eflags are the entry's SF_* flags, f the segment's TCP
 * flags, data its payload bytes, age the rule's age for the packet's
 * direction (seconds, 0 for none: tcp_life). */
static __always_inline int tcp_fsm_sides(struct tcp_side *me, struct tcp_side *other, __u64 *expire, __u8 eflags,
					 __u8 f, __u32 data, __u32 age, __u64 now)
{
	__u8 n = me->state, o = other->state;
	int syn_created = eflags & SF_SYN;

	if (f & 0x04) { /* RST */
		SET(me->state, (!(f & 0x08) && data == 0) ? TS_CLOSED : TS_CLOSE_WAIT);
		if (o <= TS_ESTABLISHED)
			SET(other->state, TS_CLOSE_WAIT);
		SET(*expire, now + tcp_life(age, me->state));
		return 1;
	}
#define TO(x) do { SET(me->state, (x)); SET(*expire, now + tcp_life(age, x)); return 1; } while (0)
#define RESTART() do { SET(*expire, now + tcp_life(age, me->state)); return 1; } while (0)
	switch (n) {
	case TS_LISTEN:
		if ((f & 0x12) == 0x12)
			TO(TS_SYN_RECEIVED);
		if (f & 0x02)
			TO(TS_SYN_SENT);
		if (!syn_created && (f & 0x17) == 0x10) {
			if (o == TS_LISTEN || o == TS_SYN_RECEIVED)
				TO(TS_HALF_ESTAB);
			if (o == TS_HALF_ESTAB || o == TS_ESTABLISHED)
				TO(TS_ESTABLISHED);
		}
		return 0;
	case TS_SYN_SENT:
		if ((f & 0x3f) == 0x02)
			return 1;
		if ((f & 0x13) == 0x10)
			TO(TS_ESTABLISHED);
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		if ((f & 0x12) == 0x12)
			TO(TS_SYN_RECEIVED);
		return 0;
	case TS_SYN_RECEIVED:
		if ((f & 0x13) == 0x10)
			TO(TS_ESTABLISHED);
		if ((f & 0x3f) == 0x12)
			return 1;
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		return 0;
	case TS_HALF_ESTAB:
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		if ((f & 0x17) == 0x10) {
			if (o == TS_HALF_ESTAB || o == TS_ESTABLISHED)
				TO(TS_ESTABLISHED);
			/* a follow-on packet of a flow picked up mid-way, only
			 * while the other side has not closed (ipf_tcp_state) */
			if (o == TS_LISTEN || o == TS_SYN_SENT || o == TS_SYN_RECEIVED)
				RESTART();
		}
		return 0;
	case TS_ESTABLISHED:
		if (f & 0x01)
			TO(o == TS_FIN_WAIT_1 ? TS_CLOSING : TS_FIN_WAIT_1);
		if ((f & 0x10) && o == TS_FIN_WAIT_1)
			TO(TS_CLOSE_WAIT);
		if ((f & 0x10) && o < TS_CLOSE_WAIT)
			TO(TS_ESTABLISHED);
		RESTART();
	case TS_CLOSE_WAIT:
		if (f & 0x01)
			TO(TS_LAST_ACK);
		TO(TS_CLOSE_WAIT);
	case TS_FIN_WAIT_1:
		if ((f & 0x10) && o > TS_CLOSE_WAIT)
			TO(TS_LAST_ACK);
		TO(TS_FIN_WAIT_1);
	case TS_CLOSING:
		if ((f & 0x11) == 0x10)
			TO(TS_TIME_WAIT);
		RESTART();
	case TS_LAST_ACK:
		if (f & 0x10)
			RESTART();
		return 0;
	case TS_FIN_WAIT_2:
		return 0;
	case TS_TIME_WAIT:
		if (o == TS_LAST_ACK)
			TO(TS_CLOSED);
		return 1;
	case TS_CLOSED:
		return 1;
	}
#undef TO
#undef RESTART
	return 0;
}

/* tcp_data is a segment's payload: the L4 bytes behind its header. */
static __always_inline __u32 tcp_data(const struct pktinfo *p)
{
	return p->dlen > p->doff * 4 ? p->dlen - p->doff * 4 : 0;
}

/* tcp_fsm is tcp_fsm_sides on entry e, for a packet going its way (rev 0)
 * or the other (rev 1). */
static __always_inline int tcp_fsm(struct state_entry *e, int rev, const struct pktinfo *p, __u64 now)
{
	return tcp_fsm_sides(rev ? &e->tcp[1] : &e->tcp[0], rev ? &e->tcp[0] : &e->tcp[1], &e->expire, e->flags,
			     p->tcpflags, tcp_data(p), e->age[rev & 1], now);
}

static __always_inline int seq_ge(__u32 a, __u32 b) { return (__s32)(a - b) >= 0; }
static __always_inline int seq_gt(__u32 a, __u32 b) { return (__s32)(a - b) > 0; }

/* What the window check reads of a TCP segment. */
struct tcp_seg {
	__u32 seq;
	__u32 ack;
	__u32 data;  /* payload bytes */
	__u16 win;
	__u8 flags;
	__u8 wscale; /* from a SYN's options, 0xff if none */
	__u8 sackok;
};

/* tcp_window_sides implements §3.4 on the sending side fs and the
 * receiving side ts (an entry's own or copies, as tcp_fsm_sides) of an
 * entry with SF_* flags eflags and rule flags epass; returns 0 when the
 * segment is out of window. */
static __always_inline int tcp_window_sides(struct tcp_side *fs, struct tcp_side *ts, __u8 eflags, __u32 epass,
					    const struct tcp_seg *s)
{
	__u8 f = s->flags;
	__u32 len = s->data + ((f & 0x02) ? 1 : 0) + ((f & 0x01) ? 1 : 0);
	__u32 win, end, seq = s->seq, ack = s->ack, maxwin;
	__s32 ackskew;
	int syn_created = eflags & SF_SYN, inwin = 0;

	if (epass & FR_STLOOSE)
		return 1;
	if (f & 0x02) {
		win = s->win;
		if (s->wscale != 0xff) {
			/* the options read again (ipf_tcpoptions): the first
			 * segment after it takes its window as it is, as after
			 * the creating SYN (tcp_init; the engine's
			 * parseTCPOptions). Without FIRST the SYN-ACK's side
			 * kept its SYN's window as its largest (TestPrivileged-
			 * SYNOptions) */
			fs->wscale = s->wscale;
			fs->wflags |= WF_WSCALE_SEEN | WF_WSCALE_FIRST;
		}
		if (s->sackok)
			fs->wflags |= WF_SACK;
	} else {
		win = (__u32)s->win << (fs->wscale & 15);
	}
	if (win == 0)
		win = 1;
	end = seq + len;
	if (!(f & 0x02) && (fs->wflags & WF_WSCALE_FIRST)) {
		fs->wflags &= ~WF_WSCALE_FIRST;
		fs->maxwin = win;
	}
	if (fs->end == 0 && (!syn_created || (f & 0x12) == 0x12)) {
		fs->end = end - 1;
		fs->maxwin = 1;
		fs->maxend = end + win;
	}
	if (!(f & 0x10) || ((f & 0x14) && ack == 0))
		ack = ts->end;
	maxwin = ts->maxwin;
	ackskew = (__s32)(ts->end - ack);
	if ((epass & FR_STSTRICT) && seq != fs->end)
		return 0;
	if (seq_ge(fs->maxend, end) && seq_ge(seq, fs->end - maxwin) &&
	    -ackskew <= 66000 && ackskew <= (66000 << (fs->wscale & 15)))
		inwin = 1;
	else if (seq == fs->maxend && ackskew == 0 && (fs->wflags & WF_SACK) && (ts->wflags & WF_SACK))
		inwin = 1;
	else if (seq == 0 && (f & 0x3f) == 0x14 && ackskew >= -1 && ackskew <= 1)
		inwin = 1;
	else if (!syn_created && !(fs->wflags & (WF_WSCALE_SEEN | WF_WSCALE_FIRST)) &&
		 ((seq == fs->maxend && ackskew == 0) || seq_ge(seq + maxwin, fs->end - maxwin)))
		inwin = 1;
	if (!inwin)
		return 0;
	if (ackskew < 0)
		ts->end = ack;
	if (win > fs->maxwin)
		fs->maxwin = win;
	if (seq_gt(end, fs->end))
		fs->end = end;
	if (seq_gt(ack + win, ts->maxend))
		ts->maxend = ack + win;
	return 1;
}

/* tcp_window is tcp_window_sides on entry e for packet p (rev as tcp_fsm). */
static __always_inline int tcp_window(struct state_entry *e, int rev, const struct pktinfo *p)
{
	struct tcp_seg s = {
		.seq = p->seq, .ack = p->ack, .data = tcp_data(p), .win = p->win,
		.flags = p->tcpflags, .wscale = p->wscale, .sackok = p->sackok,
	};

	return tcp_window_sides(rev ? &e->tcp[1] : &e->tcp[0], rev ? &e->tcp[0] : &e->tcp[1], e->flags, e->pass, &s);
}

static __always_inline void tcp_init(struct state_entry *e, const struct pktinfo *p)
{
	__u8 f = p->tcpflags;
	/* IPFilter's segment length, fin_dlen - th_off * 4: negative (mod
	 * 2^32) for a first fragment whose TCP header is cut, whose entry's
	 * end then lies before its sequence number (semantics
	 * frag6-tcp-cut-first-end, as the engine) */
	__u32 data = p->dlen - p->doff * 4;
	__u32 len = data + ((f & 0x02) ? 1 : 0) + ((f & 0x01) ? 1 : 0);
	__u32 win = p->win;

	if (win == 0)
		win = 1;
	e->tcp[0].end = e->tcp[0].maxend = p->seq + len;
	e->tcp[0].maxwin = win;
	e->tcp[1].maxwin = 1;
	if (p->wscale != 0xff) {
		e->tcp[0].wscale = p->wscale;
		e->tcp[0].wflags |= WF_WSCALE_SEEN | WF_WSCALE_FIRST;
	}
	if (p->sackok)
		e->tcp[0].wflags |= WF_SACK;
	if (f & 0x10) {
		/* any first packet with an ACK, a SYN-ACK too */
		e->tcp[1].end = e->tcp[1].maxend = p->ack;
		e->tcp[1].maxwin = 4 * win;
	}
}

/* state_opt is the option set state compares: the IPv6 fragment header is
 * ignored, so fragments and whole packets belong to one flow. */
static __always_inline __u32 state_opt(const struct pktinfo *p)
{
	return p->family == 6 ? p->optbits & ~V6X_FRAG : p->optbits;
}

/* wild_dst reports a packet whose state entry gets a wildcard destination
 * (§3.1): multicast or broadcast IPv4, ICMPv6 to a multicast address. */
static __always_inline int wild_dst(const struct pktinfo *p)
{
	if (p->family == 4)
		return !!(p->flags & (PF_MCAST | PF_BCAST | PF_MBCAST));
	return p->proto == IPPROTO_ICMPV6 && (p->dst[0] & 0xff) == 0xff;
}

/* to_group reports a packet IPFilter hashes without its destination: to
 * an IPv4 multicast group, or an ICMPv6 packet to an IPv6 one (a TCP or
 * UDP packet to an IPv6 group is hashed with it). Only wildcard entries
 * find it (the engine's groupHash). */
static __always_inline int to_group(const struct pktinfo *p)
{
	if (p->family == 4)
		return (p->dst[0] & 0xf0) == 0xe0;
	return p->proto == IPPROTO_ICMPV6 && (p->dst[0] & 0xff) == 0xff;
}

/* in_place reports a packet to a group whose first hash is the bucket
 * IPFilter makes the group's entries in (their source's): an outbound
 * IPv4 packet, any ICMPv6 one (IPFilter hashes an inbound IPv4 packet to
 * a group without its source and finds an entry only by its wildcard
 * retry). A wildcard entry such a packet uses going its way is filled in
 * where it is (wild_place: under its group key), and later such packets
 * find it there: an outbound stream to a group keeps one entry (faith21;
 * the engine's fillInPlace). */
static __always_inline int in_place(const struct pktinfo *p)
{
	return to_group(p) && (p->out || p->family == 6);
}

/* reverse_key makes the key a reply of p would find its entry under;
 * returns 0 when p cannot be a reply (an ICMP type that answers nothing). */
static __always_inline int reverse_key(struct state_key *k, const struct pktinfo *p)
{
	make_key(k, p, 1);
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		int q = query_of(p->proto, p->icmp >> 8);

		if (q < 0)
			return 0;
		k->dport = q;
	}
	return 1;
}

/* state_lookup finds the entry for p (forward, then reverse, then the
 * wildcard-destination entries both ways) and applies the TCP checks; it
 * returns the entry or NULL. A wildcard entry that matches is filled in
 * with the packet's address and moved to its concrete key; the returned
 * pointer is then the copy in scratch. */
/* STATE_RETIRED is how many retired keys a flow has (twin 2 on). */
#define STATE_RETIRED 3

/* state_retire adds ep, a filled wildcard entry whose canonical key k
 * already holds an entry going its way (and a twin going the other), under
 * one of k's retired keys (twin 2, 3, ...): found by no lookup, it is
 * counted and listed as an entry of its own until the sweeper expires it
 * or ipf -FS removes it, as the engine keeps a second entry of one key in
 * its hash chain (IPFilter's table: an inbound stream to a multicast group
 * makes an entry every second packet, each filled to the same key). It
 * keeps what the wildcard entry held. Returns 1 when added. */
static __always_inline int state_retire(struct state_key *k, struct state_entry *ep)
{
	__u8 twin = k->twin;
	int done = 0;

	if (k->wild)
		return 0;
	ep->flags &= ~SF_TWIN;
	for (__u8 i = 2; i < 2 + STATE_RETIRED && !done; i++) {
		k->twin = i;
		done = bpf_map_update_elem(&states, k, ep, BPF_NOEXIST) == 0;
	}
	k->twin = twin;
	return done;
}

/* wild_fill moves the wildcard entry e (at key k) to the flow's canonical
 * key, filled in with p's addresses, and returns the copy in scratch. */
static __always_inline struct state_entry *wild_fill(struct state_key *k, struct state_entry *e,
						     struct pktinfo *p, int rev, struct state_entry *scratch)
{
	struct state_entry *old;
	struct state_held h;
	__u8 swap;
	int sym;

	__builtin_memcpy(scratch, e, sizeof(*scratch));
	/* whoever removes the wildcard entry moves it: when another CPU did
	 * (and released it), this packet still had its match */
	if (!state_take(k, e, &h))
		return scratch;
	wild_add(-1);
	/* under the flow's canonical key, going the way it went: the
	 * packet's way unless the packet is its reply */
	swap = canon_key(k, p, &sym);
	scratch->flags &= ~SF_SWAP;
	if (!sym && (swap ^ rev))
		scratch->flags |= SF_SWAP;
	if (state_put(k, scratch, &old) != 1 && !state_retire(k, scratch)) {
		/* a concrete entry exists and no retired key is free: keep
		 * that. Its source is the wildcard entry's, found under k by
		 * the flags it now has */
		h.flags = scratch->flags;
		state_release(&h, k, 1);
	}
	return scratch;
}

/* wild_place fills the wildcard entry e (at wildcard key k) in where it is,
 * for p, a packet to its group going its way that found it at its first
 * hash (in_place): IPFilter leaves it in its bucket, where later such
 * packets find it and no other packet looks. The kernel moves it to its
 * group key (the wildcard key with the group as its dst, SF_GFILL), which
 * only those packets look up, and where another group's entry of the
 * same source does not take its place; it stays counted as a wildcard
 * entry (state_count[1]: lookups of packets to a group go on). Returns
 * the copy in scratch. */
static __always_inline struct state_entry *wild_place(struct state_key *k, struct state_entry *e,
						      const struct pktinfo *p, struct state_entry *scratch)
{
	struct state_entry *old;
	struct state_held h;
	int put;

	__builtin_memcpy(scratch, e, sizeof(*scratch));
	if (!state_take(k, e, &h))
		return scratch;
	__builtin_memcpy(k->dst, p->dst, 16);
	scratch->flags |= SF_GFILL;
	put = state_put(k, scratch, &old);
	if (put == 0 && old) {
		/* the group key holds an older filled entry, which no
		 * IPFilter lookup meets again (the newer is before it in
		 * the bucket): it goes, as in the engine's fillInPlace */
		state_unlink(k, old);
		put = state_put(k, scratch, &old);
	}
	if (put != 1) {
		/* not put (another CPU filled the key meanwhile): released */
		h.flags = scratch->flags;
		state_release(&h, k, 1);
		wild_add(-1);
	}
	return scratch;
}

/* icmp_other_type: IPFilter finds an ICMP entry by its addresses and id
 * (its hash has no type) and checks the type only after ipf_matchsrcdst,
 * so an ICMP packet that no entry takes (an address-mask reply to an
 * echo, an echo request going an echo entry's reverse way) has still
 * fixed the flags, the options and the interface of its direction in an
 * entry of its addresses and id (the engine's matchAddrs before
 * icmpOfEntry). Called when the packet's own key found no entry to take
 * it: the entries of each query type the family keeps state for are
 * looked up, and one a packet of this type does not belong to gets what
 * ipf_matchsrcdst sets. Only the key's entry, not its twin. */
static __always_inline void icmp_other_type(const struct pktinfo *p, __u64 now)
{
	struct state_key k;
	int sym;
	__u8 swap = canon_key(&k, p, &sym), t = p->icmp >> 8;

#pragma unroll
	for (int i = 0; i < 5; i++) {
		__u8 q, want;
		struct state_entry *e;
		int rev;

		if (p->family == 4) {
			if (i == 4)
				break;
			q = i == 0 ? 8 : 11 + 2 * i; /* 8, 13, 15, 17 */
			want = q == 8 ? 0 : q + 1;
		} else {
			q = i == 0 ? 128 : i == 1 ? 130 : i == 2 ? 133 : i == 3 ? 135 : 139;
			want = q + 1;
		}
		k.dport = q;
		e = bpf_map_lookup_elem(&states, &k);
		if (!e || e->expire < now)
			continue;
		rev = !sym && (swap ^ !!(e->flags & SF_SWAP));
		if (!rev)
			want = q;
		if (t == want)
			continue; /* its own entry: state_lookup's part */
		{
			__u32 fi = (p->out * 2 + rev) & 3, slot = (rev * 2 + p->out) & 3;
			__u32 flx = p->flags & PF_CMP, o = state_opt(p);

			if (e->ifindex[slot] && e->ifindex[slot] != p->ifindex)
				continue;
			if (e->flx[fi] && e->flx[fi] != flx)
				continue;
			if (p->secclass != e->secclass || p->auth != e->auth)
				continue;
			if (!rev ? o != e->opt : (e->flags & SF_OPTREV) && o != e->opt_rev)
				continue;
			if (!e->flx[fi]) {
				e->flx[fi] = flx;
				if (rev && !(e->flags & SF_OPTREV)) {
					e->opt_rev = o;
					state_flags_set(e, SF_OPTREV);
				}
			}
			if (!e->ifindex[slot])
				e->ifindex[slot] = p->ifindex;
		}
	}
}

/* state_entry.flxvar: how the replaced entry's flags differed (a packet
 * with exactly that difference matches), in FI_CMP's bits 8-15
 * (PF_STATE..PF_LOWTTL) a byte apart, with PF_IPOPTS in PF_ICMPERR's place
 * (bit 4: not in PF_CMP). The engine's flxAlt holds the same bits
 * (flxAltMask). */
static __always_inline __u8 flxvar_of(__u32 d)
{
	return (((d & PF_CMP) >> 8) & 0xef) | ((d & PF_IPOPTS) << 3);
}

static __always_inline __u32 flxvar_mask(__u8 v)
{
	return ((__u32)(v & 0xef) << 8) | ((__u32)(v & 0x10) >> 3);
}

/* state_lookup: nokey says the packet's canonical key is known to have no
 * entry (the established path looked it up): only wildcard entries are
 * looked for. */
static __always_inline struct state_entry *state_lookup(struct pktinfo *p, int *revp, __u64 now,
							struct state_entry *scratch, int nokey, int notwin,
							int *twinp)
{
	struct state_key k;
	struct state_entry *e;
	int rev = 0, slot, wild = 0, sym;
	__u8 swap;

	/* IPFilter hashes a packet to an IPv4 multicast group, or an ICMPv6
	 * packet to an IPv6 one, without its destination: only
	 * wildcard-destination entries find it */
	e = NULL;
	if (!nokey && !to_group(p)) {
		/* the entry going the packet's way first (a flow may have
		 * one each way), else the one it answers; an ICMP query only
		 * goes its entry's way, a reply only the other */
		int fwd_ok = 1, rev_ok = 1;

		if (is_icmp(p->proto)) {
			rev_ok = query_of(p->proto, p->icmp >> 8) >= 0;
			fwd_ok = !rev_ok;
		}
		swap = canon_key(&k, p, &sym);
		e = state_find(&k, swap, sym, fwd_ok, rev_ok, &rev, notwin);
		/* a twin that refuses the packet leaves it to the key's
		 * entry (sl_state_lookup) */
		*twinp = e && k.twin;
		if (!e && !notwin && is_icmp(p->proto) && !(p->flags & PF_ICMPERR))
			icmp_other_type(p, now);
	}
	if (!e) {
		__u32 one = 1;
		__s64 *nw = bpf_map_lookup_elem(&state_count, &one);

		/* wildcard-destination entries (multicast, broadcast) are
		 * rare: no lookups when there are none */
		if (!nw || *nw <= 0)
			return NULL;
		wild = 1;
		rev = 0;
		/* an inbound ICMPv4 packet to a group finds no entry: IPFilter
		 * hashes it without its source and retries wildcard entries
		 * for TCP and UDP only */
		if (to_group(p) && !in_place(p) && p->proto == IPPROTO_ICMP)
			return NULL;
		make_key(&k, p, 0);
		__builtin_memset(k.dst, 0, sizeof(k.dst));
		k.wild = 1;
		e = bpf_map_lookup_elem(&states, &k);
		/* forward, the packet goes to the entry's own group: one to
		 * another group is no packet of the flow */
		if (e && (e->wdst[0] != p->dst[0] || e->wdst[1] != p->dst[1] || e->wdst[2] != p->dst[2] ||
			  e->wdst[3] != p->dst[3]))
			e = NULL;
		/* then an entry filled in where it was (wild_place), under
		 * its group key, found by packets to the group hashed there
		 * only: older than a wildcard entry of the group, which
		 * IPFilter's bucket holds before it */
		if (!e && in_place(p)) {
			__builtin_memcpy(k.dst, p->dst, 16);
			e = bpf_map_lookup_elem(&states, &k);
			if (!e)
				__builtin_memset(k.dst, 0, sizeof(k.dst));
		}
		/* an ICMP packet from a group is nobody's answer: IPFilter
		 * hashes it with its source and so never finds the entry,
		 * hashed without the group it was sent to (the engine's
		 * matchWild; semantics state-mcast-reply-from-group) */
		if (!e && is_icmp(p->proto) &&
		    (p->family == 4 ? (p->src[0] & 0xf0) == 0xe0 : (p->src[0] & 0xff) == 0xff))
			return NULL;
		if (!e) {
			rev = 1;
			if (!reverse_key(&k, p))
				return NULL;
			__builtin_memset(k.dst, 0, sizeof(k.dst));
			k.wild = 1;
			e = bpf_map_lookup_elem(&states, &k);
		}
		if (!e)
			return NULL;
	}
	if (e->expire < now) {
		if (state_unlink(&k, e))
			stat_inc(ST_EXPIRED);
		return NULL;
	}
	slot = rev * 2 + p->out;
	slot &= 3;
	if (e->ifindex[slot] && e->ifindex[slot] != p->ifindex)
		return NULL;
	{
		/* flags must agree with what the first packet of this slot
		 * carried, the security class with the creating packet's; the
		 * creating direction repeats the first packet's options, replies
		 * those of the first reply (ipf_matchsrcdst: is_opt/is_optmsk) */
		__u32 fi = (p->out * 2 + rev) & 3, flx = p->flags & PF_CMP, o = state_opt(p);

		/* flxvar is the creating way's alternative: a reply has
		 * none (IPFilter's first entry saw the same replies) */
		if (e->flx[fi] && e->flx[fi] != flx && (rev || (e->flx[fi] ^ flx) != flxvar_mask(e->flxvar)))
			return NULL;
		if (p->secclass != e->secclass || p->auth != e->auth)
			return NULL;
		if (!rev ? o != e->opt : (e->flags & SF_OPTREV) && o != e->opt_rev)
			return NULL;
		if (!e->flx[fi]) {
			e->flx[fi] = flx;
			if (rev && !(e->flags & SF_OPTREV)) {
				e->opt_rev = o;
				state_flags_set(e, SF_OPTREV);
			}
		}
	}
	if (p->proto == IPPROTO_TCP) {
		/* a new SYN on a flow closed on both sides starts afresh */
		if ((p->tcpflags & 0x12) == 0x02 && e->tcp[0].state > TS_ESTABLISHED &&
		    e->tcp[1].state > TS_ESTABLISHED) {
			if (state_unlink(&k, e))
				stat_inc(ST_CLOSED);
			return NULL;
		}
		if (!tcp_window(e, rev, p)) {
			p->flags |= PF_OOW;
			stat_inc(ST_OOW);
			/* an answer fills a wildcard entry in before the
			 * window check (the engine's Lookup) */
			if (wild && rev)
				wild_fill(&k, e, p, rev, scratch);
			return NULL;
		}
		if (!tcp_fsm(e, rev, p, now)) {
			if (wild && rev)
				wild_fill(&k, e, p, rev, scratch);
			return NULL;
		}
	} else {
		__u64 to;
		__u32 age = e->age[rev & 1];

		if (p->proto == IPPROTO_UDP)
			to = cfg(rev ? CFG_TO_UDPACK : CFG_TO_UDP);
		else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6)
			to = cfg(rev ? CFG_TO_ICMPACK : CFG_TO_ICMP);
		else
			to = cfg(rev ? CFG_TO_UDPACK : CFG_TO_UDP);
		if (age)
			to = (__u64)age * 1000000000ULL;
		SET(e->expire, now + to);
	}
	if (!e->ifindex[slot])
		e->ifindex[slot] = p->ifindex;
	SET(e->last, now);
	{
		struct state_cnt *c = &e->cnt[bpf_get_smp_processor_id() & (STATE_STRIPES - 1)];

		c->pkts[slot]++;
		c->bytes[slot] += p->plen;
	}
	*revp = rev;
	/* the first packet to use a wildcard entry fills it in: at its key
	 * when the packet found it at its first hash (in_place), else moved
	 * to the flow's concrete key */
	if (wild && (e->flags & SF_GFILL))
		return e;
	if (wild && !rev && in_place(p))
		return wild_place(&k, e, p, scratch);
	if (wild)
		return wild_fill(&k, e, p, rev, scratch);
	return e;
}

/* state_identical is ipf_state_match for two entries of one flow: a the
 * live one, b the new. As the engine's identical: ipf_state_add sets the
 * new entry's log tag after the test, so a live entry with a log tag is
 * never identical; a protocol IPFilter keeps no ports or ids for never
 * finds a duplicate (C4); and the addresses compared are the group's of
 * a wildcard-destination entry; an entry of a log first rule is never
 * identical (ipf_state_add tests before it strips FR_LOGFIRST). */
static __always_inline int state_identical(const struct state_entry *a, const struct state_entry *b,
					   const struct state_key *kp)
{
	__u8 proto = kp->proto;

	if (proto != IPPROTO_ICMP && proto != IPPROTO_TCP && proto != IPPROTO_UDP &&
	    proto != IPPROTO_GRE && proto != IPPROTO_ICMPV6)
		return 0;
	/* ipf_state_add compares the new entry before it strips log first
	 * from its flags, so a log first rule's entry is never a duplicate */
	if (b->pass & FR_LOGFIRST)
		return 0;
	/* wildcard-destination entries share a key whatever their group:
	 * one for another group is another flow's */
	if (kp->wild && (a->wdst[0] != b->wdst[0] || a->wdst[1] != b->wdst[1] || a->wdst[2] != b->wdst[2] ||
			 a->wdst[3] != b->wdst[3]))
		return 0;
	return a->logtag == 0 && a->pass == b->pass && a->opt == b->opt && a->secclass == b->secclass &&
	       a->auth == b->auth &&
	       (a->flags & SF_OPTREV) == (b->flags & SF_OPTREV) && a->opt_rev == b->opt_rev;
}

/* CSTAGE(n) ends the making of an entry after its step n, as made (1):
 * the per-stage benchmark (BenchmarkNewState) splits state_create with
 * it, stop_at 32 to 37 (filter.c's STAGE; removed by the verifier from
 * the program that runs). Stop 36, after the counts, leaves them raised. */
#define CSTAGE(n) do { if (stop_at == (n)) return 1; } while (0)

/* state_create adds an entry for p created by rule idx; returns 0 on
 * failure (the caller turns pass into block). */
static __always_inline int state_create(struct pktinfo *p, __u32 slot, __u32 idx,
					const struct rule *r, __u32 pass, __u64 now,
					struct state_entry *ep, struct state_key *kp, struct work *w)
{
	__u32 zero = 0;
	__u32 *n;
	__s64 *cnt;
	__u64 smax = cfg(CFG_STATEMAX);

	if (p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD | PF_STATE))
		return 0;
	if ((p->flags & PF_OOW) && !(p->tcpflags & 0x02))
		return 0;
	if (p->proto == IPPROTO_TCP && (p->tcpflags & 0x04))
		return 0;
	if (p->proto == IPPROTO_ICMP) {
		__u8 t = p->icmp >> 8;

		if (t != 8 && t != 13 && t != 15 && t != 17)
			return 0;
	}
	if (p->proto == IPPROTO_ICMPV6) {
		__u8 t = p->icmp >> 8;

		if (t != 128 && t != 130 && t != 133 && t != 135 && t != 139)
			return 0;
	}
	n = slot_elem(&rule_states, slot, idx);
	cnt = bpf_map_lookup_elem(&state_count, &zero);
	if (!n || !cnt)
		return 0;
	if (smax && *cnt > 0 && (__u64)*cnt * 100 / smax > cfg(CFG_WMHIGH)) {
		/* past state_wm_high: the sweeper runs the watermark flush */
		struct sweeper *sw = bpf_map_lookup_elem(&sweeper, &zero);

		if (sw)
			sw->doflush = 1;
	}
	if (r->state_limit) {
		if (*n >= r->state_limit) {
			stat_inc(ST_MAXREF);
			return 0;
		}
	} else if (smax && *cnt >= (__s64)smax) {
		stat_inc(ST_MAXREF);
		return 0;
	}
	CSTAGE(32);
	__builtin_memset(ep, 0, sizeof(*ep));
	CSTAGE(33);
	if (wild_dst(p)) {
		make_key(kp, p, 0);
		__builtin_memset(kp->dst, 0, sizeof(kp->dst));
		kp->wild = 1;
	} else {
		int sym;

		if (canon_key(kp, p, &sym) && !sym)
			ep->flags |= SF_SWAP;
	}
	CSTAGE(34);
	ep->created = now;
	ep->last = now;
	ep->pass = pass;
	ep->rule = idx;
	ep->slot = slot;
	ep->gen = cfg(CFG_GEN0 + (slot % NSLOTS));
	ep->age[0] = r->age_fwd;
	ep->age[1] = r->age_rev;
	ep->logtag = r->logtag;
	ep->rule_no = r->rule_no;
	ep->group_no = r->group_no;
	ep->ifindex[p->out & 1] = p->ifindex;
	ep->flx[(p->out & 1) * 2] = (p->flags & PF_CMP) | (p->flags & PF_OPTBAD ? PF_BAD : 0);
	ep->opt = state_opt(p);
	ep->secclass = p->secclass;
	ep->auth = p->auth;
	{
		struct state_cnt *c = &ep->cnt[bpf_get_smp_processor_id() & (STATE_STRIPES - 1)];

		c->pkts[p->out & 1] = 1;
		c->bytes[p->out & 1] = p->plen;
	}
	if (p->proto == IPPROTO_TCP) {
		/* only an opening SYN (no ACK) starts the strict machine */
		if ((p->tcpflags & 0x12) == 0x02)
			ep->flags |= SF_SYN;
		tcp_init(ep, p);
		/* IPFilter keeps the entry even when the first packet is not a
		 * transition of the state machine; it then ages as LISTEN. It
		 * takes a first packet to 0.0.0.0 (::) for a reply there. */
		int fsm = !(p->dst[0] | p->dst[1] | p->dst[2] | p->dst[3]);

		if (!tcp_fsm(ep, fsm, p, now))
			ep->expire = now + tcp_life(ep->age[fsm & 1], ep->tcp[fsm & 1].state);
		stat_inc(ST_ADD_TCP);
	} else {
		__u64 to;

		if (p->proto == IPPROTO_UDP) {
			to = cfg(CFG_TO_UDP);
			stat_inc(ST_ADD_UDP);
		} else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
			to = cfg(CFG_TO_ICMP);
			stat_inc(ST_ADD_ICMP);
		} else {
			to = cfg(CFG_TO_IP);
			stat_inc(ST_ADD_OTHER);
		}
		if (r->age_fwd)
			to = (__u64)r->age_fwd * 1000000000ULL;
		ep->expire = now + to;
	}
	if (wild_dst(p))
		__builtin_memcpy(ep->wdst, p->dst, 16);
	if (kp->wild) {
		/* IPFilter's duplicate check looks in the new entry's
		 * bucket, which holds the group's entry filled in where it
		 * was (under its group key: wild_place): an identical one
		 * refuses the new entry. Another stays, as in IPFilter's
		 * bucket (the engine's replaceOrRefuse), until the new one is
		 * filled in over it */
		struct state_entry *g;

		__builtin_memcpy(kp->dst, p->dst, 16);
		g = bpf_map_lookup_elem(&states, kp);
		__builtin_memset(kp->dst, 0, sizeof(kp->dst));
		if (g && g->expire >= now && state_identical(g, ep, kp))
			return 0;
	}
	CSTAGE(35);
	/* counted by its source (max-srcs): sl_state_create */
	ep->srcbits = r->src_bits;
	{
		/* a new flow's key holds no entry: the put alone says so,
		 * and no lookup for an identical entry is needed (none was
		 * there to be identical). Counted before the put, as below;
		 * given back when the key holds an entry, which then takes
		 * the checks below as before (the put there tries again: the
		 * entry may have gone meanwhile) */
		/* kp->wild read again, not kept in a local: one more value
		 * live across the put grew sl_state_create's frame past what
		 * the scan's call chain leaves it (TestStackChain) */
		kp->twin = 0;
		__sync_fetch_and_add(n, 1);
		__sync_fetch_and_add(cnt, 1);
		if (kp->wild)
			wild_add(1);
		CSTAGE(36);
		if (bpf_map_update_elem(&states, kp, ep, BPF_NOEXIST) == 0)
			goto made;
		if (*n > 0)
			__sync_fetch_and_add(n, -1);
		__sync_fetch_and_add(cnt, -1);
		if (kp->wild)
			wild_add(-1);
	}
	{
		/* IPFilter refuses an identical entry (ipf_state_match: rule
		 * flags, options, class, addresses and ports either way round,
		 * not the FI_* flags): the packet is then blocked */
		struct state_entry *old = bpf_map_lookup_elem(&states, kp);

		if (old && state_identical(old, ep, kp))
			return 0;
		if (old && !kp->wild && (old->flags & SF_TWIN)) {
			kp->twin = 1;
			old = bpf_map_lookup_elem(&states, kp);
			kp->twin = 0;
			if (old && state_identical(old, ep, kp))
				return 0;
		}
	}
	{
		struct state_entry *old;
		int put, wild = kp->wild;

		/* counted before it can be found (the invariant above). Counted
		 * after the put, an unlink on another CPU right after it (a
		 * flush, a packet replacing it) found the rule's count not yet
		 * raised, and state_release, which keeps a rule's count from
		 * going below zero, gave nothing back: the rule kept an entry
		 * too many for ever (TestPrivilegedStateCountRaces) */
		__sync_fetch_and_add(n, 1);
		__sync_fetch_and_add(cnt, 1);
		if (wild)
			wild_add(1);
		put = state_put(kp, ep, &old);
		if (put == 0 && old && !state_identical(old, ep, kp)) {
			/* For a packet the existing entry could not match
			 * IPFilter adds a new one, found first. The map keeps
			 * one per key and way, so the new one replaces the old
			 * (as the Go engine does): the old entry and its counts
			 * go (another CPU or the sweeper may have removed it
			 * first: released once either way). */
			/* IPFilter's lookups still find the old entry for
			 * a packet the new one's flags refuse (a low TTL
			 * after the flow's TTL changed): without it the
			 * rule's add found the new one identical and a
			 * `block quick … keep state` skipped (faith16). The
			 * new one takes the old one's flags of its creating
			 * way too (their difference, when flxvar can hold
			 * it), when both give one verdict; as the engine's
			 * flxAlt */
			if (old->pass == ep->pass && (old->flags & SF_SWAP) == (ep->flags & SF_SWAP)) {
				__u32 f = (p->out & 1) * 2, of = old->flx[f & 3];

				of ^= ep->flx[f & 3];
				if (of && !(of & ~flxvar_mask(0xff)))
					ep->flxvar = flxvar_of(of);
			}
			state_unlink_later(kp, old, w);
			put = state_put(kp, ep, &old);
		}
		if (put != 1) {
			/* nothing added: the counts back as they were (n, of
			 * the generation in force, as raised) */
			if (*n > 0)
				__sync_fetch_and_add(n, -1);
			__sync_fetch_and_add(cnt, -1);
			if (wild)
				wild_add(-1);
			return 0;
		}
	}
made:
	CSTAGE(37);
	/* a fragment that made state: the rest of its datagram follows */
	if (frag_makes_entry(p))
		frag_add(pass, r->rule_no, r->group_no, r->logtag, now, slot, idx);
	return 1;
}

/* sl_state_lookup returns 1 for a state hit (w->hit_*), 0 for none, or
 * SL_TWIN_REFUSED when the flow's twin (its newer entry) refused the
 * packet: the caller then looks again with notwin, for the key's entry,
 * as IPFilter goes on down the bucket. A second call rather than a loop
 * here: a global function is verified once however often it is called. */
#define SL_TWIN_REFUSED (-1)

GLOBAL int sl_state_lookup(__u64 now, int nokey, int notwin)
{
	struct work *w = get_work();
	struct state_entry *e;
	int rev = 0, twin = 0;

	if (!w)
		return 0;
	e = state_lookup(&w->p, &rev, now, &w->e, nokey, notwin, &twin);
	if (!e)
		return twin && !notwin ? SL_TWIN_REFUSED : 0;
	w->hit_rev = rev;
	w->hit_slot = e->slot;
	w->hit_idx = e->rule;
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	return 1;
}

/* sl_icmperr_lookup matches an ICMP error against the state of the packet
 * it quotes (§3.6): the quoted header is the flow's own packet, so its
 * tuple is looked up as is and reversed. The error is counted as a packet
 * going against the quoted one (IPFilter's FWD/REV counters include it);
 * TCP state is left alone; entries with no-icmp-err refuse. */
GLOBAL int sl_icmperr_lookup(struct __sk_buff *skb, __u64 now)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct state_key k = {};
	struct state_entry *e;
	__u8 h[40];
	__u8 l4[8];
	__u32 off, l4off, slot, qopt = 0;
	__u16 qauth = 0;
	__u8 qsec = 0;
	int backward = 0, ab;

	if (!w)
		return 0;
	p = &w->p;
	off = p->l4off + 8;
	if (p->family == 4) {
		__u32 hl;

		/* ipf_checkicmpmatchingstate takes an error whose own header
		 * is the basic 20 bytes only (fin_hlen), as the engine's
		 * icmpErrorState (semantics state-icmp-error-outer-options) */
		if (p->plen < 48 || (p->flags & PF_IPOPTS) || bpf_skb_load_bytes(skb, off, h, 20) < 0)
			return 0;
		hl = (h[0] & 0xf) * 4;
		if (hl < 20 || (((h[6] << 8) | h[7]) & 0x1fff))
			return 0; /* quoted header of a non-first fragment: bad */
		if (hl > 20) {
			/* ipf_checkicmpmatchingstate parses the quoted header
			 * as a packet (ipf_makefrip): its option bits, class
			 * and authority, read by the packet's own walk into
			 * the packet info, whose fields are then put back */
			__u32 o = p->optbits, f = p->flags;
			__u16 a = p->auth;
			__u8 s = p->secclass;

			p->optbits = 0;
			p->secclass = 0;
			p->auth = 0;
			sl_ipv4_options(skb, off + 20, hl - 20);
			qopt = p->optbits;
			qsec = p->secclass;
			qauth = p->auth;
			p->optbits = o;
			p->flags = f;
			p->secclass = s;
			p->auth = a;
		}
		k.family = 4;
		k.proto = h[9];
		__builtin_memcpy(&k.src[0], &h[12], 4);
		__builtin_memcpy(&k.dst[0], &h[16], 4);
		l4off = off + hl;
		/* the quoted source must be the error's destination */
		if (k.src[0] != p->dst[0])
			return 0;
	} else {
		if (bpf_skb_load_bytes(skb, off, h, 40) < 0)
			return 0;
		k.family = 6;
		k.proto = h[6];
		__builtin_memcpy(k.src, &h[8], 16);
		__builtin_memcpy(k.dst, &h[24], 16);
		l4off = off + 40;
	}
	if (bpf_skb_load_bytes(skb, l4off, l4, 8) < 0)
		return 0;
	if (k.proto == IPPROTO_TCP || k.proto == IPPROTO_UDP) {
		k.sport = (l4[0] << 8) | l4[1];
		k.dport = (l4[2] << 8) | l4[3];
	} else if (k.proto == IPPROTO_ICMP || k.proto == IPPROTO_ICMPV6) {
		/* keyed by the query, as canon_key keys the flow's packets:
		 * an error quoting the echo's reply finds the echo's entry
		 * too (IPFilter's ipf_checkicmpmatchingstate does for IPv4;
		 * IPv6 as IPv4 by C16, as the engine; semantics cases
		 * state-icmp-error-quotes-reply, state-icmp6-error-quotes-reply) */
		int q = query_of(k.proto, l4[0]);

		k.sport = (l4[4] << 8) | l4[5];
		k.dport = q >= 0 ? q : l4[0];
	} else if (k.family == 4) {
		/* IPv4: ipf_checkicmpmatchingstate knows TCP, UDP and ICMP
		 * only (semantics case state-icmp-error-other-proto) */
		return 0;
	}
	/* IPv6: ipf_checkicmp6matchingstate matches any other protocol by
	 * its addresses (the entry's key has no ports: parse keeps none for
	 * it; state-icmp6-error-other-proto) */
	{
		/* the entry going the quoted packet's way first, else the
		 * one going the other way */
		int sym;
		__u8 swap = canon_order(&k, is_icmp(k.proto), &sym);

		e = state_find(&k, swap, sym, 1, 1, &backward, 0);
	}
	if (!e || e->expire < now)
		return 0;
	/* the quoted packet, direction reversed, must come by its interface
	 * slot's interface when it has one (ipf_matchsrcdst's first test:
	 * semantics state-icmp-error-other-iface) */
	slot = backward * 2 + !(p->out & 1);
	if (e->ifindex[slot & 3] && e->ifindex[slot & 3] != p->ifindex)
		return 0;
	{
		/* the quoted header must be a packet of its direction
		 * (ipf_matchsrcdst on it): the flags its first packet
		 * carried (TCP/UDP, IPv4 options); the options its
		 * direction's packets carry (IPv6: extension headers, which
		 * a quoted header is read without: semantics
		 * state-icmp6-error-exthdr); the flow's class and authority,
		 * none without options (is_secmsk, is_auth: semantics
		 * state-icmp-error-quote-no-sec-class,
		 * state-icmp-error-quote-options). The engine's
		 * LookupICMPError. */
		__u32 fi = ((!(p->out & 1)) * 2 + backward) & 3;
		__u32 c = e->flx[fi] & (PF_TCPUDP | PF_IPOPTS), qflx = 0;

		if (k.proto == IPPROTO_TCP || k.proto == IPPROTO_UDP)
			qflx |= PF_TCPUDP;
		if (p->family == 4 && (h[0] & 0xf) > 5)
			qflx |= PF_IPOPTS;
		if (c && c != qflx)
			return 0;
		if (!backward ? qopt != e->opt : (e->flags & SF_OPTREV) && qopt != e->opt_rev)
			return 0;
		if (qsec != e->secclass || qauth != e->auth)
			return 0;
	}
	/* the quoted header, as the first reply, makes the options replies
	 * carry its own (the engine's LookupICMPError), before no-icmp-err
	 * or the error count may refuse the error: ipf_matchsrcdst runs
	 * before ipf_allowstateicmp (semantics
	 * state-icmp-noicmperr-first-reply) */
	if (backward && !e->flx[((!(p->out & 1)) * 2 + 1) & 3] && !(e->flags & SF_OPTREV)) {
		e->opt_rev = qopt;
		state_flags_set(e, SF_OPTREV);
	}
	/* and fills it when empty, before no-icmp-err or the error count
	 * may refuse the error (ipf_matchsrcdst binds it) */
	slot = backward * 2 + !(p->out & 1);
	if (!e->ifindex[slot & 3])
		e->ifindex[slot & 3] = p->ifindex;
	if (e->pass & FR_NOICMPERR)
		return 0;
	/* the counters' direction is the quoted packet's by its source
	 * address alone (ipf_checkicmpmatchingstate: backward = is_src !=
	 * src; the engine's LookupICMPError): in a flow between two ports of
	 * one address an error counts as a reply whichever way the quoted
	 * packet went (semantics state-icmp-error-same-addr) */
	ab = backward && (k.src[0] != k.dst[0] || k.src[1] != k.dst[1] || k.src[2] != k.dst[2] || k.src[3] != k.dst[3]);
	slot = (!ab) * 2 + (p->out & 1);
	{
		/* no more errors one way than packets went the other
		 * (is_icmppkts against is_pkts): an error more is refused
		 * (semantics state-icmp-error-per-packet) */
		__u32 oi = (ab * 2 + !(p->out & 1)) & 3;
		__u64 sent = 0;
		__u16 n = e->icmperr[slot & 3];

#pragma unroll
		for (int i = 0; i < STATE_STRIPES; i++)
			sent += e->cnt[i].pkts[oi];
		if (n > sent)
			return 0;
		if (n < 0xffff)
			e->icmperr[slot & 3] = n + 1;
	}
	{
		struct state_cnt *c = &e->cnt[bpf_get_smp_processor_id() & (STATE_STRIPES - 1)];

		__sync_fetch_and_add(&c->pkts[slot & 3], 1);
		__sync_fetch_and_add(&c->bytes[slot & 3], p->plen);
	}
	/* the error travels against the packet it quotes: about a packet
	 * going the entry's way it is a reply (reply-to routes it) */
	w->hit_rev = !ab;
	w->hit_slot = e->slot;
	w->hit_idx = e->rule;
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	return 1;
}

GLOBAL int sl_state_create(__u32 slot, __u32 idx, __u32 pass, __u64 now)
{
	struct work *w;
	struct rule *r;
	long got;
	int rc;

	/* no stops 30 (the call) and 31 (the source count and the rule)
	 * here: their reads of stop_at took one more stack slot, and this
	 * frame ends the scan's call chain at the verifier's 512 bytes for
	 * kernels before 6.10 (TestStackChain) */
	if (slot >= NSLOTS)
		return 0;
	idx &= RULE_CAP - 1;
	/* keep state (max-srcs): IPFilter counts the entries by their
	 * source, masked, and refuses one of a new source past max-srcs or
	 * one more of a source past max-per-src: no entry is made. Taken
	 * before the entry can be found, as state_create's counts, and given
	 * back by state_release when it goes, or here when none was made.
	 * Out of state_create and first, before this frame holds more than
	 * the registers keep across a call (each rule without max-srcs pays
	 * a lookup of its rule, once a new entry). */
	got = src_new(slot, idx);
	if (got != 0) {
		if (got == SRC_FAIL)
			stat_inc(ST_SRCFULL);
		return 0;
	}
	w = get_work();
	if (!w)
		return 0;
	r = rule_at(slot, idx);
	if (!r) {
		sl_src_undo(1);
		return 0;
	}
	rc = state_create(&w->p, slot, idx, r, pass, now, &w->e, &w->rk, w);
	if ((rc <= 0 && w->src_held) || w->held.srcbits)
		sl_src_undo(rc <= 0);
	w->src_held = 0; /* the entry holds it now */
	if (rc > 0 && !(w->p.dst[0] | w->p.dst[1] | w->p.dst[2] | w->p.dst[3]))
		w->made_rev = 1;
	return rc;
}

#endif
