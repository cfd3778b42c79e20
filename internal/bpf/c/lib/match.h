/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Matching one rule against the packet (ipf_check_ipf plus interface,
 * pool and exp tests).
 */
#ifndef SLUICE_MATCH_H
#define SLUICE_MATCH_H

#include <linux/in.h>
#include "common.h"

static __always_inline int addr_eq(const __u32 *a, const __u32 *m, const __u32 *pk, __u8 fam)
{
	if (((pk[0] & m[0]) ^ a[0]) != 0)
		return 0;
	if (fam == 4)
		return 1;
	return ((pk[1] & m[1]) == a[1]) && ((pk[2] & m[2]) == a[2]) && ((pk[3] & m[3]) == a[3]);
}

static __always_inline int port_ok(__u8 op, __u16 lo, __u16 hi, __u16 v)
{
	switch (op) {
	case PORT_EQ: return v == lo;
	case PORT_NE: return v != lo;
	case PORT_LT: return v < lo;
	case PORT_GT: return v > lo;
	case PORT_LE: return v <= lo;
	case PORT_GE: return v >= lo;
	case PORT_OUT: return v < lo || v > hi;
	case PORT_IN: return v > lo && v < hi;
	case PORT_RANGE: return v >= lo && v <= hi;
	}
	return 0;
}

/* cm_ok is a rule's compact match (struct cmatch): 0 when the packet
 * fails a test the rule makes, the tests as rule_match_but makes them. */
static __always_inline int cm_ok(const struct cmatch *c, const struct pktinfo *p)
{
	__u32 f = c->flags;

	if (f & CM_NEVER)
		return 0;
	if (!(f & CM_OUT) != !p->out)
		return 0;
	if (c->family && c->family != p->family)
		return 0;
	if ((f & CM_PROTO) && c->proto != p->proto)
		return 0;
	if ((f & CM_TCPUDP) && !(p->flags & PF_TCPUDP))
		return 0;
	/* IPv4 rules only: the family test made the packet IPv4 */
	if ((f & CM_SRC) && ((p->src[0] & c->smask) == c->src) == !!(f & CM_NOTSRC))
		return 0;
	if ((f & CM_DST) && ((p->dst[0] & c->dmask) == c->dst) == !!(f & CM_NOTDST))
		return 0;
	if (f & CM_PORTS) {
		if (!(p->flags & PF_PORTS))
			return 0;
		if ((f & CM_DPORT) && !port_ok(c->dport_op, c->dport_lo, c->dport_hi, p->dport))
			return 0;
		if ((f & CM_SPORT) && !port_ok(c->sport_op, c->sport_lo, c->sport_hi, p->sport))
			return 0;
		if (f & CM_FLAGS) {
			if (p->proto != IPPROTO_TCP || (p->flags & PF_SHORT))
				return 0;
			if ((p->tcpflags & c->tcpf_mask) != c->tcpf)
				return 0;
		}
	}
	return 1;
}

static __always_inline int pool_has(__u32 slot, __u32 table, const struct pktinfo *p, const __u32 *a)
{
	struct pool_key k = {};
	struct pool_val *v;

	k.prefixlen = 96 + (p->family == 4 ? 32 : 128);
	k.slot = slot;
	k.table = table;
	k.family = p->family;
	/* an IPv4 address is stored in the first word, the rest zero */
	__builtin_memcpy(k.addr, a, 16);
	v = bpf_map_lookup_elem(&pools, &k);
	return v && !v->neg;
}

static __always_inline int expr_one(const struct expr_val *e, const struct pktinfo *p)
{
	switch (e->op) {
	case EXPR_PROTO:
		return p->proto == e->num;
	case EXPR_ADDR:
	case EXPR_SRC:
	case EXPR_DST:
	case EXPR_ADDR6:
	case EXPR_SRC6:
	case EXPR_DST6: {
		__u8 fam = e->op >= EXPR_ADDR6 ? 6 : 4;
		int src, dst;

		if (p->family != fam)
			return 0;
		src = addr_eq(e->w, e->m, p->src, fam);
		dst = addr_eq(e->w, e->m, p->dst, fam);
		if (e->op == EXPR_SRC || e->op == EXPR_SRC6)
			return src;
		if (e->op == EXPR_DST || e->op == EXPR_DST6)
			return dst;
		return src || dst;
	}
	case EXPR_PORT:
		return p->sport == e->num || p->dport == e->num;
	case EXPR_SPORT:
		return p->sport == e->num;
	case EXPR_DPORT:
		return p->dport == e->num;
	case EXPR_FLAGS:
		return (p->tcpflags & e->mask) == e->num;
	}
	return 0;
}

