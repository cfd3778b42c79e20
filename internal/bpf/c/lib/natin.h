/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef SLUICE_NATIN_H
#define SLUICE_NATIN_H

/*
 * NAT's established IPv4 packet inside the filter's program (nat15): the
 * fast path of internal/bpf/nat (nat.c's nat_fast4 through its direct
 * array fast4dm) compiled into the filter, so that a packet of an
 * established NAT'd flow runs one program on each hook instead of two.
 * k_nat turns it on (0 in the object: the verifier removes all of it):
 * bit 0 makes the ingress program a prefix placed before NAT's ingress
 * program (it translates a packet whose slot it finds, then filters it and
 * ends the chain; any other packet it leaves untouched to NAT's program
 * and the filter's own after it), bit 1 makes the egress program translate
 * what it passed and end the chain (NAT's egress program, after it, then
 * does not run for that packet). nat_dm is NAT's fast4dm, put in place
 * of this one-slot placeholder at load.
 *
 * The structures and constants are NAT's own, from internal/bpf/nat/c/
 * natfast.h (nat.h includes it too).
 */

#include "../../nat/c/natfast.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nat_slot);
} nat_dm SEC(".maps");

volatile const __u32 k_nat = 0;
/* the length of a jiffy in ns (NAT's plain programs' k_nspj) */
volatile const __u32 k_nat_nspj = 0;

#define natin_barrier() asm volatile("" ::: "memory")
#define NATIN_READ32(x) (*(volatile __u32 *)&(x))

extern void *bpf_cast_to_kern_ctx(void *) __ksym;

struct sk_buff___natin {
	__u8 ip_summed : 2;
} __attribute__((preserve_access_index));

/* nat_inline translates an IPv4 TCP/UDP packet whose key the direct
 * array's slot holds, as nat_fast4 does (the same checks, rewrite,
 * checksums and per-packet fields in the slot), and returns 1; any other
 * packet it leaves untouched and returns 0. A function of its own (a
 * BPF-to-BPF call): inlined, its copy of the slot's rewrite took stack in
 * the programs' main frame, under the pipeline's deepest chain of calls
 * even with k_nat 0 (the verifier then counted 528 bytes, over 512). */
static __noinline int nat_inline(struct __sk_buff *skb, __u32 dir)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct iphdr___natin {
		__u8 vihl;
		__u8 tos;
		__u16 tot_len;
		__u16 id;
		__u16 frag_off;
		__u8 ttl;
		__u8 protocol;
		__u16 check;
		__u32 saddr;
		__u32 daddr;
	} *ip = data + 14;
	struct nat_fast fc;
	struct nat_slot *s;
	__u32 len, tot, diff, q, i, kw, *ports;
	__u16 *ck;
	__u8 *l4 = (void *)(ip + 1), proto, fl = 0;

	if (skb->protocol != bpf_htons(ETH_P_IP) || (void *)(l4 + 8) > end || ip->vihl != 0x45 ||
	    (ip->frag_off & bpf_htons(0x3fff)))
		return 0;
	len = skb->len - 14;
	tot = bpf_ntohs(ip->tot_len);
	if (tot > len || tot < 20)
		tot = len;
	proto = ip->protocol;
	if (proto == IPPROTO_TCP) {
		if (tot < 40 || (void *)(l4 + 20) > end)
			return 0;
		fl = l4[13];
		ck = (__u16 *)(l4 + 16);
	} else if (proto == IPPROTO_UDP) {
		if (tot < 28)
			return 0;
		ck = (__u16 *)(l4 + 6);
	} else {
		return 0;
	}
	ports = (__u32 *)l4;
	kw = proto | dir << 8;
	i = slot_hash(ip->saddr, ip->daddr, *ports, kw);
	s = bpf_map_lookup_elem(&nat_dm, &i);
	if (!s)
		return 0;
	q = NATIN_READ32(s->seq);
	natin_barrier();
	if (s->k.src != ip->saddr || s->k.dst != ip->daddr || *(__u32 *)&s->k.sport != *ports ||
	    *(__u32 *)&s->k.proto != kw || (q & 1))
		return 0;
	__builtin_memcpy(&fc, &s->f, sizeof(fc));
	natin_barrier();
	if (NATIN_READ32(s->seq) != q)
		return 0;
	if (fc.ifindex != skb->ifindex || ((fc.flags & FF_MSS) && (fl & 0x02)))
		return 0;
	ip->saddr = fc.nsrc;
	ip->daddr = fc.ndst;
	if (fc.csum_l3)
		ip->check = ~csum_fold32(csum_add32((__u16)~ip->check, fc.csum_l3));
	*ports = *(__u32 *)&fc.nsport;
	diff = csum_add32(fc.csum_l4a, fc.csum_l4p);
	if (diff && (proto == IPPROTO_TCP || *ck != 0)) {
		struct sk_buff___natin *kb = bpf_cast_to_kern_ctx(skb);
		int summed = BPF_CORE_READ_BITFIELD(kb, ip_summed);

		if (summed == 3) { /* CHECKSUM_PARTIAL */
			if (fc.csum_l4a)
				*ck = csum_fold32(csum_add32(*ck, fc.csum_l4a));
		} else if (summed != 2) { /* not CHECKSUM_COMPLETE */
			*ck = ~csum_fold32(csum_add32(diff, (__u16)~*ck));
		} else {
			__u64 mf = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
			__u32 off = 14 + 20 + (proto == IPPROTO_TCP ? 16 : 6);

			if (fc.csum_l4a)
				bpf_l4_csum_replace(skb, off, 0, fc.csum_l4a, BPF_F_PSEUDO_HDR | mf);
			if (fc.csum_l4p)
				bpf_l4_csum_replace(skb, off, 0, fc.csum_l4p, mf);
			goto account;
		}
		if (proto == IPPROTO_UDP && *ck == 0)
			*ck = 0xffff;
	}
account:
	s->f.pkts++;
	s->f.bytes += len;
	if (fl & ~s->f.tcpflags)
		s->f.tcpflags |= fl;
	{
		__u64 now = bpf_jiffies64() * k_nat_nspj;

		if (s->f.last != now)
			s->f.last = now;
	}
	return 1;
}

#endif
