/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * to, dup-to and fastroute (ipf-reference 1.3.14, 2.2 step 10).
 */
#ifndef SLUICE_ROUTE_H
#define SLUICE_ROUTE_H

#include <linux/pkt_cls.h>
#include "common.h"

static __always_inline long redirect_nh(__u32 ifindex, __u8 fam, const __u32 *nh)
{
	struct bpf_redir_neigh rn = {};

	if (fam == 4) {
		rn.nh_family = 2; /* AF_INET */
		rn.ipv4_nh = nh[0];
	} else if (fam == 6) {
		rn.nh_family = 10; /* AF_INET6 */
		__builtin_memcpy(rn.ipv6_nh, nh, 16);
	} else {
		return bpf_redirect_neigh(ifindex, NULL, 0, 0);
	}
	return bpf_redirect_neigh(ifindex, &rn, sizeof(rn), 0);
}

#define RTF_REV 1     /* a reply of a keep-state flow: reply-to, not to */
#define RTF_DUPONLY 2 /* a blocked packet: its dup-to copy only */

/* sl_route carries out a passing packet's dup-to, fastroute and to (with
 * RTF_REV, a reply of a keep-state flow: its reply-to) in the engine's
 * order (§2.2 step 10, ipf_check): dup-to sends a copy out of its
 * interface; fastroute (inbound) forwards along the routing table without
 * touching the TTL and takes precedence over to; to / reply-to sends the
 * packet itself (the kernel's neighbour table fills in the link layer).
 * With RTF_DUPONLY (a blocked packet) only the copy is made. Returns a TC
 * action, or -1 to let the packet go on as usual. An outbound packet sent
 * elsewhere is marked REPLY_MARK (filtered already), an inbound one
 * FASTRT_MARK (the egress program counts it by the outbound accounting
 * and its flow's entry and lets it go: ipf_fastroute). */
GLOBAL int sl_route(struct __sk_buff *skb, __u32 slot, __u32 idx, __u32 flags)
{
	struct work *w = get_work();
	struct rule *r;
	struct pktinfo *p;
	__u32 ifindex, fam, fmark;
	const __u32 *nh;

	if (!w || slot >= NSLOTS)
		return -1;
	p = &w->p;
	r = rule_at(slot, idx);
	if (!r || !r->route)
		return -1;
	w->rt_seq++;
	w->rt_to = 0;
	w->rt_dup = 0;
	w->rt_fast = 0;
	/* a packet routed from an outbound hook has been filtered as
	 * outbound already: the mark lets it through the egress hook of the
	 * interface it now leaves by (IPFilter checks only inbound packets
	 * again on their new way out) */
	/* an inbound packet sent out of an interface is counted there as
	 * ipf_fastroute counts it: FASTRT_MARK (filter.c) */
	fmark = (r->action & FR_RETMASK) ? FASTRT_NOSTATE_MARK : FASTRT_MARK;
	if (r->route & RT_DUP) {
		__u32 mark = skb->mark;
		long rc;

		skb->mark = p->out ? REPLY_MARK : fmark;
		rc = bpf_clone_redirect(skb, r->dup_ifindex, 0);
		skb->mark = mark;
		if (rc == 0) {
			w->rt_dup = r->dup_ifindex;
			stat_inc(ST_DUPPED);
		} else {
			stat_inc(ST_ROUTEFAIL);
		}
	}
	if (flags & RTF_DUPONLY)
		return -1;
	if ((r->route & RT_FAST) && !p->out) {
		struct bpf_fib_lookup fib = {};
		long rc;

		w->rt_fast = 1;
		fib.family = p->family == 4 ? 2 : 10;
		fib.l4_protocol = p->proto;
		fib.tot_len = p->plen;
		fib.ifindex = skb->ifindex;
		if (p->family == 4) {
			fib.tos = p->tos;
			fib.ipv4_src = p->src[0];
			fib.ipv4_dst = p->dst[0];
		} else {
			__builtin_memcpy(fib.ipv6_src, p->src, 16);
			__builtin_memcpy(fib.ipv6_dst, p->dst, 16);
		}
		rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
		if ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) &&
		    bpf_redirect_neigh(fib.ifindex, NULL, 0, 0) == TC_ACT_REDIRECT) {
			skb->mark = fmark;
			w->rt_to = fib.ifindex;
			stat_inc(ST_ROUTED);
			return TC_ACT_REDIRECT;
		}
		stat_inc(ST_ROUTEFAIL);
		return -1;
	}
	if (flags & RTF_REV) {
		if (!(r->route & RT_REPLY))
			return -1;
		ifindex = r->reply_ifindex;
		fam = r->reply_nh_fam;
		nh = r->reply_nh;
	} else {
		if (!(r->route & RT_TO))
			return -1;
		ifindex = r->to_ifindex;
		fam = r->to_nh_fam;
		nh = r->to_nh;
	}
	if (redirect_nh(ifindex, fam, nh) == TC_ACT_REDIRECT) {
		skb->mark = p->out ? REPLY_MARK : fmark;
		w->rt_to = ifindex;
		stat_inc(ST_ROUTED);
		return TC_ACT_REDIRECT;
	}
	stat_inc(ST_ROUTEFAIL);
	return -1;
}

#endif
