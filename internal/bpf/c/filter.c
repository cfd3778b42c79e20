// SPDX-License-Identifier: GPL-2.0
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

#include "filter.h"

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

char LICENSE[] SEC("license") = "GPL";

/* BOUND masks an index in a way the compiler cannot drop after proving a
 * tighter range, which the verifier could not follow. */
#define BOUND(x, m) ({ __u64 _v = (x); asm volatile("" : "+r"(_v)); _v & (m); })

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_RULES);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_LISTS);
	__type(key, __u32);
	__type(value, struct list);
} lists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOTS * MAX_RULES);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_RULES);
	__type(key, __u32);
	__type(value, struct pps_window);
} pps SEC(".maps");

/* Entries each rule has created (keep state limit). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_RULES);
	__type(key, __u32);
	__type(value, __u32);
} rule_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CFG_N);
	__type(key, __u32);
	__type(value, __u64);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NREASONS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* Global count of live state entries (state_max). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} state_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct state_key);
	__type(value, struct state_entry);
} states SEC(".maps");

/* Fragment cache (keep frags, and fragments of flows with state). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct frag_key);
	__type(value, struct frag_entry);
} frags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct dca_key);
	__type(value, __u32);
} dca SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct blocks);
} idx_dst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct port_key);
	__type(value, struct blocks);
} idx_dport SEC(".maps");

/* Source dimensions of the index, laid out as idx_dst and idx_dport. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct blocks);
} idx_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct port_key);
	__type(value, struct blocks);
} idx_sport SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_EXPRS);
	__type(key, __u32);
	__type(value, struct expr_val);
} exprs SEC(".maps");

/* Link-layer header length per ifindex; missing means Ethernet (14). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} ifaces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pool_key);
	__type(value, struct pool_val);
} pools SEC(".maps");

/* Interface addresses by ifindex, written by user space at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct if_addr);
} ifaddrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} log_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NSLOTS * MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct rule_text);
} rule_texts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_LISTS);
	__type(key, __u32);
	__type(value, struct list_meta);
} list_metas SEC(".maps");

/* Unused: puts struct log_rec into the BTF for the layout test and for
 * user space decoders (the ring buffer itself carries no type). */
struct log_rec sluice_log_rec_btf SEC(".bss");

struct pktinfo {
	__u32 src[4];
	__u32 dst[4];
	__u32 flags;
	__u32 optbits;
	__u32 ifindex;
	__u32 plen;   /* IP total length */
	__u32 dlen;   /* L4 bytes */
	__u32 l3off;
	__u32 l4off;
	__u32 seq;
	__u32 ack;
	__u16 sport;
	__u16 dport;
	__u16 icmp;   /* type<<8 | code */
	__u16 win;
	__u16 icmpid;
	__u8 family;
	__u8 proto;
	__u8 tos;
	__u8 ttl;
	__u8 tcpflags;
	__u8 out;
	__u8 doff;
	__u8 secclass;
	__u8 wscale;   /* from a SYN's options, 0xff if none */
	__u8 sackok;
	__u8 l4proto;  /* protocol of the header at l4off: proto, or what IPv4 AH carries */
	__u32 ipid;    /* IPv4 id or IPv6 fragment id */
};

#define MAX_LOGS 4

struct scan {
	__u32 base;     /* slot * MAX_RULES */
	__u32 lbase;    /* slot * MAX_LISTS */
	__u32 pos;
	__u32 end;
	__u32 pass;
	__u32 rule;     /* slot-relative index of the last matching rule + 1 */
	__u32 depth;
	__u32 skip;
	__u32 nlogs;
	__u32 use_index;
	__u32 passo;    /* pass before the last matching rule (§2.3 restore) */
	__u32 slot;
	__u64 now;
	__u32 stack_pos[MAX_DEPTH];
	__u32 stack_end[MAX_DEPTH];
	__u32 stack_passo[MAX_DEPTH];
	__u32 ncall;                 /* call frames on the stack */
	__u32 stack_call[MAX_DEPTH]; /* 1: the frame scans a called group */
	__u32 stack_pass[MAX_DEPTH]; /* call frames: pass and rule of the caller */
	__u32 stack_rule[MAX_DEPTH];
	__u32 logs[MAX_LOGS];
	__u64 cand[BLOCK_WORDS];
};

/* Per-CPU scratch: the 512-byte BPF stack cannot hold the packet info, the
 * scan state and a state entry under construction at once. TC programs run
 * with migration disabled and do not nest on one CPU. */
struct work {
	struct pktinfo p;
	struct scan s;
	struct state_entry e;
	__u8 obuf[64]; /* IPv4 / TCP options: variable offsets need a map value */
	/* result of the state lookup */
	__u32 hit_pass;
	__u32 hit_rule_no;
	__u32 hit_group_no;
	__u32 hit_logtag;
	__u32 hit_rev;  /* the state hit was a reply */
	__u32 hit_slot; /* slot and rule index that created the entry */
	__u32 hit_idx;
};

/* GLOBAL functions are verified once on their own instead of once per call
 * path; that keeps the verifier's work linear in the program's size. */
#define GLOBAL __attribute__((noinline))

/* skb->mark of a generated reply (return-rst / return-icmp) and of a
 * packet an outbound rule routed elsewhere (to / dup-to) */
#define REPLY_MARK 0x51c3e7f1

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct work);
} scratch SEC(".maps");

static __always_inline struct work *get_work(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline __u64 cfg(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&config, &key);
	return v ? *v : 0;
}

static __always_inline void stat_inc(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &key);
	if (v)
		*v += 1;
}

static __always_inline void drop_inc(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&drops, &reason);
	if (v)
		*v += 1;
}

static __always_inline __u64 now_ns(void)
{
	return bpf_ktime_get_ns() + cfg(CFG_CLOCK);
}

/* ---------------------------------------------------------------- parse */

/* Option bits by option type (IPFilter's ionames; addext and visa are never
 * recorded because of its table quirk), and IPSO classes by classification
 * byte. Tables instead of switches: no branches for the verifier to walk. */
static const __u32 optbit_tab[256] = {
	[0x07] = 0x2, [0x0a] = 0x4, [0x0b] = 0x8, [0x0c] = 0x10, [0x0f] = 0x20,
	[0x44] = 0x40, [0x52] = 0x80, [0x82] = 0x100, [0x83] = 0x200,
	[0x85] = 0x400, [0x86] = 0x800, [0x88] = 0x1000, [0x89] = 0x2000,
	[0x90] = 0x10000, [0x91] = 0x20000, [0xcd] = 0x40000,
};

static const __u8 ipso_tab[256] = {
	[0x01] = 0x01, [0x3d] = 0x02, [0x5a] = 0x04, [0x66] = 0x08,
	[0x96] = 0x10, [0xab] = 0x20, [0xcc] = 0x40, [0xf1] = 0x80,
};

GLOBAL int sl_ipv4_options(struct __sk_buff *skb, __u32 off, __u32 olen)
{
	struct work *w = get_work();
	struct pktinfo *p;
	__u8 *opt;
	__u32 i = 0;
	int nsec = 0;

	if (!w)
		return 0;
	p = &w->p;
	opt = w->obuf;
	__builtin_memset(opt, 0, 64);

	if (olen > 40)
		olen = 40;
	if (olen < 4)
		olen = 4;
	{
		__u32 n = BOUND(olen, 63);

		if (n == 0 || n > 40 || bpf_skb_load_bytes(skb, off, opt, n) < 0)
			return 0;
	}
#pragma unroll
	for (int n = 0; n < 40; n++) {
		__u8 type, len;

		if (i >= olen || i >= 40)
			break;
		type = opt[BOUND(i, 63)];
		if (type == 0) /* EOL */
			break;
		if (type == 1) { /* NOP */
			i++;
			continue;
		}
		if (i + 1 >= olen || i + 1 >= 40)
			break;
		len = opt[BOUND(i + 1, 63)];
		if (len < 2 || i + len > olen)
			break;
		if (len > 4)
			p->optbits |= optbit_tab[BOUND(type, 255)];
		if (type == 0x82) {
			if (++nsec > 1)
				p->flags |= PF_BAD;
			if (i + 2 < 40)
				p->secclass = ipso_tab[BOUND(opt[BOUND(i + 2, 63)], 255)];
		}
		if (type == 0x86 && (len < 6 || len > 40))
			p->flags |= PF_BAD;
		i += len;
	}
	return 0;
}

