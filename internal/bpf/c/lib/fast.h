/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef SLUICE_FAST_H
#define SLUICE_FAST_H

/*
 * Small sets as constants (dp10). When the active slot's main lists are
 * compact lists whose rules do nothing but their compact match and pass or
 * block [quick], the program made for the slot (k_cfg) carries those lists
 * as frozen .rodata (spec_linux.go fastLists): the verifier knows every
 * field of every rule, so the unrolled loop below keeps only the tests the
 * rules make, and a clean packet is decided from registers and the stack —
 * no scratch area, no scan call, no hot list read. Anything else (a packet
 * the fast parse does not take, state that may exist) goes the whole way.
 *
 * A list may hold IPv4 runs (a blocklist's consecutive address rules, one
 * CM_RUN4 entry each, ld4): a packet that passes a run's compact match
 * reads its address's bit in the slot's runs bitmap (run_absent, as
 * sl_hot_run_may does). A clear bit says no rule of the run matches, and
 * the scan passes the run over; a set bit (a hit, or one of the bitmap's
 * false positives) leaves the packet to the pipeline, which decides it
 * from the start: the bits are read before the scan, so nothing has been
 * written by then.
 */

/* k_fast: bit 0 the inbound list is in k_fast_in, bit 1 the outbound one
 * in k_fast_out (0: no fast path; the code below is removed). A direction
 * without a main list has its bit set and no rule. Bits 2 and 3
 * (FAST_RUNS_IN, FAST_RUNS_OUT): that direction's list holds a run, whose
 * bits are read before the scan (without one, the code is removed). */
volatile const __u32 k_fast = 0;
volatile const __u32 k_nfast_in = 0;
volatile const __u32 k_nfast_out = 0;
volatile const struct hot k_fast_in[FAST_MAX] = {};
volatile const struct hot k_fast_out[FAST_MAX] = {};

/* what the compact matches test of a clean packet */
struct fastpkt {
	__u32 src; /* IPv4: the address as stored (network order) */
	__u32 dst;
	__u32 plen;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 tcpf;
	/* the runs bitmap's word a run looks up (fast_run_absent): a key
	 * in the struct's padding, as filter()'s frame has no room */
	__u32 wi;
};

/* fast_parse takes what parse_fast takes (IPv4 without options, not a
 * fragment, or IPv6 with the transport right after its header; TCP that
 * tcp_clean passes or UDP with a whole header) into f and returns the
 * family, else 0. The fields are the ones parse_fast would store. */
static __always_inline int fast_parse(struct __sk_buff *skb, struct fastpkt *f)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	const __u8 *h = data + 14, *l4;
	int fam;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 14 + 20 + 8 > end || h[0] != 0x45 || (((h[6] << 8) | h[7]) & 0x3fff))
			return 0;
		f->plen = (h[2] << 8) | h[3];
		f->proto = h[9];
		if (f->proto == IPPROTO_TCP) {
			if (f->plen < 40 || data + 14 + 20 + 20 > end)
				return 0;
		} else if (f->proto != IPPROTO_UDP || f->plen < 28) {
			return 0;
		}
		__builtin_memcpy(&f->src, &h[12], 4);
		__builtin_memcpy(&f->dst, &h[16], 4);
		l4 = h + 20;
		fam = 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u32 dlen;

		if (data + 14 + 40 + 8 > end)
			return 0;
		dlen = (h[4] << 8) | h[5];
		f->proto = h[6];
		if (f->proto == IPPROTO_TCP) {
			if (dlen < 20 || data + 14 + 40 + 20 > end)
				return 0;
		} else if (f->proto != IPPROTO_UDP || dlen < 8) {
			return 0;
		}
		/* IPv6 addresses are only in rules matched whole (CM_FULL),
		 * which a fast list has none of */
		f->plen = dlen + 40;
		l4 = h + 40;
		fam = 6;
	} else {
		return 0;
	}
	if (f->proto == IPPROTO_TCP) {
		if (!tcp_clean(l4))
			return 0;
		f->tcpf = l4[13];
	}
	f->sport = (l4[0] << 8) | l4[1];
	f->dport = (l4[2] << 8) | l4[3];
	return fam;
}

