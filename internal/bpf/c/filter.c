// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Sluice filter datapath: IPFilter semantics (fil.c order) on TC/TCX hooks.
 *
 * A packet is parsed once into struct pktinfo; then accounting (in), the
 * state table, the rule scan (last match wins unless quick, groups), pps,
 * state creation, accounting (out), logging and generated replies.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

/* stop_at ends the pipeline after stage n (0: never): the per-stage
 * benchmarks load copies of the program with it set and compare them. The
 * verifier removes the checks from the program that runs (stop_at 0).
 * Before the library: state_create has stages of its own (lib/state.h). */
volatile const __u32 stop_at = 0;

#include "filter.h"
#include "lib/maps.h"
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/match.h"
#include "lib/scan.h"
#include "lib/fast.h"
#include "lib/log.h"
#include "lib/frag.h"
#include "lib/state.h"
#include "lib/reply.h"
#include "lib/route.h"
#include "lib/dca.h"
#include "lib/sweep.h"
#include "lib/natin.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* --------------------------------------------------------------- main */

static __always_inline int verdict_of(__u32 pass)
{
	__u32 cmd = pass & FR_CMDMASK;

	/* a matched `nomatch` rule has no pass bit: IPFilter drops the
	 * packet (ipftest's bad-packet) */
	return cmd == FR_BLOCK || cmd == FR_AUTH || cmd == FR_PREAUTH ||
	       (cmd == FR_CALL && (pass & FR_NOMATCH));
}

/* stop_at ends the pipeline after stage n (0: never; above) */
#define STAGE(n) do { if (stop_at == (n)) return TC_ACT_UNSPEC; } while (0)

/* SB_INC and SB_DROP count through the statblock filter() fetched once. */
#define SB_INC(k) do { if (sb) sb->v[(k) & (NSTATS - 1)]++; } while (0)
#define SB_DROP(r) do { if (sb) sb->drop[(r) & (NREASONS - 1)]++; } while (0)

/* the established path: verdict_of, STAGE and the counters above */
#include "lib/est.h"

/* idle_verdict gives a clean packet of family fam default pass as the
 * whole pipeline would with no rules, no state and no logging, counted
 * as it counts it. */
static __always_inline int idle_verdict(struct statblock *sb, __u32 d, int fam, __u32 pass)
{
	if (verdict_of(pass)) {
		if (fam == 6)
			SB_INC(d * ST_DIR + ST_IPV6);
		SB_INC(d * ST_DIR + ST_PKTS);
		SB_INC(d * ST_DIR + ST_MISS);
		if (pass & FR_NOMATCH)
			SB_INC(d * ST_DIR + ST_NOMATCH);
		SB_INC(d * ST_DIR + ST_BLOCK);
		SB_DROP(RSN_FILTER);
		return TC_ACT_SHOT;
	}
	/* a pass counts pass, pkts, miss (nomatch, IPv6) as one counter of
	 * its kind, which user space adds to each (stats_linux.go
	 * statBlock): one increment a packet where there were three to
	 * five, on the line the direction's counters share */
	SB_INC(d * ST_DIR + ST_CLEAN + (pass & FR_NOMATCH ? ST_CLEAN_NOMATCH : 0) + (fam == 6 ? ST_CLEAN_IPV6 : 0));
	return TC_ACT_UNSPEC;
}

/* rule_flags is what an entry made for the verdict pass of the scan whose
 * last matched rule is r records (the engine's ruleFlags): ipf_state_add
 * and ipf_frag_known take fin_fr's flags. A quick keep-state rule left
 * matched last could not add its entry during the scan (quick_state): its
 * own flags, so the same entry is refused again. */
static __always_inline __u32 rule_flags(const struct rule *r, __u32 pass)
{
	if ((r->action & (FR_QUICK | FR_KEEPSTATE)) == (FR_QUICK | FR_KEEPSTATE) && !r->keep_limit &&
	    (r->action & FR_CMDMASK) != FR_AUTH)
		return r->action;
	return pass;
}

