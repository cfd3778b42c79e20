/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The fragment cache (ip_frag.c, ipf-reference 3.8): the verdict of a
 * datagram's first fragment for the rest of it.
 */
#ifndef SLUICE_FRAG_H
#define SLUICE_FRAG_H

#include "common.h"

static __always_inline void frag_key_of(struct frag_key *k, const struct pktinfo *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->src, p->src, 16);
	__builtin_memcpy(k->dst, p->dst, 16);
	k->id = p->ipid;
	k->proto = p->proto;
	k->family = p->family;
}

/* sl_frag_lookup finds the cached verdict of an earlier fragment of this
 * packet's datagram (§3.8). */
GLOBAL int sl_frag_lookup(__u64 now)
{
	struct work *w = get_work();
	struct frag_key k;
	struct frag_entry *e;

	if (!w)
		return 0;
	frag_key_of(&k, &w->p);
	e = bpf_map_lookup_elem(&frags, &k);
	if (!e)
		return 0;
	if (e->expire < now) {
		bpf_map_delete_elem(&frags, &k);
		return 0;
	}
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	return 1;
}

/* sl_frag_add caches the verdict of a passed fragment for the rest of its
 * datagram. With keep frags (strict) only the first fragment does. */
GLOBAL int sl_frag_add(__u32 pass, __u32 rule_no, __u32 group_no, __u64 now)
{
	struct work *w = get_work();
	struct frag_key k;
	struct frag_entry e = {};

	if (!w)
		return 0;
	if ((pass & FR_FRSTRICT) && (w->p.flags & PF_FRAGBODY))
		return 0;
	frag_key_of(&k, &w->p);
	e.expire = now + 60000000000ULL;
	e.pass = pass;
	e.rule_no = rule_no;
	e.group_no = group_no;
	e.logtag = w->hit_logtag;
	bpf_map_update_elem(&frags, &k, &e, BPF_ANY);
	return 0;
}

#endif