/* fast_cm is cm_ok for a rule of a constant list and a clean packet (TCP
 * or UDP: PF_TCPUDP and PF_PORTS set, never short), of a run's entry when
 * run is set (fast_runs_absent), else of any other (a run's fails: the
 * scan passes it over, on the one load of the flags). */
static __always_inline int fast_cm(const volatile struct hot *h, const struct fastpkt *f, int fam, __u32 out, int run)
{
	__u32 fl = h->m.flags;

	if (!(fl & CM_RUN) != !run)
		return 0;
	if (fl & CM_NEVER)
		return 0;
	if (!(fl & CM_OUT) != !out)
		return 0;
	if (h->m.family && h->m.family != fam)
		return 0;
	if ((fl & CM_PROTO) && h->m.proto != f->proto)
		return 0;
	/* IPv4 rules only: the family test made the packet IPv4 */
	if ((fl & CM_SRC) && ((f->src & h->m.smask) == h->m.src) == !!(fl & CM_NOTSRC))
		return 0;
	if ((fl & CM_DST) && ((f->dst & h->m.dmask) == h->m.dst) == !!(fl & CM_NOTDST))
		return 0;
	if ((fl & CM_DPORT) && !port_ok(h->m.dport_op, h->m.dport_lo, h->m.dport_hi, f->dport))
		return 0;
	if ((fl & CM_SPORT) && !port_ok(h->m.sport_op, h->m.sport_lo, h->m.sport_hi, f->sport))
		return 0;
	if ((fl & CM_FLAGS) && (f->proto != IPPROTO_TCP || (f->tcpf & h->m.tcpf_mask) != h->m.tcpf))
		return 0;
	return 1;
}

/* bench_runcut cuts the run probe for sluice bench's opt-in
 * sluice-nomatch-10000-cut-N configurations (Datapath.BenchRunCut, a live
 * bisect; 0 in every program a command loads, and the verifier removes
 * the cuts): 1 no probe (every run reads as absent), 2 run_bits' outer
 * lookup only, 3 and its inner lookup, no word read, 4 run_bits whole
 * (main's probe, even for a slot with RUN_FLAT), 5 run_flat's lookup, no
 * word read. A cut program may pass what a run blocks. */
volatile const __u32 bench_runcut = 0;

/* fast_run_absent says the IPv4 run of entry h (CM_RUN4, whose compact
 * match the packet passed) has no rule for the packet: its address,
 * masked as the run's rules mask it, has a clear bit in the slot's runs
 * bitmap (run_absent; the shift rides in the address word the run leaves
 * free, with RUN_FLAT when the slot has the small sets' bitmap: then
 * that one, an inlined lookup of a plain array, no run_bits; with RUN_BIG
 * run_bits' words in the large sets' plain array). The slot's
 * key is k_slot itself, in .rodata, and the word's is in f: filter()'s
 * frame is at the edge of what the call chain below it may add. */
