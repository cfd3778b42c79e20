/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef SLUICE_EST_H
#define SLUICE_EST_H

/*
 * The established packet first (est2). In a program made for its slot whose
 * sets may keep state, a clean packet (what fast_parse takes: IPv4 without
 * options, not a fragment, or IPv6 with TCP/UDP right after its header) is
 * looked up in the state table before anything else: no scratch area, no
 * packet info cleared and filled, no state count, no BPF-to-BPF call. A hit
 * that needs nothing but its verdict is decided here and counted exactly as
 * the pipeline counts it; anything else falls through to the pipeline with
 * nothing written, which then does all of it as before.
 *
 * "Nothing but its verdict": the flow's only entry (SF_TWIN: a twin, the
 * newer entry, is found first), either way round, not expired,
 * the interface, FI_CMP flags, options and class the entry wants, the TCP
 * window and state machine passing the segment (checked on copies of the
 * two sides and the lifetime, stored only when both pass), and a verdict
 * that is not logged (FR_LOG unless log first, nomatch) and, blocked, has
 * no return-* to send. The direction's accounting list and routing rule
 * the program out (filter.c's gate, constants); so do ipf -l flags and
 * interfaces without a link-layer header.
 */

/* k_est 0 leaves the established path out of the program: the tests and
 * benchmarks load the same program both ways to compare them. */
volatile const __u32 k_est = 1;

/* k_estdm 0 leaves st_dm's slots out of the established path (the hash
 * only): the benchmarks compare the two in one program. */
volatile const __u32 k_estdm = 1;

/* est_path returns the verdict of a packet it decided (TC_ACT_UNSPEC or
 * TC_ACT_SHOT), EST_LOOKUP when the pipeline must look its state up (the
 * packet not clean, or its entry wanting more), EST_NOENTRY when the packet
 * is clean and its flow's canonical key has no entry (the pipeline then
 * looks up the wildcard entries only). STAGE points cut it for the
 * benchmarks and the live bisect (sluice bench's sluice-stateful-at-N), in
 * the order a hit passes them: 35 the parse, 36 the canonical key, 31 the
 * statistics' block, 32 the lookup, 33 the clock, 37 the entry's checks,
 * 38 the TCP window and state machine (TCP only), 39 the stores, 34 the
 * counter stripe (0: the whole path and its statistics). */
#define EST_LOOKUP (-2)
#define EST_NOENTRY (-3)
#define EST_HASH (-5)

/* EST_TOUCH loads x and drops it: a line the path will need is asked for
 * early, so that its miss overlaps the misses before it instead of
 * following them (est13: live, each line an established packet reaches
 * is cold). */
#define EST_TOUCH(x) do { __u64 t_ = (x); asm volatile("" :: "r"(t_)); } while (0)

/* est_probe: the cut programs that split the state table's lookup for the
 * live bisect (sluice-stateful-at-40..44; stop_at is a constant, so the
 * ordinary program holds none of it). Each stops after the key and the
 * statistics' block (31) and does one thing instead of the lookup:
 *   40  a hash of the key in BPF and one line of a plain array (exprs,
 *       vmalloc'd like the table's buckets) at that hash: what an inlined
 *       direct array's slot costs (no kernel code, no htab, no bucket);
 *   43  the same, four lines of the array (a 256-byte slot's)
 *       asked for together;
 *   41  the table's lookup of a key it does not hold (the key's twin
 *       bit flipped): the kernel's hash code, jhash of the 40 bytes,
 *       the htab struct and a bucket line, no element;
 *   42  the flow's lookup twice: the second is the warm cost;
 *   44  (after 32) the lookup and the element's value lines est reads.
 */