GLOBAL int sl_tcp_options(struct __sk_buff *skb, __u32 off, __u32 olen)
{
	struct work *w = get_work();
	struct pktinfo *p;
	__u8 *o;
	__u32 i = 0;

	if (!w)
		return 0;
	p = &w->p;
	o = w->obuf;
	__builtin_memset(o, 0, 64);
	if (olen > 40)
		olen = 40;
	{
		__u32 n = BOUND(olen, 63);

		if (n == 0 || n > 40 || bpf_skb_load_bytes(skb, off, o, n) < 0)
			return 0;
	}
#pragma unroll
	for (int n = 0; n < 20; n++) {
		__u8 t, l;

		if (i >= olen || i >= 39)
			break;
		t = o[BOUND(i, 63)];
		if (t == 0)
			break;
		if (t == 1) {
			i++;
			continue;
		}
		l = o[BOUND(i + 1, 63)];
		if (l < 2)
			break;
		if (t == 3) {
			if (l != 3)
				p->flags |= PF_BAD;
			else
				p->wscale = o[BOUND(i + 2, 63)] > 14 ? 14 : o[BOUND(i + 2, 63)];
		}
		if (t == 4) {
			if (l != 2)
				p->flags |= PF_BAD;
			else
				p->sackok = 1;
		}
		i += l;
	}
	return 0;
}

static __always_inline void parse_l4(struct __sk_buff *skb, struct pktinfo *p, __u32 off, __u32 fragoff)
{
	__u32 dlen = p->dlen;
	__u8 h[20] = {};

	if (p->l4proto == IPPROTO_TCP || p->l4proto == IPPROTO_UDP)
		p->flags |= PF_TCPUDP;

	if (fragoff != 0) {
		__u32 min = 0;

		if (p->l4proto == IPPROTO_TCP)
			min = 20;
		else if (p->l4proto == IPPROTO_UDP)
			min = 8;
		else if (p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6)
			min = 8;
		if (fragoff < min)
			p->flags |= PF_SHORT;
		return;
	}

	{
		/* IPFilter pulls the L4 header up; when the buffer does not hold
		 * it the packet is dropped before the rules (pullup-fail) */
		__u32 need = 0;

		if (p->l4proto == IPPROTO_TCP && dlen >= 20)
			need = 20;
		else if (p->l4proto == IPPROTO_UDP && dlen > 3)
			need = 8;
		else if (p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6)
			need = 8;
		else if (p->l4proto == 47 || p->l4proto == 50)
			need = 8; /* a whole grehdr_t; the ESP SPI and sequence */
		if (need && off + need > skb->len) {
			p->flags |= PF_BAD | PF_PULLUP;
			return;
		}
	}
	switch (p->l4proto) {
	case IPPROTO_TCP: {
		__u8 f;

		if (dlen < 20 || bpf_skb_load_bytes(skb, off, h, 20) < 0) {
			p->flags |= PF_SHORT;
			if (dlen >= 4 && bpf_skb_load_bytes(skb, off, h, 4) == 0) {
				p->sport = (h[0] << 8) | h[1];
				p->dport = (h[2] << 8) | h[3];
				p->flags |= PF_PORTS;
			}
			return;
		}
		p->sport = (h[0] << 8) | h[1];
		p->dport = (h[2] << 8) | h[3];
		p->seq = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
		p->ack = ((__u32)h[8] << 24) | ((__u32)h[9] << 16) | ((__u32)h[10] << 8) | h[11];
		p->doff = h[12] >> 4;
		p->tcpflags = f = h[13];
		p->win = (h[14] << 8) | h[15];
		p->flags |= PF_PORTS;
		{
			int bad = p->doff < 5;

			if ((f & 0x20) && h[18] == 0 && h[19] == 0)
				bad = 1; /* URG with urp 0 */
			if ((f & (0x02 | 0x01)) && (f & 0x04) && !(f & 0x10))
				bad = 1;
			if ((f & 0x02) && (f & (0x20 | 0x08)))
				bad = 1;
			if (!(f & 0x10) && !(f & (0x02 | 0x04)))
				bad = 1;
			if (bad) {
				p->flags |= PF_BAD;
			} else if (p->doff > 5 && off + p->doff * 4 > skb->len) {
				/* ipf_pr_tcpcommon pulls the options up too */
				p->flags |= PF_BAD | PF_PULLUP;
				return;
			}
		}
		/* window scale and SACK-permitted from a SYN's options */
		p->wscale = 0xff;
		if ((f & 0x02) && p->doff > 5)
			sl_tcp_options(skb, off + 20, (p->doff - 5) * 4);
		return;
	}
	case IPPROTO_UDP:
		if (dlen < 8 || bpf_skb_load_bytes(skb, off, h, 8) < 0) {
			p->flags |= PF_SHORT;
			if (dlen >= 4 && bpf_skb_load_bytes(skb, off, h, 4) == 0) {
				p->sport = (h[0] << 8) | h[1];
				p->dport = (h[2] << 8) | h[3];
				p->flags |= PF_PORTS;
			}
			return;
		}
		p->sport = (h[0] << 8) | h[1];
		p->dport = (h[2] << 8) | h[3];
		p->flags |= PF_PORTS;
		return;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		__u8 t;
		__u32 min = 8;

		if (dlen < 2 || bpf_skb_load_bytes(skb, off, h, 2) < 0) {
			p->flags |= PF_SHORT;
			return;
		}
		t = h[0];
		p->icmp = (h[0] << 8) | h[1];
		p->flags |= PF_ICMPOK;
		/* only echo, timestamp and mask messages carry an id that state
		 * matches on (IPFilter reads it for no other type) */
		if (((p->l4proto == IPPROTO_ICMP && (t == 0 || t == 8 || t == 13 || t == 14 || t == 17 || t == 18)) ||
		     (p->l4proto == IPPROTO_ICMPV6 && (t == 128 || t == 129))) &&
		    dlen >= 6 && bpf_skb_load_bytes(skb, off, h, 6) == 0)
			p->icmpid = (h[4] << 8) | h[5];
		if (p->l4proto == IPPROTO_ICMP) {
			switch (t) {
			case 0: case 8: case 9: case 10:
				p->flags |= PF_ICMPQUERY;
				break;
			case 13: case 14:
				min = 20;
				p->flags |= PF_ICMPQUERY;
				break;
			case 15: case 16:
				p->flags |= PF_ICMPQUERY;
				min = 28;
				break;
			case 17: case 18:
				min = 12;
				p->flags |= PF_ICMPQUERY;
				break;
			case 3: case 4: case 5: case 11: case 12:
				min = 28;
				p->flags |= PF_ICMPERR;
				break;
			default:
				min = 28;
			}
		} else {
			if (t >= 128)
				p->flags |= PF_ICMPQUERY;
			else if (t >= 1 && t <= 4)
				p->flags |= PF_ICMPERR;
		}
		if (dlen < min)
			p->flags |= PF_SHORT;
		return;
	}
	}
}

