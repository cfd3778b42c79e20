/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Packet log records into the log ring (ipf_log_pkt).
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include "common.h"

static __always_inline int emit_log(struct __sk_buff *skb, struct pktinfo *p, __u32 kind,
				     __u32 pass, __u32 reason, __u32 rule_no, __u32 group_no,
				     __u32 logtag)
{
	struct log_rec *rec;
	__u32 n, d = p->out;

	rec = bpf_ringbuf_reserve(&log_ring, sizeof(*rec), 0);
	if (!rec) {
		stat_inc(d * ST_DIR + ST_LOGFAIL);
		return -1;
	}
	rec->ts = bpf_ktime_get_ns();
	rec->kind = kind;
	rec->ifindex = p->ifindex;
	rec->rule_no = rule_no;
	rec->group_no = group_no;
	/* logged because nothing matched: ipmon prints it as such */
	rec->pass = pass | ((pass & FR_NOMATCH) ? FF_LOGNOMATCH : 0);
	rec->reason = reason;
	rec->pflags = p->flags;
	rec->plen = p->plen;
	rec->logtag = logtag;
	rec->dir = p->out;
	rec->family = p->family;
	n = skb->len > p->l3off ? skb->len - p->l3off : 0;
	if (n > LOG_SNAP)
		n = LOG_SNAP;
	rec->caplen = 0;
	if (n > 0 && bpf_skb_load_bytes(skb, p->l3off, rec->data, n) == 0)
		rec->caplen = n;
	bpf_ringbuf_submit(rec, 0);
	stat_inc(d * ST_DIR + ST_LOGGED);
	return 0;
}

static __always_inline int log_rule(struct __sk_buff *skb, struct pktinfo *p, __u32 slot,
				     __u32 idx, __u32 pass, __u32 reason)
{
	struct rule *r = rule_at(slot, idx);

	if (r)
		return emit_log(skb, p, LOG_PACKET, pass, reason, r->rule_no, r->group_no, r->logtag);
	return emit_log(skb, p, LOG_PACKET, pass, reason, 0xffffffff, 0xffffffff, 0);
}

GLOBAL int sl_log(struct __sk_buff *skb, __u32 pass, __u32 reason, __u32 rule_no, __u32 group_no)
{
	struct work *w = get_work();

	if (!w)
		return 0;
	return emit_log(skb, &w->p, LOG_PACKET, pass, reason, rule_no, group_no, w->hit_logtag);
}

GLOBAL int sl_log_rule(struct __sk_buff *skb, __u32 slot, __u32 idx, __u32 pass, __u32 reason)
{
	struct work *w = get_work();

	if (!w || slot >= NSLOTS)
		return 0;
	return log_rule(skb, &w->p, slot, idx & (RULE_CAP - 1), pass, reason);
}

#endif
