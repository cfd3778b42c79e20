/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * HP-UX's DCA connection limits, `keep limit N [cumulative]` on quick
 * inbound TCP rules (ipf-reference 7): at most N open connections per
 * source address, or N in all with cumulative. A SYN opens a connection
 * (a retransmitted one is the same connection), a FIN or RST from the
 * client closes it and gives its quota back, and so does its expiry: an
 * embryonic connection after tcp_syn_sent, an open one after
 * tcp_idle_timeout without a packet (the sweeper reclaims them). The Go
 * engine's connLimits is the same model.
 */
#ifndef SLUICE_DCA_H
#define SLUICE_DCA_H

#include <linux/in.h>
#include "common.h"

static __always_inline void dca_keys(struct dca_conn_key *ck, struct dca_key *dk, const struct pktinfo *p,
				     __u32 slot, __u32 idx, int cumul)
{
	__builtin_memset(ck, 0, sizeof(*ck));
	__builtin_memset(dk, 0, sizeof(*dk));
	ck->slot = dk->slot = slot;
	ck->gen = dk->gen = cfg(CFG_GEN0 + (slot % NSLOTS));
	ck->rule = dk->rule = idx;
	__builtin_memcpy(ck->src, p->src, 16);
	__builtin_memcpy(ck->dst, p->dst, 16);
	ck->sport = p->sport;
	ck->dport = p->dport;
	ck->family = p->family;
	ck->cumul = cumul;
	if (!cumul)
		__builtin_memcpy(dk->src, p->src, 16);
}

/* dca_release gives back the quota of a connection that is gone. */
static __always_inline void dca_release(const struct dca_conn_key *ck)
{
	struct dca_key dk = {};
	__u32 *n;

	dk.slot = ck->slot;
	dk.gen = ck->gen;
	dk.rule = ck->rule;
	if (!ck->cumul)
		__builtin_memcpy(dk.src, ck->src, 16);
	n = bpf_map_lookup_elem(&dca, &dk);
	if (n && *n > 0)
		__sync_fetch_and_add(n, -1);
}

/* dca_unlink removes a connection; the caller that removed it releases. */
static __always_inline int dca_unlink(struct dca_conn_key *ck)
{
	if (bpf_map_delete_elem(&dca_conns, ck) != 0)
		return 0;
	dca_release(ck);
	return 1;
}

/* sl_dca applies rule idx's keep limit to the packet in the work area; it
 * returns 0 when the packet opens a connection over the limit (or the
 * connection table is full), 1 otherwise. */
GLOBAL int sl_dca(__u32 slot, __u32 idx, __u64 now)
{
	struct work *w = get_work();
	struct dca_conn_key ck;
	struct dca_key dk;
	struct dca_conn *c, nc = {};
	struct pktinfo *p;
	struct rule *r;
	__u32 *n;
	__u8 f;

	if (!w)
		return 1;
	p = &w->p;
	r = rule_at(slot % NSLOTS, idx);
	if (!r || !r->keep_limit || p->proto != IPPROTO_TCP || !cfg(CFG_DCA))
		return 1;
	f = p->tcpflags;
	dca_keys(&ck, &dk, p, slot % NSLOTS, idx & (RULE_CAP - 1), r->limit_cumul);
	if ((f & 0x12) == 0x02) {
		if (bpf_map_lookup_elem(&dca_conns, &ck))
			return 1; /* a retransmitted SYN */
		n = bpf_map_lookup_elem(&dca, &dk);
		if (n && *n >= r->keep_limit)
			return 0;
		nc.expire = now + cfg(CFG_TO_TCP + TS_SYN_SENT);
		if (bpf_map_update_elem(&dca_conns, &ck, &nc, BPF_NOEXIST) < 0) {
			stat_inc(ST_DCAFULL);
			return 0;
		}
		if (!n) {
			__u32 one = 1;

			if (bpf_map_update_elem(&dca, &dk, &one, BPF_NOEXIST) == 0)
				return 1;
			n = bpf_map_lookup_elem(&dca, &dk);
			if (!n) {
				/* no room to count it: do not keep it either */
				dca_unlink(&ck);
				stat_inc(ST_DCAFULL);
				return 0;
			}
		}
		__sync_fetch_and_add(n, 1);
		return 1;
	}
	if (f & (0x01 | 0x04)) {
		dca_unlink(&ck);
		return 1;
	}
	c = bpf_map_lookup_elem(&dca_conns, &ck);
	if (c)
		c->expire = now + cfg(CFG_TO_TCP + TS_ESTABLISHED);
	return 1;
}

#endif