static __always_inline int parse_ipv4(struct __sk_buff *skb, struct pktinfo *p, __u32 off)
{
	__u8 h[20];
	__u32 hl, fo, fragoff;

	p->family = 4;
	if (bpf_skb_load_bytes(skb, off, h, 20) < 0) {
		p->flags |= PF_SHORT | PF_BAD;
		return 0;
	}
	hl = (h[0] & 0xf) * 4;
	p->tos = h[1];
	p->plen = (h[2] << 8) | h[3];
	fo = (h[6] << 8) | h[7];
	p->ipid = (h[4] << 8) | h[5];
	p->ttl = h[8];
	p->proto = p->l4proto = h[9];
	__builtin_memcpy(&p->src[0], &h[12], 4);
	__builtin_memcpy(&p->dst[0], &h[16], 4);
	if (hl < 20 || p->plen < hl) {
		p->flags |= PF_BAD;
		return 0;
	}
	p->dlen = p->plen - hl;
	p->l4off = off + hl;
	fragoff = (fo & 0x1fff) * 8;
	if (fo & 0x3fff)
		p->flags |= PF_FRAG;
	if (fragoff) {
		p->flags |= PF_FRAGBODY;
		if (fragoff + p->dlen > 65535 || p->dlen == 0 || ((fo & 0x2000) && (p->dlen & 7)))
			p->flags |= PF_BAD;
	}
	if ((h[16] & 0xf0) == 0xe0)
		p->flags |= PF_MCAST | PF_MBCAST;
	if (hl > 20) {
		p->flags |= PF_IPOPTS;
		sl_ipv4_options(skb, off + 20, hl - 20);
	}
	if (p->proto == IPPROTO_AH) {
		/* ipf_pr_ah (§2.1): skip (len+2)*4 bytes and dissect what
		 * follows; proto stays AH, as fi_p does */
		__u8 ah[2];
		__u32 n;

		p->flags |= PF_AH;
		p->l4proto = 59; /* IPPROTO_NONE */
		if (fragoff ? fragoff < 12 : p->dlen < 12) {
			p->flags |= PF_SHORT;
			return 0;
		}
		if (fragoff)
			return 0;
		if (off + hl + 12 > skb->len || bpf_skb_load_bytes(skb, off + hl, ah, 2) < 0) {
			p->flags |= PF_BAD | PF_PULLUP;
			return 0;
		}
		n = ((__u32)ah[1] + 2) * 4;
		if (n > p->dlen) {
			/* IPFilter steps past the packet and the next pull-up
			 * frees it (bad-packet) */
			p->flags |= PF_BAD | PF_PULLUP;
			return 0;
		}
		p->dlen -= n;
		p->l4off += n;
		p->l4proto = ah[0];
		parse_l4(skb, p, off + hl + n, 0);
		return 0;
	}
	parse_l4(skb, p, off + hl, fragoff);
	return 0;
}

static __always_inline __u32 v6x_bit(__u8 nh)
{
	switch (nh) {
	case 0: case 51: return V6X_HOPOPTS;
	case 43: return V6X_ROUTING;
	case 44: return V6X_FRAG;
	case 60: return V6X_DSTOPTS;
	case 135: return V6X_MOBILITY;
	}
	return 0;
}

static __always_inline int is_v6ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60 || nh == 135;
}

static __always_inline int parse_ipv6(struct __sk_buff *skb, struct pktinfo *p, __u32 off)
{
	__u8 h[40];
	__u8 nh;
	__u32 pos, end, seen = 0, fragoff = 0;

	p->family = 6;
	if (bpf_skb_load_bytes(skb, off, h, 40) < 0) {
		p->flags |= PF_SHORT | PF_BAD;
		return 0;
	}
	p->tos = ((h[0] & 0xf) << 4) | (h[1] >> 4);
	p->dlen = (h[4] << 8) | h[5];
	nh = h[6];
	p->ttl = h[7];
	__builtin_memcpy(p->src, &h[8], 16);
	__builtin_memcpy(p->dst, &h[24], 16);
	p->plen = p->dlen + 40;
	if (p->dlen == 0) {
		p->flags |= PF_JUMBO | PF_BAD;
		return 0;
	}
	if (h[24] == 0xff)
		p->flags |= PF_MCAST | PF_MBCAST;
	pos = off + 40;
	end = pos + p->dlen;
#pragma unroll
	for (int n = 0; n < 6; n++) {
		__u8 e[8];
		__u32 len, bit;

		if (!is_v6ext(nh))
			break;
		bit = 1 << (nh & 31);
		if (nh == 135)
			bit = 1 << 30;
		if (seen & bit)
			p->flags |= PF_BAD;
		seen |= bit;
		/* extension header bits (v6hdrs), not recorded past a fragment
		 * header; AH is recorded as hop-by-hop, as IPFilter does */
		if (!(p->flags & PF_FRAG))
			p->optbits |= v6x_bit(nh);
		p->flags |= PF_V6HDRS;
		if (pos + 8 > end || bpf_skb_load_bytes(skb, pos, e, 8) < 0) {
			p->flags |= PF_SHORT;
			p->proto = p->l4proto = nh;
			return 0;
		}
		if (nh == 44) {
			__u32 fo = (e[2] << 8) | e[3];

			len = 8;
			p->flags |= PF_FRAG;
			p->ipid = ((__u32)e[4] << 24) | ((__u32)e[5] << 16) | ((__u32)e[6] << 8) | e[7];
			fragoff = fo & 0xfff8;
			if ((fo & 1) && ((end - pos - 8) & 7))
				p->flags |= PF_BAD;
			if (fragoff + (end - pos - 8) > 65535)
				p->flags |= PF_BAD;
			nh = e[0];
			pos += len;
			if (fragoff) {
				p->flags |= PF_FRAGBODY;
				break;
			}
			continue;
		}
		/* IPFilter walks an IPv6 AH like any extension header: its
		 * length in 8-byte units, not AH's 4-byte ones */
		len = (e[1] + 1) * 8;
		if (nh == 51)
			p->flags |= PF_AH;
		if (nh == 43 && e[2] == 0 && ((e[1] / 2) < e[3] || (e[3] && (e[1] & 1))))
			p->flags |= PF_BAD;
		if (pos + len > end)
			p->flags |= PF_BAD;
		nh = e[0];
		pos += len;
	}
	p->proto = p->l4proto = nh;
	if (nh == 41 && !(p->flags & PF_FRAG))
		p->optbits |= V6X_IPV6;
	if (pos > end) {
		p->flags |= PF_BAD;
		return 0;
	}
	p->dlen = end - pos;
	p->l4off = pos;
	parse_l4(skb, p, pos, fragoff);
	return 0;
}

GLOBAL int sl_parse(struct __sk_buff *skb, __u32 l3off)
{
	struct work *w = get_work();

	if (!w)
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		parse_ipv4(skb, &w->p, l3off);
		return 4;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		parse_ipv6(skb, &w->p, l3off);
		return 6;
	}
	return 0;
}

/* ---------------------------------------------------------------- match */

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