static __always_inline void est_probe(struct state_key *k)
{
	__u32 h, i;
	struct expr_val *v;
	struct state_entry *e;

	if (stop_at == 40 || stop_at == 43) {
		h = k->src[0] ^ k->src[3] ^ k->dst[0] ^ k->dst[3] ^
		    ((__u32)k->sport << 16 | k->dport) ^ k->proto;
		h *= 0x9e3779b1;
		h ^= h >> 15;
		/* a value is 48 bytes in the array: 64 of them are 48 lines,
		 * so slot i starts a line after any base */
		i = (h & 127) * 64;
		v = bpf_map_lookup_elem(&exprs, &i);
		if (!v)
			return;
		EST_TOUCH(v->num);
		if (stop_at == 43) {
			/* 96 bytes apart: four distinct lines */
			i += 2;
			v = bpf_map_lookup_elem(&exprs, &i);
			if (v)
				EST_TOUCH(v->num);
			i += 2;
			v = bpf_map_lookup_elem(&exprs, &i);
			if (v)
				EST_TOUCH(v->num);
			i += 2;
			v = bpf_map_lookup_elem(&exprs, &i);
			if (v)
				EST_TOUCH(v->num);
		}
		return;
	}
	if (stop_at == 41) {
		k->twin ^= 1;
		e = bpf_map_lookup_elem(&states, k);
		EST_TOUCH((__u64)(long)e);
		return;
	}
	if (stop_at == 42) {
		e = bpf_map_lookup_elem(&states, k);
		if (!e)
			return;
		EST_TOUCH(e->pass);
		e = bpf_map_lookup_elem(&states, k);
		if (e)
			EST_TOUCH(e->pass);
	}
}

/* EST_HASH: the slot cannot decide the packet but the element can (a
 * fill not yet checked, another packet storing or committed meanwhile,
 * the first packet of an interface or flags slot, which the element
 * records): the path empties the slot (slot_detach writes back what it
 * took) and returns EST_HASH; the caller runs it once more, and the
 * element decides, as before st_dm. */
#define est_barrier() asm volatile("" ::: "memory")

/* est_fill gives the empty slot sl the entry e (key k) the established
 * path has just decided a packet by, as nat14's slot_fill: written not
 * valid (no packet uses it), the hash looked up again, and made valid
 * only if k's element is still e and nothing moved seq meanwhile (an end
 * of the entry deletes the element, then empties the slot: either the
 * lookup finds it gone or the clear finds the slot). A flow with a twin
 * is left to the hash (est_path sends it to the pipeline anyway). */
static __always_inline void est_fill(struct st_slot *sl, const struct state_key *k, struct state_entry *e)
{
	struct state_entry *e2;
	/* 0: not filled (a filled slot's is at least 2); no other local
	 * lives across the helper calls, so the function needs no stack */
	__u64 my = 0, cur;

	if (e->flags & SF_TWIN)
		return;
	bpf_spin_lock(&sl->lock);
	cur = sl->seq;
	/* seq odd: a packet is storing into the slot (its entry just
	 * ended): no fill under it */
	if (!sl->kpfwt && !(cur & 1) && __sync_val_compare_and_swap(&sl->seq, cur, cur + 1) == cur) {
		dm_key_set(sl, k);
		sl->valid = 0;
		sl->created = e->created;
		sl->pass = e->pass;
		__builtin_memcpy(sl->ifindex, e->ifindex, sizeof(sl->ifindex));
		__builtin_memcpy(sl->flx, e->flx, sizeof(sl->flx));
		sl->age[0] = e->age[0];
		sl->age[1] = e->age[1];
		sl->flags = e->flags;
		/* what est_path asks of a clean packet's options and class,
		 * each way */
		sl->optok = (!e->secclass && !e->opt ? 1 : 0) |
			    (!e->secclass && (!(e->flags & SF_OPTREV) || !e->opt_rev) ? 2 : 0);
		sl->expire = e->expire;
		sl->last = e->last;
		__builtin_memcpy(sl->tcp, e->tcp, sizeof(sl->tcp));
#pragma unroll
		for (int i = 0; i < 4; i++) {
			sl->pkts[i] = 0;
			sl->bytes[i] = 0;
		}
		__sync_fetch_and_add(&sl->seq, 1);
		my = cur + 2;
	}
	/* sl's lock found again from sl: kept, its pointer took the
	 * function's only stack slot */
	asm volatile("" : "+r"(sl));
	bpf_spin_unlock(&sl->lock);
	if (!my)
		return;
	e2 = bpf_map_lookup_elem(&states, k);
	bpf_spin_lock(&sl->lock);
	/* no end or write-back came between (they move seq by two; no
	 * packet commits to a slot not yet valid) */
	if (sl->seq == my && __sync_val_compare_and_swap(&sl->seq, my, my + 1) == my) {
		if (e2 == e && !(e->flags & SF_TWIN))
			sl->valid = 1;
		else
			sl->kpfwt = 0;
		__sync_fetch_and_add(&sl->seq, 1);
	}
	bpf_spin_unlock(&sl->lock);
}

