//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Sluice IPQoS egress marker: a TC/TCX egress program that classifies
// outbound IPv4/IPv6 packets by the rules in maps (written by
// internal/bpf/qosmark from a compiled internal/qos.Ruleset), rewrites the
// DSCP (IPv4 TOS with an incremental header-checksum update, IPv6 traffic
// class), sets skb->priority (the HTB class id, which the VLAN egress QoS
// map also turns into an 802.1p priority) and counts per policy/filter.
// Every decision mirrors internal/qos/engine (engine.go, header.go) so the two
// datapaths can be tested against each other.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_RULES_PER_ADAPTER 256 /* qos.MaxRules */
#define MAX_RULES 4096
#define MAX_POLICIES 1024
#define MAX_FILTERS 4096
#define MAX_ADAPTERS 64
#define MAX_EXT_HEADERS 4 /* engine.maxExtHeaders */

#define MATCH_SRC (1 << 0)
#define MATCH_DST (1 << 1)
#define MATCH_SPORT (1 << 2)
#define MATCH_DPORT (1 << 3)
#define MATCH_PROTO (1 << 4)
#define MATCH_DSCP (1 << 5)
#define MATCH_MAC (1 << 6)

#define NO_DSCP 0xff

struct qos_addr {
	__u64 hi, lo; /* host-order halves of a big-endian 128-bit number */
};

struct qos_rule {
	struct qos_addr src_lo, src_hi, dst_lo, dst_hi;
	__u16 flags;
	__u8 family; /* 0 any, 4, 6 */
	__u8 proto;
	__u16 sport_lo, sport_hi, dport_lo, dport_hi;
	__u8 dscp_lo, dscp_hi;
	__u8 mac[6];
	__u32 policy; /* slot in policies / policy_stats */
	__u32 filter; /* slot in filter_stats */
	__u32 pad;
};

struct qos_adapter {
	__u32 first_rule;
	__u32 nrules;
	__u32 l2len; /* 14 for Ethernet, 0 for devices without a link header */
	__u32 pad;
};

struct qos_policy {
	__u32 priority; /* skb->priority to set, 0 = leave */
	__u8 dscp;      /* NO_DSCP = leave */
	__u8 pad[3];
};

struct qos_counter {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ADAPTERS);
	__type(key, __u32); /* ifindex */
	__type(value, struct qos_adapter);
} adapters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_RULES);
	__type(key, __u32);
	__type(value, struct qos_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_POLICIES);
	__type(key, __u32);
	__type(value, struct qos_policy);
} policies SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_POLICIES);
	__type(key, __u32);
	__type(value, struct qos_counter);
} policy_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FILTERS);
	__type(key, __u32);
	__type(value, struct qos_counter);
} filter_stats SEC(".maps");

/* The active configuration's normalized text, for -showconfig and for
 * mapping counter slots back to names; NUL-terminated. */
#define CONF_CHUNK 4096
#define CONF_CHUNKS 64

struct qos_conf_chunk {
	__u8 data[CONF_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CONF_CHUNKS);
	__type(key, __u32);
	__type(value, struct qos_conf_chunk);
} conf SEC(".maps");

/* Qdisc drop counts at the last -showstats -reset, per policy slot: the
 * kernel's qdisc counters cannot be zeroed, so stats subtract these. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_POLICIES);
	__type(key, __u32);
	__type(value, __u64);
} drops_base SEC(".maps");

struct flow {
	struct qos_addr src, dst;
	__u8 family, proto, tc, has_ports;
	__u16 sport, dport;
	__u8 mac[6];
	__u8 has_mac;
};

struct scan {
	struct flow *f;
	__u32 first, n;
	__s32 found; /* rule slot, -1 = none */
};

static __always_inline int addr_less(const struct qos_addr *a, const struct qos_addr *b)
{
	return a->hi < b->hi || (a->hi == b->hi && a->lo < b->lo);
}