static __always_inline int rule_match(const struct rule *r, const struct pktinfo *p, __u32 slot)
{
	__u32 m = r->match;

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
	if (m & M_EXPR)
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
	if (m & M_SRCPOOL) {
		if (pool_has(slot, r->src_pool, p, p->src) == !!(m & M_NOTSRC))
			return 0;
	}
	if (m & M_DSTPOOL) {
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
	if (m & M_ICMP) {
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

/* ----------------------------------------------------------------- scan */

int sl_state_create(__u32 slot, __u32 idx, __u32 pass, __u64 now, __u32 dca_on);

/* quick_state adds the state of a quick keep-state rule during the scan
 * (§2.3): it returns 0 when the entry cannot be added, and the scan then
 * restores the previous verdict and goes on with the next rule. Rules with
 * a keep limit are left to the creation after the scan, which counts the
 * connection as well. */
static __always_inline int quick_state(struct scan *s, struct pktinfo *p)
{
	__u32 pass = s->pass;

	if (!(pass & FR_KEEPSTATE) || (pass & FR_CMDMASK) == FR_AUTH || (pass & FR_KEEPLIMIT) ||
	    (p->flags & PF_STATE) || s->rule == 0)
		return 1;
	if (sl_state_create(s->slot, s->rule - 1, pass, s->now, 0) <= 0)
		return 0;
	p->flags |= PF_STATE;
	return 1;
}

/* call_group returns the list a srcgrpmap/dstgrpmap call names for the
 * packet's address, 0 when the address is not in the group-map or the
 * group is not in the set. */
static __always_inline __u32 call_group(const struct rule *r, const struct pktinfo *p, __u32 slot)
{
	struct pool_key k = {};
	struct pool_val *v;

	if (r->call == CALL_NONE)
		return 0;
	k.prefixlen = 96 + (p->family == 4 ? 32 : 128);
	k.slot = slot;
	k.table = r->call_table;
	k.family = p->family;
	__builtin_memcpy(k.addr, r->call == CALL_DSTGRPMAP ? p->dst : p->src, 16);
	v = bpf_map_lookup_elem(&pools, &k);
	return v ? v->group : 0;
}

/* scan_quick ends the scan at a quick rule; inside a called group only
 * that group's scan ends (the caller goes on with its result). */
static __always_inline long scan_quick(struct scan *s)
{
	if (s->ncall == 0)
		return 1;
	s->pos = s->end;
	return 0;
}

/* scan_apply is the part of ipf_scanlist that follows a match of rule pos
 * (slot-relative): the rule itself, or the result of a `call now`. */
static __always_inline long scan_apply(struct scan *s, struct pktinfo *p, const struct rule *r, __u32 pos)
{
	__u32 act = r->action, passo = s->pass;

	s->rule = pos + 1;
	if ((act & (FR_CMDMASK | FR_LOG)) == FR_LOG) {
		if (s->nlogs < MAX_LOGS) {
			s->logs[s->nlogs & (MAX_LOGS - 1)] = pos;
			s->nlogs++;
		}
	} else if ((act & FR_CMDMASK) == FR_SKIP) {
		s->skip = r->skip;
	} else {
		s->passo = passo;
		s->pass = act;
	}
	if (r->head) {
		struct list *l;
		__u32 lk = s->lbase + r->head;

		l = bpf_map_lookup_elem(&lists, &lk);
		if (l && l->count && s->depth < MAX_DEPTH) {
			__u32 d = s->depth & (MAX_DEPTH - 1);

			s->stack_pos[d] = s->pos;
			s->stack_end[d] = s->end;
			s->stack_passo[d] = passo;
			s->stack_call[d] = 0;
			s->depth++;
			s->pos = l->start;
			s->end = l->start + l->count;
			return 0;
		}
	}
	/* quick is the verdict's: a log or skip rule ends the scan when the
	 * pass it leaves is quick (a called group starts from the call rule's) */
	if (s->pass & FR_QUICK) {
		if (quick_state(s, p))
			return scan_quick(s);
		s->pass = passo;
	}
	return 0;
}

static long scan_step(__u32 i, void *ctx)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct scan *s;
	struct counter *c;
	struct rule *r;
	__u32 pos, key;

	if (!w)
		return 1;
	p = &w->p;
	s = &w->s;

	if (s->pos >= s->end) {
		__u32 d;

		if (s->depth == 0)
			return 1;
		s->depth--;
		d = s->depth & (MAX_DEPTH - 1);
		s->pos = s->stack_pos[d];
		s->end = s->stack_end[d];
		/* a skip counts within its own list (ipf_scanlist's local) */
		s->skip = 0;
		if (s->stack_call[d]) {
			/* end of a called group: its last matching rule, if
			 * any, stands for the call rule (ipf_scanlist) */
			__u32 gr = s->rule;

			s->ncall--;
			s->pass = s->stack_pass[d];
			s->rule = s->stack_rule[d];
			if (!gr)
				return 0;
			pos = (gr - 1) & (MAX_RULES - 1);
			key = s->base + pos;
			r = bpf_map_lookup_elem(&rules, &key);
			if (!r)
				return 1;
			c = bpf_map_lookup_elem(&counters, &key);
			if (c) {
				c->pkts++;
				c->bytes += p->plen;
			}
			return scan_apply(s, p, r, pos);
		}
		if (s->pass & FR_QUICK) {
			if (quick_state(s, p))
				return scan_quick(s);
			s->pass = s->stack_passo[d];
		}
		return 0;
	}
	pos = s->pos;
	if (pos >= MAX_RULES)
		return 1;
	if (s->use_index && s->skip == 0) {
		__u32 blk = pos >> BLOCK_SHIFT;

		__u64 rest = s->cand[(blk >> 6) & (BLOCK_WORDS - 1)] >> (blk & 63);

		if (!(rest & 1)) {
			__u32 next;

			if (rest == 0) /* nothing left in this word: skip 64 blocks */
				next = ((blk | 63) + 1) << BLOCK_SHIFT;
			else if (!(rest & 0xffff)) /* skip runs of empty blocks */
				next = (blk + 16) << BLOCK_SHIFT;
			else
				next = (blk + 1) << BLOCK_SHIFT;
			s->pos = next < s->end ? next : s->end;
			return 0;
		}
	}
	s->pos = pos + 1;
	if (s->skip) {
		s->skip--;
		return 0;
	}
	key = s->base + pos;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r)
		return 1;
	if (!rule_match(r, p, s->slot))
		return 0;

	c = bpf_map_lookup_elem(&counters, &key);
	if (r->action & FR_CALLNOW) {
		/* call now: scan the group the group-map names; no entry,
		 * no group or nothing matching there and the rule is passed
		 * over */
		__u32 g = call_group(r, p, s->slot);
		struct list *l;
		__u32 lk, d;

		if (c)
			c->pkts++;
		if (!g || s->depth >= MAX_DEPTH)
			return 0;
		lk = s->lbase + g;
		l = bpf_map_lookup_elem(&lists, &lk);
		if (!l || !l->count)
			return 0;
		d = s->depth & (MAX_DEPTH - 1);
		s->stack_pos[d] = s->pos;
		s->stack_end[d] = s->end;
		s->stack_passo[d] = s->passo;
		s->stack_pass[d] = s->pass;
		s->stack_rule[d] = s->rule;
		s->stack_call[d] = 1;
		s->depth++;
		s->ncall++;
		s->pass = r->action;
		s->rule = 0;
		s->pos = l->start;
		s->end = l->start + l->count;
		return 0;
	}
	if (c) {
		c->pkts++;
		c->bytes += p->plen;
	}
	return scan_apply(s, p, r, pos);
}

/* index_port looks a port up in a port dimension of the index: a packet
 * without ports has its own entry, a port no rule names the 0x20000 one. */
static __always_inline struct blocks *index_port(void *map, __u32 slot, struct pktinfo *p, __u16 port)
{
	struct port_key pk = {};
	struct blocks *b;

	pk.slot = slot;
	pk.port = (p->flags & PF_PORTS) ? port : 0x10000;
	b = bpf_map_lookup_elem(map, &pk);
	if (!b && (p->flags & PF_PORTS)) {
		pk.port = 0x20000;
		b = bpf_map_lookup_elem(map, &pk);
	}
	return b;
}

/* index_addr looks an address up in an address dimension of the index. */
static __always_inline struct blocks *index_addr(void *map, __u32 slot, struct pktinfo *p, const __u32 *addr)
{
	struct lpm_key lk = {};

	lk.prefixlen = 64 + (p->family == 4 ? 32 : 128);
	lk.slot = slot;
	lk.family = p->family;
	__builtin_memcpy(lk.addr, addr, 16);
	if (p->family == 4) {
		lk.addr[1] = lk.addr[2] = lk.addr[3] = 0;
	}
	return bpf_map_lookup_elem(map, &lk);
}

static __always_inline void load_index(struct scan *s, struct pktinfo *p, __u32 slot)
{
	struct blocks *a, *b, *c, *d;
	__u64 on;

	s->use_index = 0;
	on = cfg(CFG_INDEX0 + slot);
	if (!(on & IDX_ON))
		return;
	a = index_addr(&idx_dst, slot, p, p->dst);
	b = index_port(&idx_dport, slot, p, p->dport);
	if (!a || !b)
		return;
	/* a dimension the slot lacks selects everything: AND a again */
	c = a;
	d = b;
	if (on & IDX_SRC) {
		c = index_addr(&idx_src, slot, p, p->src);
		if (!c)
			return;
	}
	if (on & IDX_SPORT) {
		d = index_port(&idx_sport, slot, p, p->sport);
		if (!d)
			return;
	}
#pragma unroll
	for (int w = 0; w < BLOCK_WORDS; w++)
		s->cand[w] = a->w[w] & b->w[w] & c->w[w] & d->w[w];
	s->use_index = 1;
}

/* scan_list runs the scan over one list and returns the pass flags. */
static __always_inline __u32 scan_list(struct scan *s, __u32 slot, __u32 list, __u32 pass)
{
	struct list *l;
	__u32 lk = slot * MAX_LISTS + list;

	s->base = slot * MAX_RULES;
	s->lbase = slot * MAX_LISTS;
	s->slot = slot;
	s->pass = pass;
	s->rule = 0;
	s->depth = 0;
	s->ncall = 0;
	s->skip = 0;
	s->nlogs = 0;
	l = bpf_map_lookup_elem(&lists, &lk);
	if (!l || l->count == 0)
		return pass;
	s->pos = l->start;
	s->end = l->start + l->count;
	bpf_loop(4 * MAX_RULES, scan_step, NULL, 0);
	return s->pass;
}

GLOBAL int sl_scan(__u32 slot, __u32 list, __u32 pass)
{
	struct work *w = get_work();

	if (!w)
		return pass;
	return scan_list(&w->s, slot, list, pass);
}

/* sl_call runs the deferred call of rule idx after the scan (ipf_firewall):
 * it scans the group the group-map names and returns its last matching
 * rule + 1, 0 when there is none. */
GLOBAL int sl_call(__u32 slot, __u32 idx, __u32 pass)
{
	struct work *w = get_work();
	__u32 key = slot * MAX_RULES + (idx & (MAX_RULES - 1));
	struct rule *r;
	__u32 g;

	if (!w)
		return 0;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r)
		return 0;
	g = call_group(r, &w->p, slot);
	if (!g)
		return 0;
	scan_list(&w->s, slot, g, pass);
	return w->s.rule;
}