/* est_slot decides a clean packet through the slot sl holding its flow's
 * key, as est_path does through the element: the same checks on the
 * slot's copy of the entry, the window and state machine on stack copies,
 * and what they change committed only if seq moves from the value read
 * first to odd (no fill, write-back or clear came between: the reads were
 * of one entry, and the slot still holds it; filter.h). EST_LOOKUP when
 * the pipeline must decide (its state_find empties the slot first). */
static __always_inline int est_slot(struct __sk_buff *skb, struct conf *C, struct st_slot *sl, __u64 seq,
				    __u32 out, __u8 swap, int sym, struct tcp_seg *s, __u32 plen, __u8 ttl,
				    __u8 proto, __u64 now, struct tcp_side *fs, struct tcp_side *ts)
{
	__u32 pass, slot, fi, flx, flags = PF_TCPUDP;
	__u64 exp;
	__u8 eflags;
	int rev, blocked;

	if ((seq & 1) || !sl->valid)
		return EST_HASH;
	eflags = sl->flags;
	if (sym) {
		rev = 0;
	} else {
		rev = !!(eflags & SF_SWAP) != swap;
		/* faith11's order: a twin, the newer entry, is found first
		 * whichever way the packet goes */
		if (eflags & SF_TWIN)
			return EST_LOOKUP;
	}
	pass = sl->pass;
	if (pass & FR_LOGFIRST)
		pass &= ~FR_LOG;
	if (pass & (FR_LOG | FR_NOMATCH))
		return EST_LOOKUP;
	blocked = verdict_of(pass);
	if (blocked && !out && (pass & FR_RETMASK))
		return EST_LOOKUP;
	exp = sl->expire;
	if (exp < now)
		return EST_LOOKUP;
	/* the interface and flags each way are the first packet's: until
	 * then the element's (the pipeline or the hash's path sets them) */
	slot = (rev * 2 + out) & 3;
	if (sl->ifindex[slot] != skb->ifindex)
		return sl->ifindex[slot] ? EST_LOOKUP : EST_HASH;
	if (!out) {
		if (ttl < k_minttl)
			flags |= PF_LOWTTL;
		if (skb->pkt_type == 1)
			flags |= PF_BCAST | PF_MBCAST;
		if (skb->pkt_type == 2)
			flags |= PF_MCAST | PF_MBCAST;
	}
	flx = flags & PF_CMP;
	fi = (out * 2 + rev) & 3;
	if (sl->flx[fi] != flx)
		return sl->flx[fi] ? EST_LOOKUP : EST_HASH;
	if (!(sl->optok & (rev ? 2 : 1)))
		return EST_LOOKUP;
	if (proto == IPPROTO_TCP) {
		if ((s->flags & 0x12) == 0x02 && sl->tcp[0].state > TS_ESTABLISHED && sl->tcp[1].state > TS_ESTABLISHED)
			return EST_LOOKUP;
		__builtin_memcpy(fs, rev ? &sl->tcp[1] : &sl->tcp[0], sizeof(*fs));
		__builtin_memcpy(ts, rev ? &sl->tcp[0] : &sl->tcp[1], sizeof(*ts));
		if (!tcp_window_sides(fs, ts, eflags, sl->pass, s) ||
		    !tcp_fsm_sides(fs, ts, &exp, eflags, s->flags, s->data, sl->age[rev & 1], now))
			return EST_LOOKUP;
	} else {
		__u64 to = C->v[rev ? CFG_TO_UDPACK : CFG_TO_UDP];
		__u32 age = sl->age[rev & 1];

		if (age)
			to = (__u64)age * 1000000000ULL;
		exp = now + to;
	}
	/* the commit: seq from the value read to odd, or the slot changed
	 * meanwhile (an end, a write-back, another packet storing) */
	if (__sync_val_compare_and_swap(&sl->seq, seq, seq + 1) != seq)
		return EST_HASH;
	if (proto == IPPROTO_TCP) {
		struct tcp_side *efs = rev ? &sl->tcp[1] : &sl->tcp[0], *ets = rev ? &sl->tcp[0] : &sl->tcp[1];

		SET(efs->end, fs->end);
		SET(efs->maxend, fs->maxend);
		SET(efs->maxwin, fs->maxwin);
		SET(efs->wscale, fs->wscale);
		SET(efs->wflags, fs->wflags);
		SET(efs->state, fs->state);
		SET(ets->end, ts->end);
		SET(ets->maxend, ts->maxend);
		SET(ets->maxwin, ts->maxwin);
		SET(ets->wscale, ts->wscale);
		SET(ets->wflags, ts->wflags);
		SET(ets->state, ts->state);
	}
	SET(sl->expire, exp);
	SET(sl->last, now);
	sl->pkts[slot]++;
	sl->bytes[slot] += plen;
	sl->hits++;
	est_barrier();
	__sync_fetch_and_add(&sl->seq, 1);
	return blocked ? TC_ACT_SHOT : TC_ACT_UNSPEC;
}

