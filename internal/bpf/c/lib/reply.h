/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Generated replies (return-rst, return-icmp[-as-dest]): the blocked
 * packet is rewritten into the reply and sent back out of the interface
 * it came in on.
 */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

#include <linux/in.h>
#include <linux/pkt_cls.h>
#include "common.h"
#include "csum.h"

struct rst4 {
	__u8 eth[14];
	__u8 ip[20];
	__u8 tcp[20];
} __attribute__((packed, aligned(8)));

struct rst6 {
	__u8 eth[14];
	__u8 ip[40];
	__u8 tcp[20];
} __attribute__((packed, aligned(8)));

static __always_inline void fill_tcp(__u8 *t, const struct pktinfo *p)
{
	__u8 f = p->tcpflags;
	__u32 data = p->dlen > p->doff * 4 ? p->dlen - p->doff * 4 : 0;
	__u32 seq = 0, ack = 0;
	__u8 nf;

	if (f & 0x10) {
		seq = p->ack;
		nf = 0x04;
	} else {
		ack = p->seq + data + ((f & 0x02) ? 1 : 0) + ((f & 0x01) ? 1 : 0);
		nf = 0x14;
	}
	t[0] = p->dport >> 8; t[1] = p->dport;
	t[2] = p->sport >> 8; t[3] = p->sport;
	t[4] = seq >> 24; t[5] = seq >> 16; t[6] = seq >> 8; t[7] = seq;
	t[8] = ack >> 24; t[9] = ack >> 16; t[10] = ack >> 8; t[11] = ack;
	t[12] = 5 << 4;
	t[13] = nf;
	t[14] = t[15] = t[16] = t[17] = t[18] = t[19] = 0;
}

/* send_rst rewrites the packet into a TCP RST towards its sender and
 * redirects it out of the interface it came in on. */
static __always_inline int send_rst(struct __sk_buff *skb, struct pktinfo *p)
{
	if (p->l3off != 14 || p->proto != IPPROTO_TCP)
		return -1;
	if (p->family == 4) {
		struct rst4 b = {};
		__u64 s = 0;
		__u8 ph[12] __attribute__((aligned(8)));

		if (bpf_skb_load_bytes(skb, 0, b.eth, 14) < 0)
			return -1;
		__builtin_memcpy(ph, b.eth, 6);
		__builtin_memcpy(b.eth, b.eth + 6, 6);
		__builtin_memcpy(b.eth + 6, ph, 6);
		b.ip[0] = 0x45;
		b.ip[3] = 40;
		b.ip[8] = 64;
		b.ip[9] = IPPROTO_TCP;
		__builtin_memcpy(&b.ip[12], &p->dst[0], 4);
		__builtin_memcpy(&b.ip[16], &p->src[0], 4);
		s = csum_add(0, b.ip, 20);
		{
			__u16 c = csum_fold(s);

			__builtin_memcpy(&b.ip[10], &c, 2);
		}
		fill_tcp(b.tcp, p);
		__builtin_memcpy(ph, &p->dst[0], 4);
		__builtin_memcpy(ph + 4, &p->src[0], 4);
		ph[8] = 0;
		ph[9] = IPPROTO_TCP;
		ph[10] = 0;
		ph[11] = 20;
		s = csum_add(0, ph, 12);
		s = csum_add(s, b.tcp, 20);
		{
			__u16 c = csum_fold(s);

			__builtin_memcpy(&b.tcp[16], &c, 2);
		}
		if (bpf_skb_change_tail(skb, sizeof(b), 0) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, 0, &b, sizeof(b), 0) < 0)
			return -1;
	} else {
		struct rst6 b = {};
		__u64 s;
		__u8 ph[40] __attribute__((aligned(8))) = {};

		if (bpf_skb_load_bytes(skb, 0, b.eth, 14) < 0)
			return -1;
		__builtin_memcpy(ph, b.eth, 6);
		__builtin_memcpy(b.eth, b.eth + 6, 6);
		__builtin_memcpy(b.eth + 6, ph, 6);
		b.ip[0] = 0x60;
		b.ip[5] = 20;
		b.ip[6] = IPPROTO_TCP;
		b.ip[7] = 64;
		__builtin_memcpy(&b.ip[8], p->dst, 16);
		__builtin_memcpy(&b.ip[24], p->src, 16);
		fill_tcp(b.tcp, p);
		__builtin_memset(ph, 0, sizeof(ph));
		__builtin_memcpy(ph, p->dst, 16);
		__builtin_memcpy(ph + 16, p->src, 16);
		ph[35] = 20;
		ph[39] = IPPROTO_TCP;
		s = csum_add(0, ph, 40);
		s = csum_add(s, b.tcp, 20);
		{
			__u16 c = csum_fold(s);

			__builtin_memcpy(&b.tcp[16], &c, 2);
		}
		if (bpf_skb_change_tail(skb, sizeof(b), 0) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, 0, &b, sizeof(b), 0) < 0)
			return -1;
	}
	stat_inc(ST_RST);
	return bpf_redirect(skb->ifindex, 0);
}

struct icmp4 {
	__u8 eth[14];
	__u8 ip[20];
	__u8 icmp[8];
	__u8 orig[28];
} __attribute__((packed, aligned(8)));

/* send_icmp4 turns an IPv4 packet into an ICMP unreachable (code) to its
 * sender. The source is the receiving interface's address, or the original
 * destination for return-icmp-as-dest or when the interface has none. */