/* ---------------------------------------------------------------- log */

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
	rec->pass = pass;
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
	__u32 key = slot * MAX_RULES + idx;
	struct rule *r = bpf_map_lookup_elem(&rules, &key);

	if (r)
		return emit_log(skb, p, LOG_PACKET, pass, reason, r->rule_no, r->group_no, r->logtag);
	return emit_log(skb, p, LOG_PACKET, pass, reason, 0xffffffff, 0xffffffff, 0);
}

/* -------------------------------------------------------------- state */

static __always_inline void make_key(struct state_key *k, const struct pktinfo *p, int rev)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->proto = p->proto;
	k->family = p->family;
	if (!rev) {
		__builtin_memcpy(k->src, p->src, 16);
		__builtin_memcpy(k->dst, p->dst, 16);
		k->sport = p->sport;
		k->dport = p->dport;
	} else {
		__builtin_memcpy(k->src, p->dst, 16);
		__builtin_memcpy(k->dst, p->src, 16);
		k->sport = p->dport;
		k->dport = p->sport;
	}
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		k->sport = p->icmpid;
		k->dport = p->icmp >> 8;
	} else if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) {
		k->sport = k->dport = 0;
	}
}

/* query_of returns the query type an ICMP reply answers, or -1. */
static __always_inline int query_of(__u8 proto, __u8 type)
{
	if (proto == IPPROTO_ICMP) {
		switch (type) {
		case 0: return 8;
		case 14: return 13;
		case 16: return 15;
		case 18: return 17;
		}
		return -1;
	}
	switch (type) {
	case 129: return 128;
	case 131: return 130;
	case 134: return 133;
	case 136: return 135;
	case 140: return 139;
	}
	return -1;
}

static __always_inline __u64 tcp_timeout(__u8 st)
{
	return cfg(CFG_TO_TCP + ((st & 15) < 12 ? (st & 15) : 11));
}

static __always_inline void state_release(const struct state_key *k, struct state_entry *e)
{
	__u32 key = e->slot * MAX_RULES + (e->rule & (MAX_RULES - 1)), zero = 0;
	__u32 *n = bpf_map_lookup_elem(&rule_states, &key);
	__s64 *cnt = bpf_map_lookup_elem(&state_count, &zero);

	if (n && *n > 0)
		__sync_fetch_and_add(n, -1);
	if (cnt)
		__sync_fetch_and_add(cnt, -1);
	if (e->flags & SF_DCA) {
		struct dca_key dk = {};
		__u32 *v;

		dk.slot = e->slot;
		dk.rule = e->rule;
		if (!(e->pass & FR_LIMITCUMUL))
			__builtin_memcpy(dk.src, k->src, 16);
		v = bpf_map_lookup_elem(&dca, &dk);
		if (v && *v > 0)
			__sync_fetch_and_add(v, -1);
	}
}

/* tcp_fsm applies IPFilter's per-direction TCP state machine (§3.3) and
 * returns 0 when the packet must be rejected. */
static __always_inline int tcp_fsm(struct state_entry *e, int rev, const struct pktinfo *p, __u64 now)
{
	__u8 f = p->tcpflags;
	struct tcp_side *me = rev ? &e->tcp[1] : &e->tcp[0];
	struct tcp_side *other = rev ? &e->tcp[0] : &e->tcp[1];
	__u8 n = me->state, o = other->state;
	__u32 data = p->dlen > p->doff * 4 ? p->dlen - p->doff * 4 : 0;
	int syn_created = e->flags & SF_SYN;

	if (f & 0x04) { /* RST */
		me->state = (!(f & 0x08) && data == 0) ? TS_CLOSED : TS_CLOSE_WAIT;
		if (o <= TS_ESTABLISHED)
			other->state = TS_CLOSE_WAIT;
		e->expire = now + tcp_timeout(me->state);
		return 1;
	}
#define TO(x) do { me->state = (x); e->expire = now + tcp_timeout(x); return 1; } while (0)
#define RESTART() do { e->expire = now + tcp_timeout(me->state); return 1; } while (0)
	switch (n) {
	case TS_LISTEN:
		if ((f & 0x12) == 0x12)
			TO(TS_SYN_RECEIVED);
		if (f & 0x02)
			TO(TS_SYN_SENT);
		if (!syn_created && (f & 0x17) == 0x10) {
			if (o == TS_LISTEN || o == TS_SYN_RECEIVED)
				TO(TS_HALF_ESTAB);
			if (o == TS_HALF_ESTAB || o == TS_ESTABLISHED)
				TO(TS_ESTABLISHED);
		}
		return 0;
	case TS_SYN_SENT:
		if ((f & 0x3f) == 0x02)
			return 1;
		if ((f & 0x13) == 0x10)
			TO(TS_ESTABLISHED);
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		if ((f & 0x12) == 0x12)
			TO(TS_SYN_RECEIVED);
		return 0;
	case TS_SYN_RECEIVED:
		if ((f & 0x13) == 0x10)
			TO(TS_ESTABLISHED);
		if ((f & 0x3f) == 0x12)
			return 1;
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		return 0;
	case TS_HALF_ESTAB:
		if (f & 0x01)
			TO(TS_FIN_WAIT_1);
		if (f & 0x10) {
			if (o == TS_HALF_ESTAB || o == TS_ESTABLISHED)
				TO(TS_ESTABLISHED);
			RESTART();
		}
		return 0;
	case TS_ESTABLISHED:
		if (f & 0x01)
			TO(o == TS_FIN_WAIT_1 ? TS_CLOSING : TS_FIN_WAIT_1);
		if ((f & 0x10) && o == TS_FIN_WAIT_1)
			TO(TS_CLOSE_WAIT);
		if ((f & 0x10) && o < TS_CLOSE_WAIT)
			TO(TS_ESTABLISHED);
		RESTART();
	case TS_CLOSE_WAIT:
		if (f & 0x01)
			TO(TS_LAST_ACK);
		TO(TS_CLOSE_WAIT);
	case TS_FIN_WAIT_1:
		if ((f & 0x10) && o > TS_CLOSE_WAIT)
			TO(TS_LAST_ACK);
		TO(TS_FIN_WAIT_1);
	case TS_CLOSING:
		if ((f & 0x11) == 0x10)
			TO(TS_TIME_WAIT);
		RESTART();
	case TS_LAST_ACK:
		if (f & 0x10)
			RESTART();
		return 0;
	case TS_FIN_WAIT_2:
		return 0;
	case TS_TIME_WAIT:
		if (o == TS_LAST_ACK)
			TO(TS_CLOSED);
		return 1;
	case TS_CLOSED:
		return 1;
	}
#undef TO
#undef RESTART
	return 0;
}

static __always_inline int seq_ge(__u32 a, __u32 b) { return (__s32)(a - b) >= 0; }
static __always_inline int seq_gt(__u32 a, __u32 b) { return (__s32)(a - b) > 0; }