static long scan_rule(__u64 i, void *ctx)
{
	struct scan *s = ctx;
	struct flow *f = s->f;
	__u32 key;
	struct qos_rule *r;

	if (i >= s->n)
		return 1;
	key = s->first + (__u32)i;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r)
		return 1;
	if (r->family && r->family != f->family)
		return 0;
	if ((r->flags & MATCH_PROTO) && r->proto != f->proto)
		return 0;
	if ((r->flags & MATCH_SRC) && (addr_less(&f->src, &r->src_lo) || addr_less(&r->src_hi, &f->src)))
		return 0;
	if ((r->flags & MATCH_DST) && (addr_less(&f->dst, &r->dst_lo) || addr_less(&r->dst_hi, &f->dst)))
		return 0;
	if (r->flags & (MATCH_SPORT | MATCH_DPORT)) {
		if (!f->has_ports)
			return 0;
		if ((r->flags & MATCH_SPORT) && (f->sport < r->sport_lo || f->sport > r->sport_hi))
			return 0;
		if ((r->flags & MATCH_DPORT) && (f->dport < r->dport_lo || f->dport > r->dport_hi))
			return 0;
	}
	if (r->flags & MATCH_DSCP) {
		__u8 d = f->tc >> 2;
		if (d < r->dscp_lo || d > r->dscp_hi)
			return 0;
	}
	if (r->flags & MATCH_MAC) {
		if (!f->has_mac)
			return 0;
		for (int j = 0; j < 6; j++)
			if (r->mac[j] != f->mac[j])
				return 0;
	}
	s->found = (__s32)key;
	return 1;
}

static __always_inline int is_ext_header(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
}

static __always_inline int has_ports(__u8 proto)
{
	return proto == 6 || proto == 17 || proto == 132 || proto == 136;
}

