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

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

#include "filter.h"
#include "lib/maps.h"
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/match.h"
#include "lib/scan.h"
#include "lib/log.h"
#include "lib/frag.h"
#include "lib/state.h"
#include "lib/reply.h"
#include "lib/route.h"
#include "lib/dca.h"
#include "lib/sweep.h"

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

static __always_inline int filter(struct __sk_buff *skb, __u8 out)
{
	struct work *w = get_work();
	struct pktinfo *p;
	__u32 slot, *l2, pass, reason = RSN_NONE, d = out, logpass = 0, mrule = 0, nlogs, l3off;
	__u64 now;
	int blocked, fam, hit = 0, fr = 0, cut = 0;

	if (out && skb->mark == REPLY_MARK) {
		skb->mark = 0;
		return TC_ACT_UNSPEC;
	}
	if (!w || !cfg(CFG_ENABLED))
		return TC_ACT_UNSPEC;
	p = &w->p;
	__builtin_memset(p, 0, sizeof(*p));
	__builtin_memset(&w->s, 0, sizeof(w->s));
	w->hit_logtag = 0;
	w->hit_rev = 1;
	p->out = out;
	p->ifindex = skb->ifindex;
	l2 = bpf_map_lookup_elem(&ifaces, &p->ifindex);
	l3off = l2 ? *l2 : 14;
	l3off &= 0xff;
	p->l3off = l3off;
	fam = sl_parse(skb, l3off);
	if (fam == 0) {
		stat_inc(d * ST_DIR + ST_NOTIP);
		return TC_ACT_UNSPEC;
	}
	if (fam == 6)
		stat_inc(d * ST_DIR + ST_IPV6);
	stat_inc(d * ST_DIR + ST_PKTS);
	if (!out && p->ttl < cfg(CFG_MINTTL))
		p->flags |= PF_LOWTTL;
	if (!out && skb->pkt_type == 1)
		p->flags |= PF_BCAST | PF_MBCAST;
	if (!out && skb->pkt_type == 2)
		p->flags |= PF_MCAST | PF_MBCAST;
	if (p->flags & PF_SHORT)
		stat_inc(d * ST_DIR + ST_SHORT);
	if (p->flags & PF_BAD)
		stat_inc(d * ST_DIR + ST_BAD);
	if (p->flags & PF_FRAG)
		stat_inc(d * ST_DIR + ST_FRAG);
	if (p->flags & PF_PULLUP) {
		drop_inc(RSN_PULLUP);
		stat_inc(d * ST_DIR + ST_BLOCK);
		return TC_ACT_SHOT;
	}
	if (p->flags & PF_JUMBO) {
		drop_inc(RSN_JUMBO);
		stat_inc(d * ST_DIR + ST_BLOCK);
		return TC_ACT_SHOT;
	}

	slot = cfg(CFG_ACTIVE);
	if (slot >= NSLOTS)
		slot = 0;
	now = now_ns();

	if (!out) {
		sl_scan(slot, LIST_ACCT_IN, 0);
		if (w->s.rule)
			stat_inc(d * ST_DIR + ST_ACCT);
	}

	if ((p->flags & PF_FRAG) && !(p->flags & PF_BAD))
		fr = sl_frag_lookup(now);
	if (fr > 0) {
		hit = 2;
		if (w->hit_pass & FR_KEEPSTATE)
			p->flags |= PF_STATE;
		w->hit_pass &= ~(FR_KEEPSTATE | FR_KEEPFRAG);
	} else if (fr == 0 && !(p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD))) {
		hit = sl_state_lookup(now);
		if (!hit && (p->flags & PF_ICMPERR))
			hit = sl_icmperr_lookup(skb, now);
	}
	if (fr < 0) {
		/* a fragment starting inside the first one is an attack on
		 * reassembly: dropped without consulting the rules */
		p->flags |= PF_BAD;
		pass = FR_BLOCK;
		reason = RSN_BADFRAG;
	} else if (hit) {
		pass = w->hit_pass;
		if (pass & FR_LOGFIRST)
			pass &= ~FR_LOG;
		p->flags |= PF_STATE;
		if (hit == 1) {
			stat_inc(ST_HITS);
			stat_inc(d * ST_DIR + ST_STKEPT);
		}
		/* a fragment of a passed flow: its datagram follows the flow */
		if (hit == 1 && (p->flags & PF_FRAG) && (pass & FR_CMDMASK) == FR_PASS)
			sl_frag_add(pass, w->hit_rule_no, w->hit_group_no, w->hit_logtag, now);
	} else {
		stat_inc(ST_MISSES);
		load_index(&w->s, p, slot);
		w->s.now = now;
		pass = sl_scan(slot, out ? LIST_OUT : LIST_IN, cfg(CFG_DEFPASS));
		mrule = w->s.rule;
		nlogs = w->s.nlogs;
		cut = w->s.cut;
		/* keep frags without keep state: the rest of the datagram
		 * gets this verdict (with keep state, the state entry does) */
		if (mrule && (pass & (FR_KEEPSTATE | FR_KEEPFRAG)) == FR_KEEPFRAG && (p->flags & PF_FRAG)) {
			__u32 key = slot * MAX_RULES + ((mrule - 1) & (MAX_RULES - 1));
			struct rule *r = bpf_map_lookup_elem(&rules, &key);

			if (r)
				sl_frag_add(pass, r->rule_no, r->group_no, r->logtag, now);
		}
		/* pure log rules met during the scan */
		for (int i = 0; i < MAX_LOGS; i++) {
			if (i >= nlogs)
				break;
			sl_log_rule(skb, slot, w->s.logs[i & (MAX_LOGS - 1)], FR_LOG, RSN_NONE);
		}
		/* a deferred call decides after the scan (ipf_firewall); the
		 * call rule stays the matching rule */
		if (mrule && !(pass & FR_NOMATCH) && !(pass & (FR_CMDMASK | FR_CALLNOW))) {
			__u32 gr = sl_call(slot, mrule - 1, pass);

			cut |= w->s.cut;
			if (gr) {
				__u32 gk = slot * MAX_RULES + ((gr - 1) & (MAX_RULES - 1));
				struct rule *g = bpf_map_lookup_elem(&rules, &gk);

				if (g)
					pass = g->action;
			}
			nlogs = w->s.nlogs;
			for (int i = 0; i < MAX_LOGS; i++) {
				if (i >= nlogs || !gr)
					break;
				sl_log_rule(skb, slot, w->s.logs[i & (MAX_LOGS - 1)], FR_LOG, RSN_NONE);
			}
		}
	}

	if (!hit && mrule && !(pass & FR_NOMATCH)) {
		__u32 idx = (mrule - 1) & (MAX_RULES - 1);
		__u32 key = slot * MAX_RULES + idx;
		struct rule *r = bpf_map_lookup_elem(&rules, &key);

		/* HP's keep limit: a connection over the limit is blocked, with
		 * the rule's return-* reply */
		if (r && r->keep_limit && !sl_dca(slot, idx, now)) {
			pass = (pass & ~FR_CMDMASK) | FR_BLOCK | r->limit_ret;
			reason = RSN_DCA;
			stat_inc(ST_DCA);
		}
		if (r && r->pps) {
			struct pps_window *pw = bpf_map_lookup_elem(&pps, &key);

			if (pw) {
				if (now - pw->start >= 1000000000ULL) {
					pw->start = now;
					pw->count = 0;
				}
				if (__sync_fetch_and_add(&pw->count, 1) >= r->pps) {
					pass = (pass & ~(FR_CMDMASK | FR_RETMASK)) | FR_BLOCK;
					reason = RSN_PPS;
					stat_inc(ST_PPS);
				}
			}
		}
		if (r && ((pass & FR_CMDMASK) == FR_PASS || (pass & FR_CMDMASK) == FR_BLOCK) &&
		    (pass & FR_KEEPSTATE) && !(p->flags & PF_STATE)) {
			if (sl_state_create(slot, idx, pass, now) <= 0 && (pass & FR_CMDMASK) == FR_PASS) {
				pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
				reason = RSN_STATEADD;
				stat_inc(d * ST_DIR + ST_STLOST);
			}
		}
	}

	if (cut) {
		/* a scan that did not end: fail closed, never skip rules */
		pass = (pass & ~(FR_CMDMASK | FR_NOMATCH | FR_RETMASK)) | FR_BLOCK;
		reason = RSN_SCANCUT;
	}
	blocked = verdict_of(pass);
	if (blocked && reason == RSN_NONE)
		reason = RSN_FILTER;
	/* outbound accounting counts what the filter passed (the engine's
	 * isPass): an unresolved call (command 0) or nomatch is not counted */
	if (out && !blocked && (pass & FR_CMDMASK) == FR_PASS) {
		sl_scan(slot, LIST_ACCT_OUT, 0);
		if (w->s.rule)
			stat_inc(d * ST_DIR + ST_ACCT);
	}

	if (pass & FR_NOMATCH) {
		stat_inc(d * ST_DIR + ST_NOMATCH);
		logpass = cfg(CFG_LOGFLAGS) & FR_NOMATCH;
	}
	if (blocked) {
		stat_inc(d * ST_DIR + ST_BLOCK);
		drop_inc(reason);
	} else {
		stat_inc(d * ST_DIR + ST_PASS);
	}
	if ((pass & FR_LOG) || logpass ||
	    (cfg(CFG_LOGFLAGS) & (blocked ? FR_BLOCK : FR_PASS))) {
		int lr;

		if (hit)
			lr = sl_log(skb, pass, reason, w->hit_rule_no, w->hit_group_no);
		else if (mrule && !(pass & FR_NOMATCH))
			lr = sl_log_rule(skb, slot, (mrule - 1) & (MAX_RULES - 1), pass, reason);
		else
			lr = sl_log(skb, pass, reason, 0xffffffff, 0xffffffff);
		stat_inc(d * ST_DIR + (blocked ? ST_LOGBLOCK : ST_LOGPASS));
		/* log or-block: a packet that cannot be logged does not pass */
		if (lr < 0 && (pass & FR_LOGORBLOCK) && !blocked) {
			blocked = 1;
			pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
			stat_inc(d * ST_DIR + ST_BLOCK);
			drop_inc(RSN_LOGFAIL);
		}
	}

	if (!blocked) {
		/* the rule that matched, or for a state hit in the direction
		 * that created it, the rule that created the state (the reverse
		 * direction would follow reply-to) */
		if (!(pass & FR_NOMATCH)) {
			int rt = -1;

			if (!hit && mrule)
				rt = sl_route(skb, slot, mrule - 1);
			else if (hit == 1 && !w->hit_rev && w->hit_slot == slot)
				rt = sl_route(skb, slot, w->hit_idx);
			if (rt >= 0)
				return rt;
		}
		return TC_ACT_UNSPEC;
	}
	if (!out && (pass & FR_RETMASK)) {
		int ret = -1;

		__u32 rm = pass & FR_RETMASK;

		/* FR_FAKEICMP is FR_RETRST|FR_RETICMP: compare the field */
		if (rm == FR_RETRST && p->proto == IPPROTO_TCP &&
		    !(p->flags & (PF_SHORT | PF_OOW)) && !(p->tcpflags & 0x04)) {
			ret = sl_reply(skb, 1, 0, 0);
		} else if (rm != FR_RETRST && !(p->flags & PF_FRAGBODY)) {
			__u32 key = slot * MAX_RULES + ((mrule - 1) & (MAX_RULES - 1));
			struct rule *r = bpf_map_lookup_elem(&rules, &key);

			ret = sl_reply(skb, 0, r ? r->ret_code : 0, (pass & FR_RETMASK) == FR_FAKEICMP);
		}
		if (ret >= 0)
			return ret;
		stat_inc(ST_RETFAIL);
	}
	return TC_ACT_SHOT;
}

SEC("tc")
int sluice_ingress(struct __sk_buff *skb)
{
	return filter(skb, 0);
}

SEC("tc")
int sluice_egress(struct __sk_buff *skb)
{
	return filter(skb, 1);
}