/* tcp_window implements §3.4; returns 0 when the packet is out of window. */
static __always_inline int tcp_window(struct state_entry *e, int rev, const struct pktinfo *p)
{
	struct tcp_side *fs = rev ? &e->tcp[1] : &e->tcp[0];
	struct tcp_side *ts = rev ? &e->tcp[0] : &e->tcp[1];
	__u8 f = p->tcpflags;
	__u32 data = p->dlen > p->doff * 4 ? p->dlen - p->doff * 4 : 0;
	__u32 len = data + ((f & 0x02) ? 1 : 0) + ((f & 0x01) ? 1 : 0);
	__u32 win, end, seq = p->seq, ack = p->ack, maxwin;
	__s32 ackskew;
	int syn_created = e->flags & SF_SYN, inwin = 0;

	if (e->pass & FR_STLOOSE)
		return 1;
	if (f & 0x02) {
		win = p->win;
		if (p->wscale != 0xff) {
			fs->wscale = p->wscale;
			fs->wflags |= WF_WSCALE_SEEN;
		}
		if (p->sackok)
			fs->wflags |= WF_SACK;
	} else {
		win = (__u32)p->win << (fs->wscale & 15);
	}
	if (win == 0)
		win = 1;
	end = seq + len;
	if (!(f & 0x02) && (fs->wflags & WF_WSCALE_FIRST)) {
		fs->wflags &= ~WF_WSCALE_FIRST;
		fs->maxwin = win;
	}
	if (fs->end == 0 && (!syn_created || (f & 0x12) == 0x12)) {
		fs->end = end - 1;
		fs->maxwin = 1;
		fs->maxend = end + win;
	}
	if (!(f & 0x10) || ((f & 0x14) && ack == 0))
		ack = ts->end;
	maxwin = ts->maxwin;
	ackskew = (__s32)(ts->end - ack);
	if ((e->pass & FR_STSTRICT) && seq != fs->end)
		return 0;
	if (seq_ge(fs->maxend, end) && seq_ge(seq, fs->end - maxwin) &&
	    -ackskew <= 66000 && ackskew <= (66000 << (fs->wscale & 15)))
		inwin = 1;
	else if (seq == fs->maxend && ackskew == 0 && (fs->wflags & WF_SACK) && (ts->wflags & WF_SACK))
		inwin = 1;
	else if (seq == 0 && (f & 0x3f) == 0x14 && ackskew >= -1 && ackskew <= 1)
		inwin = 1;
	else if (!syn_created && !(fs->wflags & (WF_WSCALE_SEEN | WF_WSCALE_FIRST)) &&
		 ((seq == fs->maxend && ackskew == 0) || seq_ge(seq + maxwin, fs->end - maxwin)))
		inwin = 1;
	if (!inwin)
		return 0;
	if (ackskew < 0)
		ts->end = ack;
	if (win > fs->maxwin)
		fs->maxwin = win;
	if (seq_gt(end, fs->end))
		fs->end = end;
	if (seq_ge(ack + win, ts->maxend))
		ts->maxend = ack + win;
	return 1;
}

static __always_inline void tcp_init(struct state_entry *e, const struct pktinfo *p)
{
	__u8 f = p->tcpflags;
	__u32 data = p->dlen > p->doff * 4 ? p->dlen - p->doff * 4 : 0;
	__u32 len = data + ((f & 0x02) ? 1 : 0) + ((f & 0x01) ? 1 : 0);
	__u32 win = p->win;

	if (win == 0)
		win = 1;
	e->tcp[0].end = e->tcp[0].maxend = p->seq + len;
	e->tcp[0].maxwin = win;
	e->tcp[1].maxwin = 1;
	if (p->wscale != 0xff) {
		e->tcp[0].wscale = p->wscale;
		e->tcp[0].wflags |= WF_WSCALE_SEEN | WF_WSCALE_FIRST;
	}
	if (p->sackok)
		e->tcp[0].wflags |= WF_SACK;
	if (!(f & 0x02)) {
		e->tcp[1].end = e->tcp[1].maxend = p->ack;
		e->tcp[1].maxwin = 4 * win;
	}
}

static __always_inline void state_delete(struct state_key *k, struct state_entry *e)
{
	state_release(k, e);
	bpf_map_delete_elem(&states, k);
}

/* state_opt is the option set state compares: the IPv6 fragment header is
 * ignored, so fragments and whole packets belong to one flow. */
static __always_inline __u32 state_opt(const struct pktinfo *p)
{
	return p->family == 6 ? p->optbits & ~V6X_FRAG : p->optbits;
}

/* wild_dst reports a packet whose state entry gets a wildcard destination
 * (§3.1): multicast or broadcast IPv4, ICMPv6 to a multicast address. */
static __always_inline int wild_dst(const struct pktinfo *p)
{
	if (p->family == 4)
		return !!(p->flags & (PF_MCAST | PF_BCAST | PF_MBCAST));
	return p->proto == IPPROTO_ICMPV6 && (p->dst[0] & 0xff) == 0xff;
}

/* reverse_key makes the key a reply of p would find its entry under;
 * returns 0 when p cannot be a reply (an ICMP type that answers nothing). */
static __always_inline int reverse_key(struct state_key *k, const struct pktinfo *p)
{
	make_key(k, p, 1);
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		int q = query_of(p->proto, p->icmp >> 8);

		if (q < 0)
			return 0;
		k->dport = q;
	}
	return 1;
}

/* state_lookup finds the entry for p (forward, then reverse, then the
 * wildcard-destination entries both ways) and applies the TCP checks; it
 * returns the entry or NULL. A wildcard entry that matches is filled in
 * with the packet's address and moved to its concrete key; the returned
 * pointer is then the copy in scratch. */
static __always_inline struct state_entry *state_lookup(struct pktinfo *p, int *revp, __u64 now,
							struct state_entry *scratch)
{
	struct state_key k;
	struct state_entry *e;
	int rev = 0, slot, wild = 0;

	make_key(&k, p, 0);
	e = bpf_map_lookup_elem(&states, &k);
	if (!e) {
		rev = 1;
		if (reverse_key(&k, p))
			e = bpf_map_lookup_elem(&states, &k);
	}
	if (!e) {
		wild = 1;
		rev = 0;
		make_key(&k, p, 0);
		__builtin_memset(k.dst, 0, sizeof(k.dst));
		k.wild = 1;
		e = bpf_map_lookup_elem(&states, &k);
		if (!e) {
			rev = 1;
			if (!reverse_key(&k, p))
				return NULL;
			__builtin_memset(k.dst, 0, sizeof(k.dst));
			k.wild = 1;
			e = bpf_map_lookup_elem(&states, &k);
		}
		if (!e)
			return NULL;
	}
	if (e->expire < now) {
		stat_inc(ST_EXPIRED);
		state_delete(&k, e);
		return NULL;
	}
	slot = rev * 2 + p->out;
	slot &= 3;
	if (e->ifindex[slot] && e->ifindex[slot] != p->ifindex)
		return NULL;
	{
		/* flags must agree with what the first packet of this slot
		 * carried, the security class with the creating packet's; the
		 * creating direction repeats the options its rule tested (the
		 * rule's mask, looked up only for such rules), replies are not
		 * compared (ipf_matchsrcdst) */
		__u32 fi = (p->out * 2 + rev) & 3, flx = p->flags & PF_CMP;

		if (e->flx[fi] && e->flx[fi] != flx)
			return NULL;
		if (p->secclass != e->secclass)
			return NULL;
		if (!rev && (e->flags & SF_OPTMASK)) {
			__u32 rk = e->slot * MAX_RULES + (e->rule & (MAX_RULES - 1));
			struct rule *cr = bpf_map_lookup_elem(&rules, &rk);

			if (!cr || (state_opt(p) & cr->opt_mask) != e->opt)
				return NULL;
		}
		if (!e->flx[fi])
			e->flx[fi] = flx;
	}
	if (p->proto == IPPROTO_TCP) {
		/* a new SYN on a flow closed on both sides starts afresh */
		if ((p->tcpflags & 0x12) == 0x02 && e->tcp[0].state > TS_ESTABLISHED &&
		    e->tcp[1].state > TS_ESTABLISHED) {
			stat_inc(ST_CLOSED);
			state_delete(&k, e);
			return NULL;
		}
		if (!tcp_window(e, rev, p)) {
			p->flags |= PF_OOW;
			stat_inc(ST_OOW);
			return NULL;
		}
		if (!tcp_fsm(e, rev, p, now))
			return NULL;
	} else {
		__u64 to;
		__u32 age = e->age[rev & 1];

		if (p->proto == IPPROTO_UDP)
			to = cfg(rev ? CFG_TO_UDPACK : CFG_TO_UDP);
		else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6)
			to = cfg(rev ? CFG_TO_ICMPACK : CFG_TO_ICMP);
		else
			to = cfg(rev ? CFG_TO_UDPACK : CFG_TO_UDP);
		if (age)
			to = (__u64)age * 1000000000ULL;
		e->expire = now + to;
	}
	if (!e->ifindex[slot])
		e->ifindex[slot] = p->ifindex;
	e->last = now;
	e->pkts[slot]++;
	e->bytes[slot] += p->plen;
	*revp = rev;
	if (wild) {
		/* the first packet to use a wildcard entry fills it in */
		__builtin_memcpy(scratch, e, sizeof(*scratch));
		bpf_map_delete_elem(&states, &k);
		k.wild = 0;
		__builtin_memcpy(k.dst, rev ? p->src : p->dst, 16);
		if (bpf_map_update_elem(&states, &k, scratch, BPF_NOEXIST) < 0)
			state_release(&k, scratch); /* a concrete entry exists: keep that */
		return scratch;
	}
	return e;
}