static __always_inline int fast_run_absent(const volatile struct hot *h, struct fastpkt *f)
{
	int src = h->m.flags & CM_RUNSRC;
	__u32 shift = src ? h->m.src : h->m.dst;
	__u64 *word, x;
	void *bits;

	if (bench_runcut == 1)
		return 1;
	x = run_hash(h->pos, src ? (f->src & h->m.smask) : (f->dst & h->m.dmask));
	/* the small sets' bitmap: a plain array's inlined lookup, the
	 * slot's words at a constant offset (shift and slot are constants
	 * of the program: the verifier keeps one of the two ways) */
	if ((shift & RUN_FLAT) && bench_runcut != 2 && bench_runcut != 3 && bench_runcut != 4) {
		if (bench_runcut == 5) {
			f->wi = k_slot * RUN_FLAT_WORDS + (__u32)(x >> (64 - RUN_FLAT_LOG));
			return bpf_map_lookup_elem(&run_flat, &f->wi) != NULL;
		}
		return k_slot < NSLOTS && run_flat_absent(k_slot, x, &f->wi);
	}
	/* the large sets' array (RUN_BIG): run_bits' words, an inlined
	 * lookup at a constant slot offset; a program bound to the
	 * datapath's one-entry array finds no word and reads run_bits */
	if ((shift & RUN_BIG) && !bench_runcut) {
		shift &= ~(RUN_FLAT | RUN_BIG);
		if (shift == 0 || shift > 63 || k_slot >= NSLOTS)
			return 0;
		word = run_big_word(k_slot, x >> shift, &f->wi);
		if (word)
			return !(*word & (1ULL << ((x >> shift) & 63)));
	}
	shift &= ~(RUN_FLAT | RUN_BIG);
	if (shift == 0 || shift > 63)
		return 0;
	bits = bpf_map_lookup_elem(&run_bits, (const void *)&k_slot);
	if (!bits)
		return 0;
	if (bench_runcut == 2)
		return 1;
	x >>= shift;
	f->wi = x >> 6;
	word = bpf_map_lookup_elem(bits, &f->wi);
	if (bench_runcut == 3)
		return word != NULL;
	return word && !(*word & (1ULL << (x & 63)));
}

/* fast_runs_absent says that no run of the constant list has a rule for
 * the packet: each run whose compact match it passes has a clear bit for
 * it (fast_run_absent). Read before the scan, so that the scan counts as
 * it goes and the verifier sees one path through it, not one a set of
 * matched rules (a packet that a quick rule before a run decides reads
 * the run's bit all the same: for a blocklist, whose runs come first,
 * that is no difference). */
static __always_inline int fast_runs_absent(struct fastpkt *f, int fam, __u32 out)
{
	__u32 n = out ? k_nfast_out : k_nfast_in;

#pragma clang loop unroll(full)
	for (int i = 0; i < FAST_MAX; i++) {
		const volatile struct hot *h = out ? &k_fast_out[i] : &k_fast_in[i];

		if (i >= n)
			break;
		/* CM_RUN4: fastLists takes no other run */
		if (!fast_cm(h, f, fam, out, 1))
			continue;
		if (!fast_run_absent(h, f))
			return 0;
	}
	return 1;
}

/* fast_scan is scan_hot over a constant list: the last matching rule's
 * action unless one is quick, each matching rule counted as the scan
 * counts it, in the CPU's statistics block sb (statblock.fast, which user
 * space adds to hot_counts: no page but the block's). It returns
 * FAST_DECIDED | the pass, or 0, with nothing written, when a run may
 * hold a rule for the packet (a hit or a false positive of the runs
 * bitmap): the pipeline decides it. */
#define FAST_DECIDED (1ULL << 32)
static __always_inline __u64 fast_scan(struct statblock *sb, struct fastpkt *f, int fam, __u32 out, __u32 pass)
{
	__u32 n = out ? k_nfast_out : k_nfast_in;
	/* the slot is a constant: the verifier keeps no test of it */
	__u32 slot = k_slot < NSLOTS ? k_slot : 0;

	if ((k_fast & (out ? FAST_RUNS_OUT : FAST_RUNS_IN)) && !fast_runs_absent(f, fam, out))
		return 0;
#pragma clang loop unroll(full)
	for (int i = 0; i < FAST_MAX; i++) {
		const volatile struct hot *h = out ? &k_fast_out[i] : &k_fast_in[i];

		if (i >= n)
			break;
		/* a run has no rule for the packet (fast_runs_absent) */
		if (!fast_cm(h, f, fam, out, 0))
			continue;
		if (sb) {
			sb->fast[slot][out ? 1 : 0][i].hits++;
			sb->fast[slot][out ? 1 : 0][i].bytes += f->plen;
		}
		pass = h->action;
		if (pass & FR_QUICK)
			break;
	}
	return FAST_DECIDED | pass;
}

#endif