/* state_total is the state table's entry count */
static __always_inline __s64 state_total(void)
{
	__u32 zero = 0;
	__s64 *n = bpf_map_lookup_elem(&state_count, &zero);

	return n ? *n : 0;
}

/* past get_work, filter() reads the slot, its FEAT_* word and the ipf -l
 * flags from its copy in w (one config a packet: k_* in a specialised
 * program, the config's words in the generic one), not from locals kept
 * across the calls in slots of its frame, nor from .rodata at each use
 * (blocks of such loads the compiler merged read an address the loader
 * cannot fold: rodata.go) */
#define F_SLOT (w->cf_slot < NSLOTS ? w->cf_slot : 0)
#define F_FEAT (w->cf_feat)
#define F_LOGFLAGS (w->cf_logflags)
#define FHAS(f) ((k_feat & (f)) && (F_FEAT & (f)))

static __always_inline int filter(struct __sk_buff *skb, __u8 out)
{
	struct conf *C;
	struct work *w;
	struct statblock *sb;
	struct pktinfo *p;
	__u32 slot, *l2, pass, reason = RSN_NONE, d = out, logpass = 0, mrule = 0, nlogs, l3off;
	__u32 defpass, logflags, anyl3, minttl;
	__u64 feat;
	__s64 nst;
	int blocked, fam, hit = 0, fr = 0, cut = 0, fr_keep = 0, estmiss = 0, fastrt = 0;

	if (out && skb->mark == REPLY_MARK) {
		skb->mark = 0;
		return TC_ACT_UNSPEC;
	}
	if (out && (skb->mark == FASTRT_MARK || skb->mark == FASTRT_NOSTATE_MARK)) {
		/* sent here by an inbound rule: counted below, not filtered */
		fastrt = skb->mark == FASTRT_MARK ? 2 : 1;
		skb->mark = 0;
	}
	STAGE(1);
	if (k_mode == KM_OFF)
		return TC_ACT_UNSPEC;
	if (k_mode == KM_IDLE && fastrt)
		return TC_ACT_UNSPEC; /* no rules, no state: nothing counts it */
	if (k_mode == KM_IDLE) {
		/* on, no rule in either set, no state, no logging, every
		 * interface with a link-layer header: a clean packet reads
		 * nothing but its CPU's statistics */
		STAGE(21);
		fam = clean_family(skb, 14);
		STAGE(22);
		if (fam) {
			sb = stats_get();
			STAGE(23);
			return idle_verdict(sb, d, fam, k_defpass);
		}
	}
	STAGE(29);
	/* the on/off switch is read per packet by every program, so that it
	 * takes effect at once (ipf -D switches the filter off before it
	 * detaches it; a process killed before it replaced the programs must
	 * leave it off) */
	C = conf_get();
	if (!C || !C->v[CFG_ENABLED])
		return TC_ACT_UNSPEC;
	/* a program whose sets may keep state looks a clean packet's flow up
	 * first (lib/est.h): a hit that needs nothing else is decided there.
	 * Not for a direction with accounting, a slot with routing, ipf -l
	 * flags or interfaces without a link-layer header (their code runs
	 * around the lookup) */
	if (!fastrt && k_est && k_cfg && k_state && !k_anyl3 && !k_logflags && !(k_feat & k_sfeat & FEAT_ROUTE) &&
	    !(k_feat & k_sfeat & (out ? FEAT_ACCT_OUT : FEAT_ACCT_IN))) {
		int v = est_path(skb, C, out);

		/* st_dm's slot gave the flow back to its element: once more
		 * (a second EST_HASH, a slot filled again meanwhile: the
		 * pipeline) */
		if (v == EST_HASH)
			v = est_path(skb, C, out);
		if (v != EST_LOOKUP && v != EST_NOENTRY && v != EST_HASH)
			return v;
		estmiss = v == EST_NOENTRY;
	}
	if (!fastrt && k_cfg && (k_fast & (out ? 2 : 1))) {
		/* the slot's list is a constant of the program (lib/fast.h):
		 * a clean packet, with no state to look up, is decided and
		 * counted here as the whole pipeline would (unless a run of
		 * the list may hold a rule for it) */
		struct fastpkt f = {};
		__u64 v;

		fam = !k_state || state_total() == 0 ? fast_parse(skb, &f) : 0;
		if (fam) {
			/* the rules count where the statistics do (fast_scan) */
			sb = stats_get();
			if ((v = fast_scan(sb, &f, fam, out, k_defpass)))
				return idle_verdict(sb, d, fam, (__u32)v);
			/* no state to look up: estmiss says nothing (set so
			 * that it does not live across the scan: frame) */
			estmiss = 0;
		}
	}
	/* the table's count for the pipeline, read again: kept from the
	 * fast path's read, it took a slot of the frame across the scan */
	nst = k_state ? state_total() : 0;
	if (k_cfg) {
		/* a program specialised for the active slot and the config
		 * in force (spec_linux.go): that word is all it reads */
		slot = k_slot;
		feat = k_sfeat;
		defpass = k_defpass;
		logflags = k_logflags;
		anyl3 = k_anyl3;
		minttl = k_minttl;
	} else {
		/* fetched again: C would live across the fast path, in a
		 * slot of the frame */
		C = conf_get();
		if (!C)
			return TC_ACT_UNSPEC;
		slot = C->v[CFG_ACTIVE];
		feat = C->v[BOUND(CFG_INDEX0 + (slot < NSLOTS ? slot : 0), CFG_N - 1)];
		defpass = C->v[CFG_DEFPASS];
		logflags = C->v[CFG_LOGFLAGS];
		anyl3 = C->v[CFG_ANYL3];
		minttl = C->v[CFG_MINTTL];
	}
	if (slot >= NSLOTS)
		slot = 0;
	STAGE(2);
	sb = stats_get();
	if (!fastrt && k_mode == KM_CONFIG && (feat & FEAT_IDLE) && nst == 0 && !logflags &&
	    !(defpass & (FR_LOG | FR_RETMASK))) {
		/* no rules, no state, no logging: a clean packet gets
		 * default_pass, counted as the whole pipeline counts it */
		l3off = 14;
		if (anyl3) {
			__u32 l2i = skb->ifindex & (IFACE_SLOTS - 1), *l2e = bpf_map_lookup_elem(&ifaces, &l2i);

			if (l2e && (*l2e >> 8) == skb->ifindex)
				l3off = *l2e & 0xff;
		}
		fam = clean_family(skb, l3off);
		if (fam)
			return idle_verdict(sb, d, fam, defpass);
	}
	w = get_work();
	if (!w)
		return TC_ACT_UNSPEC;
	/* from here the configuration is read where it is used: kept in
	 * locals it took slots of the frame across the calls */
	w->cf_slot = slot;
	w->cf_feat = feat;
	w->cf_logflags = logflags;
	p = &w->p;
	__builtin_memset(p, 0, sizeof(*p));
	/* the scan state is set up by each scan; only the index is per
	 * packet (and per slot) */
	w->s.use_index = 0;
	w->s.rule = 0;
	w->s.nlogs = 0;
	/* the packet's time, when something keeps it (below): in w, not
	 * a local kept across the calls in a slot of the frame */
	w->s.now = 0;
	w->hit_logtag = 0;
	w->hit_rev = 1;
	w->made_rev = 0;
	p->out = out;
	p->ifindex = skb->ifindex;
	l3off = 14;
	if (anyl3) {
		/* a key of this block: its stack is shared with others' */
		__u32 ik = p->ifindex & (IFACE_SLOTS - 1);

		l2 = bpf_map_lookup_elem(&ifaces, &ik);
		if (l2 && (*l2 >> 8) == p->ifindex)
			l3off = *l2 & 0xff;
	}
	p->l3off = l3off;
	STAGE(3);
	fam = parse_fast(skb, p, l3off);
	if (!fam) {
		/* the fast parse may have set fields before it gave up */
		__builtin_memset(p, 0, sizeof(*p));
		p->out = out;
		p->ifindex = skb->ifindex;
		p->l3off = l3off;
		fam = sl_parse(skb, l3off);
	}
	STAGE(4);
	if (fam == 0) {
		SB_INC(d * ST_DIR + ST_NOTIP);
		return TC_ACT_UNSPEC;
	}
	if (fastrt) {
		/* ipf_fastroute: a packet an inbound rule sent out of this
		 * interface (to, reply-to, fastroute, a dup-to copy) is counted
		 * by the outbound accounting and, unless the rule returns an
		 * error or reset, by its flow's state entry (the engine's
		 * leaveCounted); IPFilter filters it no further, whatever the
		 * state check says (a block rule's entry included) */
		if (FHAS(FEAT_ACCT_OUT))
			sl_scan(F_SLOT, LIST_ACCT_OUT, 0);
		if (fastrt == 2 && nst > 0 && !(p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD | PF_PULLUP))) {
			w->s.now = now_ns();
			hit = sl_state_lookup(w->s.now, 0, 0);
			if (hit == SL_TWIN_REFUSED)
				hit = sl_state_lookup(w->s.now, 0, 1);
			if (!hit && (p->flags & PF_ICMPERR))
				sl_icmperr_lookup(skb, w->s.now);
		}
		return TC_ACT_UNSPEC;
	}
	if (fam == 6)
		SB_INC(d * ST_DIR + ST_IPV6);
	SB_INC(d * ST_DIR + ST_PKTS);
	if (!out && p->ttl < minttl)
		p->flags |= PF_LOWTTL;
	if (!out && skb->pkt_type == 1)
		p->flags |= PF_BCAST | PF_MBCAST;
	if (!out && skb->pkt_type == 2)
		p->flags |= PF_MCAST | PF_MBCAST;
	if (p->flags & PF_SHORT)
		SB_INC(d * ST_DIR + ST_SHORT);
	if (p->flags & PF_BAD)
		SB_INC(d * ST_DIR + ST_BAD);
	if (p->flags & PF_FRAG)
		SB_INC(d * ST_DIR + ST_FRAG);
	if (p->flags & PF_PULLUP) {
		SB_DROP(RSN_PULLUP);
		SB_INC(d * ST_DIR + ST_BLOCK);
		return TC_ACT_SHOT;
	}
	if (p->flags & PF_JUMBO) {
		SB_DROP(RSN_JUMBO);
		SB_INC(d * ST_DIR + ST_BLOCK);
		return TC_ACT_SHOT;
	}

	STAGE(5);
	/* the time only when something keeps it: state, fragments, rate
	 * and connection limits */
	if (nst > 0 || FHAS(FEAT_CLOCK) || (KHAS(FEAT_FRAGS) && (p->flags & PF_FRAG)))
		w->s.now = now_ns();
	STAGE(6);

	if (!out && FHAS(FEAT_ACCT_IN)) {
		sl_scan(F_SLOT, LIST_ACCT_IN, 0);
		if (w->s.rule)
			SB_INC(d * ST_DIR + ST_ACCT);
	}

	STAGE(7);
	if (KHAS(FEAT_FRAGS) && (p->flags & PF_FRAG) && !(p->flags & PF_BAD))
		fr = sl_frag_lookup(w->s.now);
	if (fr > 0) {
		hit = 2;
		if (w->hit_pass & FR_KEEPSTATE) {
			p->flags |= PF_STATE;
			fr_keep = 1;
		}
		w->hit_pass &= ~(FR_KEEPSTATE | FR_KEEPFRAG);
	} else if (fr == 0 && !(p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD)) && nst > 0) {
		hit = sl_state_lookup(w->s.now, estmiss, 0);
		if (hit == SL_TWIN_REFUSED)
			hit = sl_state_lookup(w->s.now, estmiss, 1);
		if (!hit && (p->flags & PF_ICMPERR))
			hit = sl_icmperr_lookup(skb, w->s.now);
	}
	if (hit) {
		pass = w->hit_pass;
		if (pass & FR_LOGFIRST)
			pass &= ~FR_LOG;
		p->flags |= PF_STATE;
		/* the table's hits are the directions' kept packets */
		if (hit == 1)
			SB_INC(d * ST_DIR + ST_STKEPT);
		/* a fragment of a passed flow: its datagram follows the flow */
		if (hit == 1 && (p->flags & PF_FRAG) && (pass & FR_CMDMASK) == FR_PASS)
			frag_add_w(w, pass, w->hit_rule_no, w->hit_group_no, w->hit_logtag, w->s.now, w->hit_slot, w->hit_idx);
	} else {
		SB_INC(d * ST_DIR + ST_MISS);
		STAGE(8);
		/* a compact main list is scanned without the index (and the
		 * outbound accounting list after it, when the bit is set) */
		if (k_cfg) {
			/* neither the index's dimensions nor whether it is
			 * needed are in k_sfeat (fewer programs to verify):
			 * the list's hot list says, the config the rest */
			__u32 hk = F_SLOT * LIST_GROUP0 + (out ? LIST_OUT : LIST_IN);
			struct hotlist *hl = bpf_map_lookup_elem(&hotlists, &hk);

			if (!hl || !(hl->ok & HOT_NOIDX))
				load_index(&w->s, p, F_SLOT, cfg(CFG_INDEX0 + F_SLOT));
		} else if (!(F_FEAT & (out ? FEAT_HOT_OUT : FEAT_HOT_IN))) {
			load_index(&w->s, p, F_SLOT, F_FEAT);
		}
		STAGE(9);
		pass = sl_scan(F_SLOT, out ? LIST_OUT : LIST_IN, defpass);
		STAGE(10);
		mrule = w->s.rule;
		nlogs = w->s.nlogs;
		cut = w->s.cut;
		/* keep frags without keep state: the rest of the datagram
		 * gets this verdict (with keep state, the state entry does) */
		if (mrule && (pass & (FR_KEEPSTATE | FR_KEEPFRAG)) == FR_KEEPFRAG && frag_makes_entry(p)) {
			struct rule *r = rule_at(F_SLOT, mrule - 1);

			if (r)
				frag_add_w(w, rule_flags(r, pass), r->rule_no, r->group_no, r->logtag, w->s.now, F_SLOT, mrule - 1);
		}
		/* pure log rules met during the scan */
		for (int i = 0; i < MAX_LOGS; i++) {
			if (!KHAS(FEAT_LOG) || i >= nlogs)
				break;
			sl_log_rule(skb, F_SLOT, w->s.logs[i & (MAX_LOGS - 1)], FR_LOG, RSN_NONE);
		}
		/* a deferred call decides after the scan (ipf_firewall); the
		 * call rule stays the matching rule */
		if (mrule && !(pass & FR_NOMATCH) && !(pass & (FR_CMDMASK | FR_CALLNOW))) {
			__u32 gr = sl_call(F_SLOT, mrule - 1, pass);

			cut |= w->s.cut;
			if (gr) {
				struct rule *g = rule_at(F_SLOT, gr - 1);

				if (g)
					pass = g->action;
			}
			nlogs = w->s.nlogs;
			for (int i = 0; i < MAX_LOGS; i++) {
				if (!KHAS(FEAT_LOG) || i >= nlogs || !gr)
					break;
				sl_log_rule(skb, F_SLOT, w->s.logs[i & (MAX_LOGS - 1)], FR_LOG, RSN_NONE);
			}
		}
	}

	/* a fragment starting inside its first one (sl_frag_lookup) went
	 * through the rules marked bad */
	if (p->flags & PF_BADFRAG)
		reason = RSN_BADFRAG;
	/* the matched rule is read again only for what it may add: a
	 * keep limit or pps (FEAT_LIMITS) or state */
	if (!hit && mrule && !(pass & FR_NOMATCH) && (FHAS(FEAT_LIMITS) || (pass & FR_KEEPSTATE))) {
		__u32 idx = (mrule - 1) & (RULE_CAP - 1), spass;
		struct rule *r = rule_at(F_SLOT, idx);

		/* HP's keep limit: a connection over the limit is blocked, with
		 * the rule's return-* reply */
		if (r && r->keep_limit && !sl_dca(F_SLOT, idx, w->s.now)) {
			pass = (pass & ~FR_CMDMASK) | FR_BLOCK | r->limit_ret;
			reason = RSN_DCA;
			SB_INC(ST_DCA);
		}
		/* a packet over its rule's pps is blocked, but a keep-state
		 * rule still makes its entry with the rule's flags (the
		 * engine's statePass; semantics pps-keep-state) */
		spass = pass;
		if (r && r->pps) {
			struct pps_window *pw = slot_elem(&pps, F_SLOT, idx);

			if (pw) {
				if (w->s.now - pw->start >= 1000000000ULL) {
					pw->start = w->s.now;
					pw->count = 0;
				}
				if (__sync_fetch_and_add(&pw->count, 1) >= r->pps) {
					pass = (pass & ~(FR_CMDMASK | FR_RETMASK)) | FR_BLOCK;
					reason = RSN_PPS;
					SB_INC(ST_PPS);
				}
			}
		}
		if (r && ((pass & FR_CMDMASK) == FR_PASS || (pass & FR_CMDMASK) == FR_BLOCK) &&
		    (pass & FR_KEEPSTATE) && !(p->flags & PF_STATE)) {
			if (sl_state_create(F_SLOT, idx, rule_flags(r, spass), w->s.now) <= 0 && (pass & FR_CMDMASK) == FR_PASS) {
				pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
				reason = RSN_STATEADD;
				SB_INC(d * ST_DIR + ST_STLOST);
			}
		}
	}

	if (cut) {
		/* a scan that did not end: fail closed, never skip rules */
		pass = (pass & ~(FR_CMDMASK | FR_NOMATCH | FR_RETMASK)) | FR_BLOCK;
		reason = RSN_SCANCUT;
	}
	STAGE(11);
	blocked = verdict_of(pass);
	if (blocked && reason == RSN_NONE)
		reason = RSN_FILTER;
	/* outbound accounting counts what the filter passed (the engine's
	 * isPass): an unresolved call (command 0) or nomatch is not counted */
	if (out && !blocked && (pass & FR_CMDMASK) == FR_PASS && FHAS(FEAT_ACCT_OUT)) {
		sl_scan(F_SLOT, LIST_ACCT_OUT, 0);
		if (w->s.rule)
			SB_INC(d * ST_DIR + ST_ACCT);
	}

	if (pass & FR_NOMATCH) {
		SB_INC(d * ST_DIR + ST_NOMATCH);
		if (KHAS(FEAT_LOG))
			logpass = F_LOGFLAGS & FR_NOMATCH;
	}
	if (blocked) {
		SB_INC(d * ST_DIR + ST_BLOCK);
		SB_DROP(reason);
	} else {
		SB_INC(d * ST_DIR + ST_PASS);
	}
	STAGE(12);
	if (KHAS(FEAT_LOG) && ((pass & FR_LOG) || logpass ||
	    (F_LOGFLAGS & (blocked ? FR_BLOCK : FR_PASS)))) {
		int lr;

		if (hit)
			lr = sl_log(skb, pass, reason, w->hit_rule_no, w->hit_group_no);
		else if (mrule && !(pass & FR_NOMATCH))
			lr = sl_log_rule(skb, F_SLOT, (mrule - 1) & (RULE_CAP - 1), pass, reason);
		else
			lr = sl_log(skb, pass, reason, 0xffffffff, 0xffffffff);
		SB_INC(d * ST_DIR + (blocked ? ST_LOGBLOCK : ST_LOGPASS));
		/* log or-block: a packet that cannot be logged does not pass */
		if (lr < 0 && (pass & FR_LOGORBLOCK) && !blocked) {
			blocked = 1;
			pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
			SB_INC(d * ST_DIR + ST_BLOCK);
			SB_DROP(RSN_LOGFAIL);
		}
	}

	STAGE(13);
	if (FHAS(FEAT_ROUTE)) {
		/* the rule matched last (a log rule too: ipf_check routes by
		 * fin_fr); for a state hit the rule that created the state (a
		 * reply, an ICMP error about a packet going the entry's way
		 * included, follows its reply-to); for a fragment a fragment
		 * entry passed, the rule its first fragment matched. A passed
		 * or preauth packet goes where the rule says (a no-match one
		 * too), except one a keep-state flow's fragment entry passed
		 * (fr_keep); a blocked one only has its dup-to copy made (a
		 * monitor sees what was dropped; docs/ipfilter-differences.md
		 * C2: its `to` is not followed). */
		__u32 rs = NSLOTS, ri = 0, rf = 0, cmd = pass & FR_CMDMASK;
		int rt = -1;

		if (!hit && mrule) {
			rs = F_SLOT;
			ri = mrule - 1;
			rf = w->made_rev ? RTF_REV : 0;
		} else if (hit && w->hit_slot == F_SLOT) {
			rs = F_SLOT;
			ri = w->hit_idx;
			rf = w->hit_rev ? RTF_REV : 0;
		}
		if (rs == F_SLOT && (cmd == FR_PASS || cmd == FR_PREAUTH) && !fr_keep)
			rt = sl_route(skb, F_SLOT, ri, rf);
		else if (rs == F_SLOT && (cmd == FR_BLOCK || (pass & (FR_CMDMASK | FR_NOMATCH)) == FR_NOMATCH))
			sl_route(skb, F_SLOT, ri, RTF_DUPONLY);
		if (rt >= 0)
			return rt;
	}
	if (!blocked)
		return TC_ACT_UNSPEC;
	if (KHAS(FEAT_RET) && !out && (pass & FR_RETMASK)) {
		int ret = -1;

		__u32 rm = pass & FR_RETMASK;

		/* FR_FAKEICMP is FR_RETRST|FR_RETICMP: compare the field */
		if (rm == FR_RETRST && p->proto == IPPROTO_TCP &&
		    !(p->flags & (PF_SHORT | PF_OOW)) && !(p->tcpflags & 0x04)) {
			ret = sl_reply(skb, 1, 0, 0);
		} else if (rm != FR_RETRST && !(p->flags & PF_FRAGBODY)) {
			struct rule *r = rule_at(F_SLOT, mrule - 1);

			ret = sl_reply(skb, 0, r ? r->ret_code : 0, (pass & FR_RETMASK) == FR_FAKEICMP);
		}
		if (ret >= 0)
			return ret;
		SB_INC(ST_RETFAIL);
	}
	return TC_ACT_SHOT;
}

SEC("tc")
int sluice_ingress(struct __sk_buff *skb)
{
	return filter(skb, 0);
}

/* With k_nat (lib/natin.h) a packet NAT's established path translated
 * here ends the hook's chain when the filter passes it (TC_ACT_OK): NAT's
 * own program, which would translate it next (egress) or has been done
 * here in its place (ingress), does not run. The ingress prefix is a
 * program of its own, placed before NAT's: only what it translates, the
 * rest left untouched to NAT's program and sluice_ingress after it (a
 * call before filter() in sluice_ingress took stack from its chain of
 * calls, over the verifier's 512 bytes in some specialisations). */
SEC("tc")
int sluice_ingress_nat(struct __sk_buff *skb)
{
	int r;

	if (!(k_nat & 1) || !nat_inline(skb, 0))
		return TC_ACT_UNSPEC;
	r = filter(skb, 0);
	return r == TC_ACT_UNSPEC ? TC_ACT_OK : r;
}

SEC("tc")
int sluice_egress(struct __sk_buff *skb)
{
	int r = filter(skb, 1);

	if ((k_nat & 2) && r == TC_ACT_UNSPEC && nat_inline(skb, 1))
		return TC_ACT_OK;
	return r;
}