/* state_create adds an entry for p created by rule idx; returns 0 on
 * failure (the caller turns pass into block). */
static __always_inline int state_create(struct pktinfo *p, __u32 slot, __u32 idx,
					const struct rule *r, __u32 pass, __u64 now, int dca_on,
					struct state_entry *ep)
{
	struct dca_key dk = {};
	__u32 *dv = NULL;
	struct state_key k;
	__u32 key = slot * MAX_RULES + idx, zero = 0;
	__u32 *n;
	__s64 *cnt;
	__u64 smax = cfg(CFG_STATEMAX);

	if (p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD | PF_STATE))
		return 0;
	if ((p->flags & PF_OOW) && !(p->tcpflags & 0x02))
		return 0;
	if (p->proto == IPPROTO_TCP && (p->tcpflags & 0x04))
		return 0;
	if (p->proto == IPPROTO_ICMP) {
		__u8 t = p->icmp >> 8;

		if (t != 8 && t != 13 && t != 15 && t != 17)
			return 0;
	}
	if (p->proto == IPPROTO_ICMPV6) {
		__u8 t = p->icmp >> 8;

		if (t != 128 && t != 130 && t != 133 && t != 135 && t != 139)
			return 0;
	}
	n = bpf_map_lookup_elem(&rule_states, &key);
	cnt = bpf_map_lookup_elem(&state_count, &zero);
	if (!n || !cnt)
		return 0;
	if (r->state_limit) {
		if (*n >= r->state_limit) {
			stat_inc(ST_MAXREF);
			return 0;
		}
	} else if (smax && *cnt >= (__s64)smax) {
		stat_inc(ST_MAXREF);
		return 0;
	}
	__builtin_memset(ep, 0, sizeof(*ep));
	if (dca_on) {
		/* HP "keep limit N [cumulative]": connections per source
		 * (or per rule), released when the entry goes away */
		dk.slot = slot;
		dk.rule = idx;
		if (!(pass & FR_LIMITCUMUL))
			__builtin_memcpy(dk.src, p->src, 16);
		dv = bpf_map_lookup_elem(&dca, &dk);
		if (dv && *dv >= r->keep_limit)
			return -2;
		ep->flags |= SF_DCA;
	}
	make_key(&k, p, 0);
	if (wild_dst(p)) {
		__builtin_memset(k.dst, 0, sizeof(k.dst));
		k.wild = 1;
	}
	ep->created = now;
	ep->last = now;
	ep->pass = pass;
	ep->rule = idx;
	ep->slot = slot;
	ep->age[0] = r->age_fwd;
	ep->age[1] = r->age_rev;
	ep->logtag = r->logtag;
	ep->rule_no = r->rule_no;
	ep->group_no = r->group_no;
	ep->ifindex[p->out & 1] = p->ifindex;
	ep->flx[(p->out & 1) * 2] = p->flags & PF_CMP;
	if (r->match & M_OPT) {
		ep->flags |= SF_OPTMASK;
		ep->opt = state_opt(p) & r->opt_mask;
	}
	ep->secclass = p->secclass;
	ep->pkts[p->out & 1] = 1;
	ep->bytes[p->out & 1] = p->plen;
	if (p->proto == IPPROTO_TCP) {
		if (p->tcpflags & 0x02)
			ep->flags |= SF_SYN;
		tcp_init(ep, p);
		/* IPFilter keeps the entry even when the first packet is not a
		 * transition of the state machine; it then ages as LISTEN */
		if (!tcp_fsm(ep, 0, p, now))
			ep->expire = now + tcp_timeout(ep->tcp[0].state);
		stat_inc(ST_ADD_TCP);
	} else {
		__u64 to;

		if (p->proto == IPPROTO_UDP) {
			to = cfg(CFG_TO_UDP);
			stat_inc(ST_ADD_UDP);
		} else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
			to = cfg(CFG_TO_ICMP);
			stat_inc(ST_ADD_ICMP);
		} else {
			to = cfg(CFG_TO_IP);
			stat_inc(ST_ADD_OTHER);
		}
		if (r->age_fwd)
			to = (__u64)r->age_fwd * 1000000000ULL;
		ep->expire = now + to;
	}
	if (bpf_map_update_elem(&states, &k, ep, BPF_NOEXIST) < 0) {
		/* IPFilter refuses only an identical entry (ipf_state_match:
		 * flags, options, class and pass): an entry the packet could
		 * not match is followed by a new one, which its lookups find
		 * first. The map keeps one per key, so the new one replaces it. */
		struct state_entry *old = bpf_map_lookup_elem(&states, &k);

		if (!old || (old->pass == ep->pass && old->opt == ep->opt && old->secclass == ep->secclass &&
			     old->flx[0] == ep->flx[0] && old->flx[1] == ep->flx[1] &&
			     old->flx[2] == ep->flx[2] && old->flx[3] == ep->flx[3]))
			return 0;
		state_release(&k, old);
		if (bpf_map_update_elem(&states, &k, ep, BPF_ANY) < 0)
			return 0;
	}
	__sync_fetch_and_add(n, 1);
	__sync_fetch_and_add(cnt, 1);
	if (dca_on) {
		if (dv) {
			__sync_fetch_and_add(dv, 1);
		} else {
			__u32 one = 1;

			if (bpf_map_update_elem(&dca, &dk, &one, BPF_NOEXIST) < 0) {
				dv = bpf_map_lookup_elem(&dca, &dk);
				if (dv)
					__sync_fetch_and_add(dv, 1);
			}
		}
	}
	return 1;
}

/* ------------------------------------------------------------ replies */

static __always_inline __u16 csum_fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

static __always_inline __u64 csum_add(__u64 s, const void *b, __u32 n)
{
	const __u16 *w = b;

#pragma unroll
	for (__u32 i = 0; i < 40; i++) {
		if (i * 2 >= n)
			break;
		s += w[i];
	}
	return s;
}

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

GLOBAL int sl_state_lookup(__u64 now)
{
	struct work *w = get_work();
	struct state_entry *e;
	int rev = 0;

	if (!w)
		return 0;
	e = state_lookup(&w->p, &rev, now, &w->e);
	if (!e)
		return 0;
	w->hit_rev = rev;
	w->hit_slot = e->slot;
	w->hit_idx = e->rule;
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	return 1;
}

/* sl_icmperr_lookup matches an ICMP error against the state of the packet
 * it quotes (§3.6): the quoted header is the flow's own packet, so its
 * tuple is looked up as is and reversed. Counters and TCP state are left
 * alone; entries with no-icmp-err refuse. */