static __always_inline int send_icmp4(struct __sk_buff *skb, struct pktinfo *p, __u8 code, int asdest)
{
	__u32 ifx = skb->ifindex;
	struct if_addr *ia = bpf_map_lookup_elem(&ifaddrs, &ifx);
	__u32 from = p->dst[0];

	struct icmp4 b = {};
	__u8 tmp[6];
	__u64 s;

	if (p->l3off != 14 || p->family != 4)
		return -1;
	if (bpf_skb_load_bytes(skb, 0, b.eth, 14) < 0)
		return -1;
	/* original IP header (without options) and 8 bytes of L4 */
	if (bpf_skb_load_bytes(skb, 14, b.orig, 20) < 0)
		return -1;
	if (bpf_skb_load_bytes(skb, p->l4off, b.orig + 20, 8) < 0)
		return -1;
	b.orig[0] = 0x45;
	__builtin_memcpy(tmp, b.eth, 6);
	__builtin_memcpy(b.eth, b.eth + 6, 6);
	__builtin_memcpy(b.eth + 6, tmp, 6);
	b.ip[0] = 0x45;
	b.ip[3] = sizeof(b) - 14;
	b.ip[8] = 64;
	b.ip[9] = IPPROTO_ICMP;
	if (!asdest && ia && ia->v4)
		from = ia->v4;
	__builtin_memcpy(&b.ip[12], &from, 4);
	__builtin_memcpy(&b.ip[16], &p->src[0], 4);
	s = csum_add(0, b.ip, 20);
	{
		__u16 c = csum_fold(s);

		__builtin_memcpy(&b.ip[10], &c, 2);
	}
	b.icmp[0] = 3;
	b.icmp[1] = code;
	s = csum_add(0, b.icmp, 8);
	s = csum_add(s, b.orig, 28);
	{
		__u16 c = csum_fold(s);

		__builtin_memcpy(&b.icmp[2], &c, 2);
	}
	if (bpf_skb_change_tail(skb, sizeof(b), 0) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, 0, &b, sizeof(b), 0) < 0)
		return -1;
	stat_inc(ST_ICMPREP);
	return bpf_redirect(skb->ifindex, 0);
}

struct icmp6 {
	__u8 eth[14];
	__u8 ip[40];
	__u8 icmp[8];
	__u8 orig[48];
} __attribute__((packed, aligned(8)));

/* send_icmp6 is send_icmp4 for IPv6: destination unreachable (type 1)
 * quoting the IPv6 header and 8 bytes. Codes map as IPFilter's icmptoicmp6
 * table does for the common ones: port-unr → 4, admin → 1, else 0. */
static __always_inline int send_icmp6(struct __sk_buff *skb, struct pktinfo *p, __u8 code, int asdest)
{
	__u32 ifx = skb->ifindex;
	struct if_addr *ia = bpf_map_lookup_elem(&ifaddrs, &ifx);
	const __u32 *from = p->dst;

	struct icmp6 b = {};
	__u8 ph[40] __attribute__((aligned(8))) = {};
	__u8 tmp[6];
	__u64 s;
	__u8 c6 = 0;

	if (p->l3off != 14 || p->family != 6)
		return -1;
	if (code == 3)
		c6 = 4;
	else if (code == 9 || code == 10 || code == 13)
		c6 = 1;
	if (bpf_skb_load_bytes(skb, 0, b.eth, 14) < 0)
		return -1;
	if (bpf_skb_load_bytes(skb, 14, b.orig, 48) < 0)
		return -1;
	__builtin_memcpy(tmp, b.eth, 6);
	__builtin_memcpy(b.eth, b.eth + 6, 6);
	__builtin_memcpy(b.eth + 6, tmp, 6);
	b.eth[12] = 0x86;
	b.eth[13] = 0xdd;
	b.ip[0] = 0x60;
	b.ip[5] = 56;
	b.ip[6] = IPPROTO_ICMPV6;
	b.ip[7] = 64;
	if (!asdest && ia && (ia->v6[0] | ia->v6[1] | ia->v6[2] | ia->v6[3]))
		from = ia->v6;
	__builtin_memcpy(&b.ip[8], from, 16);
	__builtin_memcpy(&b.ip[24], p->src, 16);
	b.icmp[0] = 1;
	b.icmp[1] = c6;
	__builtin_memcpy(ph, from, 16);
	__builtin_memcpy(ph + 16, p->src, 16);
	ph[35] = 56;
	ph[39] = IPPROTO_ICMPV6;
	s = csum_add(0, ph, 40);
	s = csum_add(s, b.icmp, 8);
	s = csum_add(s, b.orig, 48);
	{
		__u16 c = csum_fold(s);

		__builtin_memcpy(&b.icmp[2], &c, 2);
	}
	if (bpf_skb_change_tail(skb, sizeof(b), 0) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, 0, &b, sizeof(b), 0) < 0)
		return -1;
	stat_inc(ST_ICMPREP);
	return bpf_redirect(skb->ifindex, 0);
}

GLOBAL int sl_reply(struct __sk_buff *skb, __u32 rst, __u32 code, __u32 asdest)
{
	struct work *w = get_work();

	int ret;

	if (!w)
		return -1;
	if (rst)
		ret = send_rst(skb, &w->p);
	else if (w->p.family == 6)
		ret = send_icmp6(skb, &w->p, code, asdest);
	else
		ret = send_icmp4(skb, &w->p, code, asdest);
	/* the reply leaves through our own egress hook: let it pass there */
	if (ret >= 0)
		skb->mark = REPLY_MARK;
	return ret;
}

#endif