/* sl_expr_match is ipf_fr_matcharray for the packet in the per-CPU work
 * area: clauses ANDed, values ORed, and a clause whose implied protocol is
 * not the packet's fails the rule even when negated. */
GLOBAL int sl_expr_match(__u32 slot, __u32 start, __u32 count)
{
	struct work *w = get_work();
	int rv = 0;

	if (!w || slot >= NSLOTS || start >= MAX_EXPRS)
		return 0;
	for (__u32 i = 0; i < MAX_EXPR_VALS; i++) {
		struct expr_val *e;
		__u32 k;

		if (i >= count)
			break;
		k = slot * MAX_EXPRS + start + i;
		e = bpf_map_lookup_elem(&exprs, &k);
		if (!e)
			return 0;
		if (e->proto && e->proto != w->p.proto)
			return 0;
		if (!rv)
			rv = expr_one(e, &w->p);
		if (e->end) {
			if (rv == !!e->not)
				return 0;
			rv = 0;
		}
	}
	return 1;
}

/* rule_match_but is rule_match without the tests in ignore (a run's
 * address, which the runs table decides). */
static __always_inline int rule_match_but(const struct rule *r, const struct pktinfo *p, __u32 slot, __u32 ignore)
{
	__u32 m = r->match & ~ignore;

	if (m & M_NEVER)
		return 0;
	/* a rule never matches a packet travelling the other way */
	if (!(r->action & FR_OUTQUE) != !p->out)
		return 0;
	if ((m & M_IFACE) && p->ifindex != r->ifindex[0] && p->ifindex != r->ifindex[1])
		return 0;
	if (r->family && r->family != p->family)
		return 0;
	/* an exp rule tests nothing but its expression (ipf_check_ipf is not
	 * called for FR_T_IPFEXPR) */
	if (KHAS(FEAT_EXPR) && (m & M_EXPR))
		return sl_expr_match(slot, r->expr_start, r->expr_count);
	if ((m & M_PROTO) && r->proto != p->proto)
		return 0;
	/* FI_TCPUDP: behind IPv4 AH too, unlike proto tests */
	if ((m & M_TCPUDP) && !(p->flags & PF_TCPUDP))
		return 0;
	if ((m & M_TOS) && r->tos != p->tos)
		return 0;
	if ((m & M_TTL) && r->ttl != p->ttl)
		return 0;
	if (m & M_SRC) {
		int eq = addr_eq(r->src, r->smask, p->src, p->family);

		if (eq == !!(m & M_NOTSRC))
			return 0;
	}
	if (m & M_DST) {
		int eq = addr_eq(r->dst, r->dmask, p->dst, p->family);

		if (eq == !!(m & M_NOTDST))
			return 0;
	}
	if (KHAS(FEAT_POOL) && (m & M_SRCPOOL)) {
		if (pool_has(slot, r->src_pool, p, p->src) == !!(m & M_NOTSRC))
			return 0;
	}
	if (KHAS(FEAT_POOL) && (m & M_DSTPOOL)) {
		if (pool_has(slot, r->dst_pool, p, p->dst) == !!(m & M_NOTDST))
			return 0;
	}
	if (m & (M_SPORT | M_DPORT | M_FLAGS)) {
		if (!(p->flags & PF_PORTS))
			return 0;
		if ((m & M_DPORT) && !port_ok(r->dport_op, r->dport_lo, r->dport_hi, p->dport))
			return 0;
		if ((m & M_SPORT) && !port_ok(r->sport_op, r->sport_lo, r->sport_hi, p->sport))
			return 0;
		if (m & M_FLAGS) {
			if (p->proto != IPPROTO_TCP || (p->flags & PF_SHORT))
				return 0;
			if ((p->tcpflags & r->tcpf_mask) != r->tcpf)
				return 0;
		}
	}
	/* ports or the ICMP type, not both (ipf_check_ipf): an icmp-type
	 * rule without a protocol matches a TCP or UDP packet's ports */
	if ((m & M_ICMP) && !(p->flags & PF_PORTS)) {
		if (!(p->flags & PF_ICMPOK) || (p->flags & PF_FRAGBODY) ||
		    (p->proto != IPPROTO_ICMP && p->proto != IPPROTO_ICMPV6))
			return 0;
		if ((p->icmp & r->icmp_mask) != r->icmp_val)
			return 0;
	}
	if ((m & M_WITH) && (p->flags & r->with_mask) != r->with_want)
		return 0;
	if ((m & M_OPT) && (p->optbits & r->opt_mask) != r->opt_want)
		return 0;
	if ((m & M_SEC) && (p->secclass & r->sec_mask) != r->sec_want)
		return 0;
	return 1;
}

static __always_inline int rule_match(const struct rule *r, const struct pktinfo *p, __u32 slot)
{
	return rule_match_but(r, p, slot, 0);
}

#endif