static __always_inline __u64 load_be64(const __u8 *p)
{
	__u64 v;
	__builtin_memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* parse reads the classification fields; it returns the offset of the
 * IP header, or -1 for a packet IPQoS leaves alone. */
static __always_inline int parse(struct __sk_buff *skb, const struct qos_adapter *ad, struct flow *f)
{
	__u32 l3 = ad->l2len;
	__u32 len = skb->len;
	__u32 l4 = 0;
	__u8 hdr[40];

	if (l3 == 14) {
		__u8 eth[18];
		__u16 proto;

		if (bpf_skb_load_bytes(skb, 0, eth, 14))
			return -1;
		__builtin_memcpy(f->mac, eth, 6);
		f->has_mac = 1;
		proto = ((__u16)eth[12] << 8) | eth[13];
		if (proto == 0x8100 || proto == 0x88a8) /* tag still in the frame */
			l3 = 18;
	} else if (l3 != 0) {
		return -1;
	}
	if (bpf_skb_load_bytes(skb, l3, hdr, 1))
		return -1;
	if ((hdr[0] >> 4) == 4) {
		__u32 ihl = (__u32)(hdr[0] & 0x0f) * 4;

		if (len < l3 + 20 || ihl < 20 || len < l3 + ihl)
			return -1;
		if (bpf_skb_load_bytes(skb, l3, hdr, 20))
			return -1;
		f->family = 4;
		f->proto = hdr[9];
		f->tc = hdr[1];
		f->src.hi = 0;
		f->src.lo = ((__u64)hdr[12] << 24) | ((__u64)hdr[13] << 16) | ((__u64)hdr[14] << 8) | hdr[15];
		f->dst.hi = 0;
		f->dst.lo = ((__u64)hdr[16] << 24) | ((__u64)hdr[17] << 16) | ((__u64)hdr[18] << 8) | hdr[19];
		if (((((__u16)hdr[6] << 8) | hdr[7]) & 0x1fff) == 0)
			l4 = l3 + ihl;
	} else if ((hdr[0] >> 4) == 6) {
		__u8 nh;
		__u32 off = l3 + 40;

		if (bpf_skb_load_bytes(skb, l3, hdr, 40))
			return -1;
		f->family = 6;
		f->tc = (hdr[0] << 4) | (hdr[1] >> 4);
		f->src.hi = load_be64(&hdr[8]);
		f->src.lo = load_be64(&hdr[16]);
		f->dst.hi = load_be64(&hdr[24]);
		f->dst.lo = load_be64(&hdr[32]);
		nh = hdr[6];
		for (int i = 0; i < MAX_EXT_HEADERS; i++) {
			__u8 ext[4];

			if (!is_ext_header(nh) || off + 8 > len)
				break;
			if (bpf_skb_load_bytes(skb, off, ext, 4))
				break;
			if (nh == 44) {
				if (((((__u16)ext[2] << 8) | ext[3]) & 0xfff8) != 0) {
					f->proto = ext[0];
					f->has_ports = 0;
					return l3;
				}
				off += 8;
			} else if (nh == 51) {
				off += ((__u32)ext[1] + 2) * 4;
			} else {
				off += ((__u32)ext[1] + 1) * 8;
			}
			nh = ext[0];
		}
		f->proto = nh;
		if (!is_ext_header(nh) && off <= len)
			l4 = off;
	} else {
		return -1;
	}
	f->has_ports = 0;
	if (l4 && has_ports(f->proto) && l4 + 4 <= len) {
		__u8 p[4];

		if (!bpf_skb_load_bytes(skb, l4, p, 4)) {
			f->has_ports = 1;
			f->sport = ((__u16)p[0] << 8) | p[1];
			f->dport = ((__u16)p[2] << 8) | p[3];
		}
	}
	return l3;
}

static __always_inline void count(void *map, __u32 key, __u64 pkts, __u64 bytes)
{
	struct qos_counter *c = bpf_map_lookup_elem(map, &key);

	if (c) { /* per-CPU: no atomics needed */
		c->packets += pkts;
		c->bytes += bytes;
	}
}

static __always_inline void set_dscp(struct __sk_buff *skb, __u32 l3, const struct flow *f, __u8 dscp)
{
	__u8 ntc = (__u8)(dscp << 2) | (f->tc & 3);
	__u8 w[2];

	if (ntc == f->tc)
		return;
	if (bpf_skb_load_bytes(skb, l3, w, 2))
		return;
	if (f->family == 4) {
		__be16 old = *(__be16 *)w;
		__be16 new;

		w[1] = ntc;
		new = *(__be16 *)w;
		if (bpf_skb_store_bytes(skb, l3 + 1, &w[1], 1, 0))
			return;
		bpf_l3_csum_replace(skb, l3 + 10, old, new, 2);
		return;
	}
	w[0] = 0x60 | (ntc >> 4);
	w[1] = (__u8)(ntc << 4) | (w[1] & 0x0f);
	bpf_skb_store_bytes(skb, l3, w, 2, 0);
}

SEC("tc")
int qos_egress(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct qos_adapter *ad = bpf_map_lookup_elem(&adapters, &ifindex);
	struct flow f = {};
	struct scan s;
	struct qos_rule *r;
	struct qos_policy *p;
	__u32 key;
	int l3;

	if (!ad)
		return TC_ACT_UNSPEC;
	l3 = parse(skb, ad, &f);
	if (l3 < 0)
		return TC_ACT_UNSPEC;
	s.f = &f;
	s.first = ad->first_rule;
	s.n = ad->nrules;
	s.found = -1;
	bpf_loop(MAX_RULES_PER_ADAPTER, scan_rule, &s, 0);
	if (s.found < 0)
		return TC_ACT_UNSPEC;
	key = (__u32)s.found;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r)
		return TC_ACT_UNSPEC;
	key = r->policy;
	p = bpf_map_lookup_elem(&policies, &key);
	if (!p)
		return TC_ACT_UNSPEC;
	if (p->dscp != NO_DSCP)
		set_dscp(skb, (__u32)l3, &f, p->dscp);
	if (p->priority)
		skb->priority = p->priority;
	{
		__u64 pkts = skb->gso_segs ? skb->gso_segs : 1;
		__u64 bytes = skb->len - (__u32)l3;

		count(&policy_stats, r->policy, pkts, bytes);
		count(&filter_stats, r->filter, pkts, bytes);
	}
	/* UNSPEC lets other TCX programs (the filter datapath) run after us. */
	return TC_ACT_UNSPEC;
}

char __license[] SEC("license") = "Dual BSD/GPL";