static __noinline int est_path(struct __sk_buff *skb, struct conf *C, __u32 out)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	const __u8 *h = data + 14, *l4;
	struct state_key k = {};
	struct state_entry *e;
	struct st_slot *sl;
	struct statblock *sb;
	struct state_cnt *c;
	struct tcp_seg s = {};
	/* the window's two sides, checked on copies (one pair for the
	 * slot's path and the hash's: the frame is at the verifier's limit) */
	struct tcp_side fs, ts;
	__u32 plen, dlen, pass, slot, fi, flx, flags = PF_TCPUDP;
	__u64 now;
	__u8 proto, ttl, swap;
	int fam, sym, rev, blocked;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 14 + 20 + 8 > end || h[0] != 0x45 || (((h[6] << 8) | h[7]) & 0x3fff))
			return EST_LOOKUP;
		plen = (h[2] << 8) | h[3];
		proto = h[9];
		if (proto == IPPROTO_TCP) {
			if (plen < 40 || data + 14 + 20 + 20 > end)
				return EST_LOOKUP;
		} else if (proto != IPPROTO_UDP || plen < 28) {
			return EST_LOOKUP;
		}
		/* a multicast group is found by wildcard entries only */
		if ((h[16] & 0xf0) == 0xe0)
			return EST_LOOKUP;
		__builtin_memcpy(&k.src[0], &h[12], 4);
		__builtin_memcpy(&k.dst[0], &h[16], 4);
		dlen = plen - 20;
		ttl = h[8];
		l4 = h + 20;
		fam = 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 14 + 40 + 8 > end)
			return EST_LOOKUP;
		dlen = (h[4] << 8) | h[5];
		proto = h[6];
		if (proto == IPPROTO_TCP) {
			if (dlen < 20 || data + 14 + 40 + 20 > end)
				return EST_LOOKUP;
		} else if (proto != IPPROTO_UDP || dlen < 8) {
			return EST_LOOKUP;
		}
		__builtin_memcpy(k.src, &h[8], 16);
		__builtin_memcpy(k.dst, &h[24], 16);
		plen = dlen + 40;
		ttl = h[7];
		l4 = h + 40;
		fam = 6;
	} else {
		return EST_LOOKUP;
	}
	if (proto == IPPROTO_TCP) {
		__u8 doff = l4[12] >> 4;

		if (!tcp_clean(l4))
			return EST_LOOKUP;
		s.seq = ((__u32)l4[4] << 24) | ((__u32)l4[5] << 16) | ((__u32)l4[6] << 8) | l4[7];
		s.ack = ((__u32)l4[8] << 24) | ((__u32)l4[9] << 16) | ((__u32)l4[10] << 8) | l4[11];
		s.win = (l4[14] << 8) | l4[15];
		s.flags = l4[13];
		s.wscale = 0xff; /* tcp_clean: no SYN with options */
		s.data = dlen > doff * 4 ? dlen - doff * 4 : 0;
	}
	k.sport = (l4[0] << 8) | l4[1];
	k.dport = (l4[2] << 8) | l4[3];
	k.proto = proto;
	k.family = fam;
	STAGE(35);
	/* the flow's canonical key, as canon_key makes it of the packet info */
	swap = canon_order(&k, 0, &sym);
	STAGE(36);
	/* the statistics' block now, though only a hit counts in it here:
	 * its pages are then reached while the table's are (one packet a
	 * run, BenchmarkEstablished, 20-40 ns less than fetched at the end);
	 * a packet that falls through finds it again warm */
	sb = stats_get();
	if (sb)
		EST_TOUCH(sb->v[(out * ST_DIR + ST_PKTS) & (NSTATS - 1)]);
	STAGE(31);
	if (stop_at >= 40 && stop_at <= 43) {
		/* the live bisect inside the lookup (lk14); each returns */
		est_probe(&k);
		return TC_ACT_UNSPEC;
	}
	/* the flow's slot first (est11, est15): a slot that holds it
	 * decides, or sends the packet to the pipeline, without the hash.
	 * Its three lines a packet reads are asked for at once (est13's
	 * touches): their misses overlap. */
	if (k_estdm) {
		sl = dm_slot(&k);
		if (sl) {
			__u64 seq = *(volatile __u64 *)&sl->seq;

			EST_TOUCH(sl->pass);
			EST_TOUCH(sl->pkts[0]);
			est_barrier();
			if (dm_key_eq(sl, &k)) {
				int v;

				now = bpf_ktime_get_coarse_ns() + C->v[CFG_CLOCK];
				v = est_slot(skb, C, sl, seq, out, swap, sym, &s, plen, ttl, proto, now, &fs, &ts);
				if (v == EST_LOOKUP)
					return v;
				if (v == EST_HASH) {
					/* the element whole again, the slot
					 * empty; the caller runs the path once
					 * more, by the element (going on here
					 * kept the parse's values across the
					 * slot's calls: stack the frame has
					 * not) */
					e = bpf_map_lookup_elem(&states, &k);
					if (e)
						slot_detach_inl(&k, e);
					return EST_HASH;
				}
				STAGE(34);
				blocked = v == TC_ACT_SHOT;
				goto count;
			}
		}
	}
	e = bpf_map_lookup_elem(&states, &k);
	if (!e)
		return EST_NOENTRY;
	STAGE(32);
	if (stop_at == 44) {
		/* 32 and the element's value lines est reads (all but the
		 * counter stripe: the entry's checks, the window) */
		EST_TOUCH(e->pass);
		EST_TOUCH(e->flx[0]);
		EST_TOUCH(e->tcp[0].end);
		return TC_ACT_UNSPEC;
	}
	/* the window's line and the CPU's counter stripe, asked for now */
	c = &e->cnt[bpf_get_smp_processor_id() & (STATE_STRIPES - 1)];
	EST_TOUCH(c->pkts[0]);
	if (proto == IPPROTO_TCP)
		EST_TOUCH(e->tcp[0].end);
	/* state_find: a flow with entries both ways finds its twin (the
	 * newer) first, whichever way the packet goes, and the key's entry
	 * only if the twin refuses it: left to the pipeline */
	if (sym) {
		rev = 0;
	} else {
		rev = !!(e->flags & SF_SWAP) != swap;
		if (e->flags & SF_TWIN)
			return EST_LOOKUP;
	}
	pass = e->pass;
	if (pass & FR_LOGFIRST)
		pass &= ~FR_LOG;
	if (pass & (FR_LOG | FR_NOMATCH))
		return EST_LOOKUP;
	blocked = verdict_of(pass);
	if (blocked && !out && (pass & FR_RETMASK))
		return EST_LOOKUP;
	/* state_lookup's checks, in its order; the clock once the entry is
	 * there (no other packet reads it) */
	now = bpf_ktime_get_coarse_ns() + C->v[CFG_CLOCK];
	STAGE(33);
	if (e->expire < now)
		return EST_LOOKUP;
	slot = (rev * 2 + out) & 3;
	if (e->ifindex[slot] && e->ifindex[slot] != skb->ifindex)
		return EST_LOOKUP;
	/* the flags the pipeline gives a clean packet (parse_fast, filter()) */
	if (!out) {
		if (ttl < k_minttl)
			flags |= PF_LOWTTL;
		if (skb->pkt_type == 1)
			flags |= PF_BCAST | PF_MBCAST;
		if (skb->pkt_type == 2)
			flags |= PF_MCAST | PF_MBCAST;
	}
	flx = flags & PF_CMP;
	fi = (out * 2 + rev) & 3;
	if (e->flx[fi] && e->flx[fi] != flx)
		return EST_LOOKUP;
	/* a clean packet has no options and no security class */
	if (e->secclass || (!rev ? e->opt != 0 : (e->flags & SF_OPTREV) && e->opt_rev != 0))
		return EST_LOOKUP;
	STAGE(37);
	if (proto == IPPROTO_TCP) {
		struct tcp_side *efs = rev ? &e->tcp[1] : &e->tcp[0], *ets = rev ? &e->tcp[0] : &e->tcp[1];
		__u64 exp = e->expire;

		/* a new SYN on a flow closed on both sides starts afresh */
		if ((s.flags & 0x12) == 0x02 && e->tcp[0].state > TS_ESTABLISHED && e->tcp[1].state > TS_ESTABLISHED)
			return EST_LOOKUP;
		__builtin_memcpy(&fs, efs, sizeof(fs));
		__builtin_memcpy(&ts, ets, sizeof(ts));
		if (!tcp_window_sides(&fs, &ts, e->flags, e->pass, &s) ||
		    !tcp_fsm_sides(&fs, &ts, &exp, e->flags, s.flags, s.data, e->age[rev & 1], now))
			return EST_LOOKUP;
		STAGE(38);
		SET(efs->end, fs.end);
		SET(efs->maxend, fs.maxend);
		SET(efs->maxwin, fs.maxwin);
		SET(efs->wscale, fs.wscale);
		SET(efs->wflags, fs.wflags);
		SET(efs->state, fs.state);
		SET(ets->end, ts.end);
		SET(ets->maxend, ts.maxend);
		SET(ets->maxwin, ts.maxwin);
		SET(ets->wscale, ts.wscale);
		SET(ets->wflags, ts.wflags);
		SET(ets->state, ts.state);
		SET(e->expire, exp);
	} else {
		__u64 to = C->v[rev ? CFG_TO_UDPACK : CFG_TO_UDP];
		__u32 age = e->age[rev & 1];

		if (age)
			to = (__u64)age * 1000000000ULL;
		SET(e->expire, now + to);
	}
	/* what state_lookup stores of a hit */
	if (!e->flx[fi]) {
		e->flx[fi] = flx;
		if (rev && !(e->flags & SF_OPTREV)) {
			e->opt_rev = 0;
			state_flags_set(e, SF_OPTREV);
		}
	}
	if (!e->ifindex[slot])
		e->ifindex[slot] = skb->ifindex;
	SET(e->last, now);
	STAGE(39);
	c->pkts[slot]++;
	c->bytes[slot] += plen;
	/* the next packets go through the flow's slot if it is free (found
	 * again: kept across the hash's path, its pointer took a stack slot
	 * the frame has not) */
	if (k_estdm) {
		sl = dm_slot(&k);
		if (sl && !sl->kpfwt)
			est_fill(sl, &k, e);
	}
	STAGE(34);
count:
	/* counted as filter() counts a state hit */
	if (fam == 6)
		SB_INC(out * ST_DIR + ST_IPV6);
	SB_INC(out * ST_DIR + ST_PKTS);
	SB_INC(out * ST_DIR + ST_STKEPT);
	if (blocked) {
		SB_INC(out * ST_DIR + ST_BLOCK);
		SB_DROP(RSN_FILTER);
		return TC_ACT_SHOT;
	}
	SB_INC(out * ST_DIR + ST_PASS);
	return TC_ACT_UNSPEC;
}

#endif