GLOBAL int sl_icmperr_lookup(struct __sk_buff *skb, __u64 now)
{
	struct work *w = get_work();
	struct pktinfo *p;
	struct state_key k = {};
	struct state_entry *e;
	__u8 h[40];
	__u8 l4[8];
	__u32 off, l4off;

	if (!w)
		return 0;
	p = &w->p;
	off = p->l4off + 8;
	if (p->family == 4) {
		__u32 hl;

		if (p->plen < 48 || bpf_skb_load_bytes(skb, off, h, 20) < 0)
			return 0;
		hl = (h[0] & 0xf) * 4;
		if (hl < 20 || (((h[6] << 8) | h[7]) & 0x1fff))
			return 0; /* quoted header of a non-first fragment: bad */
		k.family = 4;
		k.proto = h[9];
		__builtin_memcpy(&k.src[0], &h[12], 4);
		__builtin_memcpy(&k.dst[0], &h[16], 4);
		l4off = off + hl;
		/* the quoted source must be the error's destination */
		if (k.src[0] != p->dst[0])
			return 0;
	} else {
		if (bpf_skb_load_bytes(skb, off, h, 40) < 0)
			return 0;
		k.family = 6;
		k.proto = h[6];
		__builtin_memcpy(k.src, &h[8], 16);
		__builtin_memcpy(k.dst, &h[24], 16);
		l4off = off + 40;
	}
	if (bpf_skb_load_bytes(skb, l4off, l4, 8) < 0)
		return 0;
	if (k.proto == IPPROTO_TCP || k.proto == IPPROTO_UDP) {
		k.sport = (l4[0] << 8) | l4[1];
		k.dport = (l4[2] << 8) | l4[3];
	} else if (k.proto == IPPROTO_ICMP || k.proto == IPPROTO_ICMPV6) {
		k.sport = (l4[4] << 8) | l4[5];
		k.dport = l4[0];
	} else {
		return 0;
	}
	e = bpf_map_lookup_elem(&states, &k);
	if (!e) {
		struct state_key r = {};

		__builtin_memcpy(r.src, k.dst, 16);
		__builtin_memcpy(r.dst, k.src, 16);
		r.sport = k.dport;
		r.dport = k.sport;
		r.proto = k.proto;
		r.family = k.family;
		if (k.proto == IPPROTO_ICMP || k.proto == IPPROTO_ICMPV6) {
			r.sport = k.sport;
			r.dport = k.dport;
		}
		e = bpf_map_lookup_elem(&states, &r);
	}
	if (!e || e->expire < now || (e->pass & FR_NOICMPERR))
		return 0;
	w->hit_pass = e->pass;
	w->hit_rule_no = e->rule_no;
	w->hit_group_no = e->group_no;
	w->hit_logtag = e->logtag;
	return 1;
}

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

GLOBAL int sl_state_create(__u32 slot, __u32 idx, __u32 pass, __u64 now, __u32 dca_on)
{
	struct work *w = get_work();
	__u32 key = slot * MAX_RULES + (idx & (MAX_RULES - 1));
	struct rule *r;

	if (!w || slot >= NSLOTS)
		return 0;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r)
		return 0;
	return state_create(&w->p, slot, idx & (MAX_RULES - 1), r, pass, now, dca_on, &w->e);
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
	return log_rule(skb, &w->p, slot, idx & (MAX_RULES - 1), pass, reason);
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

/* ------------------------------------------------------------- routing */

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

/* sl_route carries out a passing packet's dup-to, to and fastroute
 * (§2.2 step 10): dup-to sends a copy out of its interface, to sends the
 * packet itself (the kernel's neighbour table fills in the link layer),
 * fastroute (inbound) forwards along the routing table without touching
 * the TTL. Returns a TC action, or -1 to let the packet go on as usual. */
GLOBAL int sl_route(struct __sk_buff *skb, __u32 slot, __u32 idx)
{
	struct work *w = get_work();
	__u32 key = slot * MAX_RULES + (idx & (MAX_RULES - 1));
	struct rule *r;
	struct pktinfo *p;

	if (!w || slot >= NSLOTS)
		return -1;
	p = &w->p;
	r = bpf_map_lookup_elem(&rules, &key);
	if (!r || !r->route)
		return -1;
	/* a packet routed from an outbound hook has been filtered as
	 * outbound already: the mark lets it through the egress hook of the
	 * interface it now leaves by (IPFilter checks only inbound packets
	 * again on their new way out) */
	if (r->route & RT_DUP) {
		__u32 mark = skb->mark;
		long rc;

		if (p->out)
			skb->mark = REPLY_MARK;
		rc = bpf_clone_redirect(skb, r->dup_ifindex, 0);
		skb->mark = mark;
		if (rc == 0)
			stat_inc(ST_DUPPED);
		else
			stat_inc(ST_ROUTEFAIL);
	}
	if (r->route & RT_TO) {
		long ret = redirect_nh(r->to_ifindex, r->to_nh_fam, r->to_nh);

		if (ret == TC_ACT_REDIRECT && p->out)
			skb->mark = REPLY_MARK;

		if (ret == TC_ACT_REDIRECT) {
			stat_inc(ST_ROUTED);
			return TC_ACT_REDIRECT;
		}
		stat_inc(ST_ROUTEFAIL);
		return -1;
	}
	if ((r->route & RT_FAST) && !p->out) {
		struct bpf_fib_lookup fib = {};
		long rc;

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
			stat_inc(ST_ROUTED);
			return TC_ACT_REDIRECT;
		}
		stat_inc(ST_ROUTEFAIL);
	}
	return -1;
}

/* --------------------------------------------------------------- main */

static __always_inline int verdict_of(__u32 pass)
{
	__u32 cmd = pass & FR_CMDMASK;

	/* a matched `nomatch` rule has no pass bit: IPFilter drops the
	 * packet (ipftest's bad-packet) */
	return cmd == FR_BLOCK || cmd == FR_AUTH || cmd == FR_PREAUTH || cmd == FR_NOMATCHCMD;
}

static __always_inline int filter(struct __sk_buff *skb, __u8 out)
{
	struct work *w = get_work();
	struct pktinfo *p;
	__u32 slot, *l2, pass, reason = RSN_NONE, d = out, logpass = 0, mrule = 0, nlogs, l3off;
	__u64 now;
	int blocked, fam, hit = 0;

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

	if ((p->flags & PF_FRAG) && !(p->flags & (PF_SHORT | PF_BAD)) && sl_frag_lookup(now)) {
		hit = 2;
		if (w->hit_pass & FR_KEEPSTATE)
			p->flags |= PF_STATE;
		w->hit_pass &= ~(FR_KEEPSTATE | FR_KEEPFRAG);
	} else if (!(p->flags & (PF_SHORT | PF_FRAGBODY | PF_BAD))) {
		hit = sl_state_lookup(now);
		if (!hit && (p->flags & PF_ICMPERR))
			hit = sl_icmperr_lookup(skb, now);
	}
	if (hit) {
		pass = w->hit_pass;
		if (pass & FR_LOGFIRST)
			pass &= ~FR_LOG;
		p->flags |= PF_STATE;
		stat_inc(ST_HITS);
		stat_inc(d * ST_DIR + ST_STKEPT);
	} else {
		stat_inc(ST_MISSES);
		load_index(&w->s, p, slot);
		w->s.now = now;
		pass = sl_scan(slot, out ? LIST_OUT : LIST_IN, cfg(CFG_DEFPASS));
		mrule = w->s.rule;
		nlogs = w->s.nlogs;
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
		if (r && ((pass & FR_CMDMASK) == FR_PASS || (pass & FR_CMDMASK) == FR_BLOCK)) {
			int dca_on = (pass & FR_CMDMASK) == FR_PASS && (pass & FR_KEEPLIMIT) && r->keep_limit && p->proto == IPPROTO_TCP &&
				     (p->tcpflags & 0x12) == 0x02;

			if (((pass & FR_KEEPSTATE) && !(p->flags & PF_STATE)) || dca_on) {
				int rc = sl_state_create(slot, idx, pass, now, dca_on);

				if (rc == -2) {
					pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
					reason = RSN_DCA;
					stat_inc(ST_DCA);
				} else if (rc == 0 && (pass & FR_KEEPSTATE) && (pass & FR_CMDMASK) == FR_PASS) {
					pass = (pass & ~FR_CMDMASK) | FR_BLOCK;
					reason = RSN_STATEADD;
					stat_inc(d * ST_DIR + ST_STLOST);
				}
			}
		}
	}

	blocked = verdict_of(pass);
	if (blocked && reason == RSN_NONE)
		reason = RSN_FILTER;
	if ((p->flags & PF_FRAG) && !blocked && hit != 2 &&
	    ((pass & (FR_KEEPFRAG | FR_KEEPSTATE)) || hit)) {
		__u32 rno = hit ? w->hit_rule_no : 0xffffffff, gno = hit ? w->hit_group_no : 0xffffffff;

		if (!hit && mrule) {
			__u32 key = slot * MAX_RULES + ((mrule - 1) & (MAX_RULES - 1));
			struct rule *r = bpf_map_lookup_elem(&rules, &key);

			if (r) {
				rno = r->rule_no;
				gno = r->group_no;
			}
		}
		sl_frag_add(pass | (hit ? FR_KEEPSTATE : 0), rno, gno, now);
	}

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

		if ((pass & FR_RETRST) && p->proto == IPPROTO_TCP &&
		    !(p->flags & (PF_SHORT | PF_OOW)) && !(p->tcpflags & 0x04)) {
			ret = sl_reply(skb, 1, 0, 0);
		} else if ((pass & FR_RETICMP) && !(p->flags & PF_FRAGBODY)) {
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
