// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Sluice NAT datapath: IPFilter's ipnat (ip_nat.c as the Go reference
 * engine internal/nat implements it) on TCX hooks. The ingress program
 * runs before the filter, the egress one after it, as IPFilter orders NAT
 * and filtering.
 *
 * Fast path: parse with direct packet access, look the packet's 5-tuple up
 * in the session table, rewrite addresses and ports with checksum
 * differences computed when the session was made. Everything else (new
 * sessions, ICMP errors, fragments, the ftp proxy, MSS clamping) is in
 * global functions verified on their own, working on a per-CPU scratch
 * area. Sessions end by themselves: the forward entry of each session
 * holds a bpf_timer that fires at the end of the session's lifetime
 * (IPFilter's timeouts) and deletes it; a session whose timer the kernel
 * would not allocate is found by the sweeper, one timer armed at load,
 * which gives it one later or ends it; no daemon is involved.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "nat.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Benchmarks and tests stop the fast path after a stage, or turn it off:
 * bench_at(n) tells whether to stop at stage n. In use the register it
 * reads gets STAGE_MAGIC, which is no stage, and the verifier, which
 * sees the constant, removes the test; the mov stays (no memory is read,
 * as a .rodata variable would be). The loader rewrites these immediates
 * to STAGE_MAGIC + n when asked (datapath_linux.go, Options.stage). */
#define STAGE_MAGIC 0x57a9e000
#define STR_(x) #x
#define STR(x) STR_(x)
static __always_inline int bench_at(__u32 n)
{
	__u64 v;

	asm volatile("%0 = " STR(STAGE_MAGIC) : "=r"(v));
	return v == STAGE_MAGIC + n;
}
#define ST_ENTRY 1  /* nothing done */
#define ST_PARSE 2  /* headers read, key made */
#define ST_LOOKUP 3 /* the fast entry looked up */
#define ST_REWRITE 4 /* the packet rewritten, nothing accounted */
#define ST_NOSHORT 8 /* no miss shortcut (fast_miss): benchmarks of it */
#define ST_OFF 9    /* no fast path: every packet goes the whole way (tests) */
/* A new session taken apart (BenchmarkNewSessionSteps): */
#define ST_NOINSERT 10 /* allocated and checked, not entered (the packet fails) */
#define ST_NOTWIN 11   /* no fast twins */
#define ST_NOARM 12    /* no timer */
#define ST_NODM 13     /* the fast path reads no fast4dm slot: fast4 only (benchmarks) */

/* k_nspj is the length of a jiffy in ns in a plain program: one the
 * loader made for a datapath whose hot line holds nothing the fast path
 * needs (no clock offset, no double-translation cookie, no device
 * without a link-layer header: Datapath.plainIfCan), with this immediate
 * rewritten to nat_hot.nspj. Such a fast path reaches no hot line: on
 * this VM each page a packet reaches first costs it 10-40 ns
 * (docs/datapath-cost.md, "NAT, session 9"). A program as built keeps
 * NSPJ_MAGIC and reads the hot line (general). */
#define NSPJ_MAGIC 0x57a9d000
static __always_inline __u64 k_nspj(void)
{
	__u64 v;

	asm volatile("%0 = " STR(NSPJ_MAGIC) : "=r"(v));
	return v;
}

/* probe tells whether the program is a probe (LoadProbe: stopped at
 * ST_ENTRY..ST_LOOKUP), which must translate nothing: it leaves IPv6 and
 * every packet its IPv4 fast path leaves alone. */
static __always_inline int probe(void)
{
	return bench_at(ST_ENTRY) || bench_at(ST_PARSE) || bench_at(ST_LOOKUP);
}

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif
#define CLOCK_MONOTONIC 1
#define TICK_NS 500000000ULL /* IPFilter's tick: 0.5 s */

#define GLOBAL __attribute__((noinline))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define BOUND(x, m) ({ __u64 _v = (x); asm volatile("" : "+r"(_v)); _v & (m); })

/* ------------------------------------------------------------------ maps */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAT_NSLOTS * NAT_MAX_RULES);
	__type(key, __u32);
	__type(value, struct nat_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAT_NSLOTS * NAT_MAX_RULES);
	__type(key, __u32);
	__type(value, struct nat_rstate);
} rstates SEC(".maps");

/* Rule hit counts (ipnat -lh). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NAT_NSLOTS * NAT_MAX_RULES);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

/* Match order per slot and direction: key slot*2 + dir. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAT_NSLOTS * 2);
	__type(key, __u32);
	__type(value, struct nat_order);
} orders SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAT_NSLOTS * NAT_MAX_RULES);
	__type(key, __u32);
	__type(value, struct nat_text);
} texts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NCFG_N);
	__type(key, __u32);
	__type(value, __u64);
} config SEC(".maps");

/* The sweeper's timer and counters (struct nat_sweeper). A map of its own
 * rather than more config keys: a pinned config map of another size
 * could not be reused. Pinned like the others, so its timer runs while
 * the datapath is (a map's timers stop with its last user reference). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nat_sweeper);
} sweeper SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NS_N);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* The session tables (sessions, fast4, fast6) are preallocated: an
 * entry allocated as it is made (BPF_F_NO_PREALLOC) comes from the BPF
 * allocator's per-CPU caches, which a burst of new sessions empties, and
 * their refill (a batch of charged kmallocs, in an irq_work that runs in
 * the middle of the program) was half of a new session's cost under
 * TCP_CRR (docs/datapath-cost.md). The price is the tables' full size at
 * load: about 86 MB at NAT_SESS_ENTRIES (docs/kernel-memory.md). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAT_SESS_ENTRIES);
	__type(key, struct nat_key);
	__type(value, struct nat_sess);
} sessions SEC(".maps");

/* The IPv4 fast path: the hot part of each IPv4 TCP/UDP entry that needs
 * nothing but a rewrite (no proxy, not a wildcard or a proxy's data
 * connection), under a 16-byte key. The entry in sessions stays the
 * session's record; this is its twin, made and removed with it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAT_SESS_ENTRIES);
	__type(key, struct nat_fkey);
	__type(value, struct nat_fast4);
} fast4 SEC(".maps");

/* The slots of fast4's entries (struct nat_slot): allocated whole at load,
 * NAT_DM_SLOTS of 80 bytes (10.5 MB). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAT_DM_SLOTS);
	__type(key, __u32);
	__type(value, struct nat_slot);
} fast4dm SEC(".maps");

/* The IPv6 fast path: the twins of IPv6 TCP/UDP entries, under their
 * nat_key. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAT_SESS_ENTRIES);
	__type(key, struct nat_key);
	__type(value, struct nat_fast6);
} fast6 SEC(".maps");

/* First fragments' sessions: the entry key later fragments follow, and
 * where the first fragment's data ends (a fragment starting before it
 * overlaps the first and follows no session, as in IPFilter's cache). */
struct nat_frag {
	struct nat_key k;
	__u32 end;
	__u32 pad;
	/* the session the entry goes with: the key of one of its entries,
	 * that entry's peer, and its seq. The engine forgets a session's
	 * entries when it ends; and its entry under a key a newer session
	 * took over (shadow) is still found by the other one. */
	struct nat_key ska;
	struct nat_key skb;
	__u64 seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NAT_FRAG_ENTRIES);
	__type(key, struct nat_frag_key);
	__type(value, struct nat_frag);
} frags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAT_HM_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nat_hm_key);
	__type(value, struct nat_hm);
} hostmaps SEC(".maps");

/* ftp proxy state by the control session's seq. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAT_FTP_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct nat_ftp);
} ftps SEC(".maps");

/* Interface addresses (0/32 targets), by ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct nat_ifaddr);
} ifaddrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nat_hot);
} hot SEC(".maps");

/* The slow programs (SLOW_*), which the programs tail-call for the
 * packets their fast path leaves. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOW_N);
	__type(key, __u32);
	__type(value, __u32);
} slow_progs SEC(".maps");

/* Link-layer header length by ifindex when not Ethernet (nat_hot.l3dev). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} l2lens SEC(".maps");

/* ------------------------------------------------------------ scratch */

struct pkt {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport; /* network order */
	__u16 dport;
	__u8 family;
	__u8 proto;
	__u8 pflags;
	__u8 tcpflags;
	__u8 icmptype;
	__u8 icmperr;
	__u8 fragbody;
	__u8 morefrags;
	__u16 l3off;
	__u16 l4off;   /* 0: no L4 header (fragment body, too short) */
	__u16 l4len;   /* bytes from l4off to the end of the datagram */
	__u16 csumoff; /* L4 checksum to patch, 0: none */
	__u8 udp0;     /* UDP with a zero checksum field */
	__u8 cut;      /* a TCP header cut short (4-19 bytes): no L4, its ports in sport/dport */
	__u8 tcpbad;   /* a TCP header IPFilter calls bad: a first fragment makes no frag entry */
	__u8 nq;       /* ICMPv4, not a query: looked up by nqid (the engine's nqICMP) */
	__u32 ipid;
	__u32 len;     /* bytes from l3off to the end of the buffer */
	__u32 ifindex;
	__u8 dir;
	__u8 cutnew;   /* a cut TCP header without a session of its ports: it
			* starts one of its own (the engine's check) */
	__u16 fragend; /* first fragments: where their data ends (bytes) */
	__u16 fragoff; /* fragment bodies: where their data starts (bytes) */
	__u16 nqid;    /* nq: its bytes 4-5 (network order), a query's id slot */
	__u8 nonote;   /* a first fragment that makes no fragment entry */
	__u8 ah;       /* IPv6 with an AH header (walked as an extension header) */
	__u16 fauth;   /* IPv4 fragments: the fragment key's options */
	__u32 fopt;
	__u16 fsec;
	__u16 icmptc;  /* ICMPv4: its type and code word (network order), ipf_nat_newrdr's clash key */
};

/* A 128-bit address number (IPv4 in the low 32 bits of lo). */
struct a128 {
	__u64 hi;
	__u64 lo;
};

/* The session a new packet is getting (the engine's *session). */
struct newsess {
	struct nat_tuple t;  /* network order */
	__u32 rule_idx;
	__u32 rule_id;
	__u32 ifin;
	__u32 ifout;
	__u32 hm_rule;
	__u16 hm_port;
	__u8 hm_on;
	__u8 move;
	__u8 ok;
	__u8 pad[3];
};

/* Embedded packet of an ICMP error. */
#define ICMP_INNER 128
struct inner {
	__u8 b[ICMP_INNER];  /* after rewrite */
	__u8 o[ICMP_INNER];  /* before */
	__u32 m;             /* bytes held */
	__u32 hl;            /* its L3 header length */
	__u32 l4;            /* offset of its L4 header in b, 0: none */
	__u32 l4len;
	__u8 v6;
	__u8 proto;
	__u8 pflags;
	__u8 fragbody;
	__u16 sport;         /* host order */
	__u16 dport;
	__u32 src[4];        /* network order */
	__u32 dst[4];
};

struct sticky_ctx {
	__u32 slot;
	__u32 n;
	__u16 port;
	__u16 found_idx;
	__u8 found;
	__u8 pad[3];
	__u64 seq;
	__u32 ndst[4];
};

/* Room for locals of the session-making functions, which would not fit
 * their combined stack. */
struct scratch {
	struct nat_hm_key hk;
	struct nat_hm nh;
	struct nat_key rk;
	struct nat_key rk2;
	__u32 na[4];
	__u32 hn[4];
	__u32 hd[4];
	__u32 m[4];
};

/* The ftp proxy's working state for one segment (see ftp.h). */
struct ftpctx {
	__u64 seq;          /* the control session: its ftps key */
	struct nat_key fk;  /* and its forward entry */
	struct nat_tuple t;
	__u32 len;          /* payload bytes in pay */
	__s32 off;          /* the engine's ftpProcess locals */
	__s32 base;
	__s32 inc;
	__u32 iptot;        /* IPv4 total length / IPv6 payload length */
	__u32 nums[6];
	__u8 side;
	__u8 phase;
	__u8 sdir;
	__u8 family;
	__u8 insecure;
	__u8 pasvonly;
	__u8 forcepasv;
	__u8 fail;
	__u8 changed;
	__u8 need;          /* ftp_step stopped at a line to act on */
	__u8 gaveup;        /* side 0's login state, copied */
	__u8 incok;
	__s32 at;           /* its payload offset */
	__s32 d;            /* what acting on it changed */
	__s32 passok;
	__s32 cmd0;         /* side 0's last command of interest */
	__u32 ln;           /* bytes in line */
	__u32 zs;           /* line_addr6: the compressed run of zero groups */
	__u32 zl;
	__u32 sum;          /* payload_sum */
	__u32 sumlen;
	__u8 which;
	__u8 th[20];        /* the TCP header as it came */
	__u8 pad2[3];
};

/* A byte move, a byte scan and an address check of the ftp proxy
 * (ftp.h mv, scan, parse_v4/v6). */
struct moves {
	__u32 dst;
	__u32 src;
	__u32 n;
	__u8 kind;
	__u8 pad[3];
};

struct scanctx {
	__u32 from;
	__u32 to;
	__u32 res;
	__u8 kind;
	__u8 ch;
	__u8 pad[2];
};

struct addrparse {
	__u32 pos;
	__u32 end;
	__u32 v;
	__u32 quad;
	__u8 fields;
	__u8 digits;
	__u8 first;
	__u8 bad;
	__u8 groups;
	__u8 colons;
	__u8 ellipsis;
	__u8 pad;
};

struct work {
	__u32 proxy; /* 1, 2: run the proxy, forward or reply (finish) */
	__u8 pre;    /* the egress program that runs before the filter */
	__u8 slave;  /* the packet belongs to a proxy's data connection */
	__u8 nohit;  /* nat_run found no session with the packet's key */
	/* what this packet counted in NS_EXISTS and NS_WRAP: undone if it
	 * turns out to have raced another CPU to its session (stat_raced) */
	__u8 nexists;
	__u8 nwraps;
	__u8 pad_[3];
	/* the seq sess_pin gave for the entry being applied or copied (here,
	 * not on the stack: the deepest call chain has no 8 bytes left) */
	__u64 pin;
	struct scratch x;
	struct moves mv;
	struct scanctx sc2;
	struct addrparse ap;
	struct ftp_side side;
	struct pkt p;
	struct nat_key k;
	struct nat_key k2;
	struct nat_frag_key fk;
	struct nat_frag fv;
	struct nat_tuple t;
	struct sticky_ctx sc;
	struct nat_fkey fk4;
	struct nat_fast6 fb;
	struct nat_fast4 fb4;
	/* entries being built, as bytes: a bpf_timer may not sit in a
	 * per-CPU map's value type (its bytes stay zero here) */
	__u8 sb[sizeof(struct nat_sess)] __attribute__((aligned(8)));
	__u8 sb2[sizeof(struct nat_sess)] __attribute__((aligned(8)));
	__u8 sb3[sizeof(struct nat_sess)] __attribute__((aligned(8))); /* shadow() */
	struct newsess ns;
	struct inner in;
	struct ftpctx fc;
	/* ftp: the segment's payload as it is being rewritten, as it came,
	 * room to move a tail, and the line being built */
	__u8 pay[FTP_MAXPAY];
	__u8 orig[FTP_MAXPAY];
	__u8 tmp[FTP_MAXPAY];
	__u8 line[FTP_MAXLINE + 32];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct work);
} work_area SEC(".maps");

static __always_inline struct work *get_work(void)
{
	__u32 z = 0;

	return bpf_map_lookup_elem(&work_area, &z);
}

#define WS(w) ((struct nat_sess *)(w)->sb)
#define WS2(w) ((struct nat_sess *)(w)->sb2)

/* copy_sess copies an entry without its timer (which programs may not
 * read or write directly). */
static __always_inline void copy_sess(struct nat_sess *d, const struct nat_sess *s)
{
	__builtin_memcpy(d, s, __builtin_offsetof(struct nat_sess, timer));
}

/* -------------------------------------------------------------- helpers */

static __always_inline __u64 cfg(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&config, &k);

	return v ? *v : 0;
}

/* cfg_or is a config value, or def where it is 0 (not set). */
static __always_inline __u64 cfg_or(__u32 k, __u64 def)
{
	__u64 v = cfg(k);

	return v ? v : def;
}

static __always_inline __u64 *cfgp(__u32 k)
{
	return bpf_map_lookup_elem(&config, &k);
}

static __always_inline void stat_add(__u32 k, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &k);

	if (v)
		*v += n;
}

static __always_inline void stat_inc(__u32 k)
{
	stat_add(k, 1);
}

/* stat_sub takes n back from this CPU's counter k, never below zero (the
 * counters may have been zeroed since this CPU counted them: ipnat -Z). */
static __always_inline void stat_sub(__u32 k, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &k);

	if (v)
		*v = *v > n ? *v - n : 0;
}

/* stat_raced counts a packet that found the session another CPU made for
 * its flow at the same moment (NS_RACED) and takes back what it counted
 * on its way that the sequential engine, in which it would have found the
 * session by its lookup, would not: the miss, and the clashes and
 * wrapped port searches of its rule walk. Per-CPU counters: this CPU's
 * own counts, made by this packet, go down. */
static __always_inline void stat_raced(struct work *w, __u32 dir)
{
	stat_inc(dir * NS_SIDE + NS_RACED);
	stat_sub(dir * NS_SIDE + NS_MISS, 1);
	if (w->nexists)
		stat_sub(dir * NS_SIDE + NS_EXISTS, w->nexists);
	if (w->nwraps)
		stat_sub(dir * NS_SIDE + NS_WRAP, w->nwraps);
}

/* now_ns is the clock sessions age by: jiffies (which the verifier reads
 * inline, where a clock helper costs a call per packet) times the length
 * of a jiffy user space measured at load (nat_hot.nspj), plus the offset
 * tests move time with. */
static __always_inline struct nat_hot *get_hot(void)
{
	__u32 z = 0;

	return bpf_map_lookup_elem(&hot, &z);
}

static __always_inline __u64 hot_now(const struct nat_hot *h)
{
	if (!h->nspj)
		return bpf_ktime_get_coarse_ns() + h->clock;
	return bpf_jiffies64() * h->nspj + h->clock;
}

static __always_inline __u64 now_ns(void)
{
	struct nat_hot *h = get_hot();

	return h ? hot_now(h) : bpf_ktime_get_coarse_ns();
}

/* The kernel's skb, for its ip_summed (CO-RE: the field's place comes
 * from the running kernel's BTF). */
extern void *bpf_cast_to_kern_ctx(void *) __ksym;

struct sk_buff___nat {
	__u8 ip_summed : 2;
} __attribute__((preserve_access_index));

#define CHECKSUM_COMPLETE 2
#define CHECKSUM_PARTIAL 3

static __always_inline int ip_summed(struct __sk_buff *skb)
{
	struct sk_buff___nat *k = bpf_cast_to_kern_ctx(skb);

	return BPF_CORE_READ_BITFIELD(k, ip_summed);
}

static __always_inline __u32 csum_word(__u32 acc, __u16 o, __u16 n)
{
	return csum_add32(csum_add32(acc, (__u16)~o), n);
}

static __always_inline __u32 csum_words32(__u32 acc, __u32 o, __u32 n)
{
	acc = csum_word(acc, (__u16)o, (__u16)n);
	return csum_word(acc, (__u16)(o >> 16), (__u16)(n >> 16));
}

/* Host-order a128 from network-order words and back. */
static __always_inline struct a128 a_from(const __u32 *w, int v6)
{
	struct a128 a;

	if (!v6) {
		a.hi = 0;
		a.lo = bpf_ntohl(w[0]);
		return a;
	}
	a.hi = ((__u64)bpf_ntohl(w[0]) << 32) | bpf_ntohl(w[1]);
	a.lo = ((__u64)bpf_ntohl(w[2]) << 32) | bpf_ntohl(w[3]);
	return a;
}

static __always_inline void a_to(__u32 *w, struct a128 a, int v6)
{
	if (!v6) {
		w[0] = bpf_htonl((__u32)a.lo);
		w[1] = w[2] = w[3] = 0;
		return;
	}
	w[0] = bpf_htonl((__u32)(a.hi >> 32));
	w[1] = bpf_htonl((__u32)a.hi);
	w[2] = bpf_htonl((__u32)(a.lo >> 32));
	w[3] = bpf_htonl((__u32)a.lo);
}

static __always_inline struct a128 a_add(struct a128 a, __u64 n)
{
	__u64 lo = a.lo + n;

	if (lo < a.lo)
		a.hi++;
	a.lo = lo;
	return a;
}

static __always_inline struct a128 a_and(struct a128 a, struct a128 m)
{
	a.hi &= m.hi;
	a.lo &= m.lo;
	return a;
}

static __always_inline struct a128 a_or(struct a128 a, struct a128 m)
{
	a.hi |= m.hi;
	a.lo |= m.lo;
	return a;
}

static __always_inline struct a128 a_trim(struct a128 a, int v6)
{
	if (!v6) {
		a.hi = 0;
		a.lo &= 0xffffffffULL;
	}
	return a;
}

static __always_inline struct a128 a_not(struct a128 a, int v6)
{
	a.hi = ~a.hi;
	a.lo = ~a.lo;
	return a_trim(a, v6);
}

static __always_inline int a_zero(struct a128 a)
{
	return a.hi == 0 && a.lo == 0;
}

static __always_inline int a_eq(struct a128 a, struct a128 b)
{
	return a.hi == b.hi && a.lo == b.lo;
}

static __always_inline int a_less(struct a128 a, struct a128 b)
{
	return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

static __always_inline int a_ones(struct a128 a, int v6)
{
	if (v6)
		return a.hi == ~0ULL && a.lo == ~0ULL;
	return (a.lo & 0xffffffffULL) == 0xffffffffULL;
}

static __always_inline struct a128 op_a(const struct nat_op *o)
{
	struct a128 a = { o->a[0], o->a[1] };

	return a;
}

static __always_inline struct a128 op_m(const struct nat_op *o)
{
	struct a128 a = { o->m[0], o->m[1] };

	return a;
}

static __always_inline int words_eq(const __u32 *a, const __u32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static __always_inline void words_cp(__u32 *d, const __u32 *s)
{
	d[0] = s[0];
	d[1] = s[1];
	d[2] = s[2];
	d[3] = s[3];
}

/* ------------------------------------------------------------- parsing */

/* icmp4_query: the engine's isICMPv4Query (not 15, 16: FI_ICMPQUERY) */
static __always_inline int icmp4_query(__u8 t)
{
	return t == 0 || t == 8 || t == 13 || t == 14 || t == 17 || t == 18 || t == 9 || t == 10;
}

/* icmp4_natq: whether the NAT takes an ICMPv4 packet as a query (a session
 * of its id): not an information request/reply, a timestamp shorter than 20
 * bytes or a mask message shorter than 12 (the engine's natQueryV4) */
static __always_inline int icmp4_natq(__u8 t, __u32 n)
{
	if (t == 15 || t == 16)
		return 0;
	if (t == 13 || t == 14)
		return n >= 20;
	if (t == 17 || t == 18)
		return n >= 12;
	return icmp4_query(t);
}

static __always_inline int icmp4_error(__u8 t)
{
	return t == 3 || t == 4 || t == 5 || t == 11 || t == 12;
}

static __always_inline int icmp6_query(__u8 t)
{
	return (t >= 128 && t <= 132) || t == 139 || t == 140 || t == 200 || t == 201;
}

static __always_inline int icmp6_error(__u8 t)
{
	return t >= 1 && t <= 4;
}

/* tcp_bad is packet.TCPFlagsBad and a data offset below 20: a TCP header
 * IPFilter marks bad (ipf_pr_tcpcommon). */
static __always_inline int tcp_flags_bad(__u8 f, __u16 urp, int ack)
{
	if ((f & 0x20) && !urp)
		return 1; /* URG without an urgent pointer */
	if ((f & 0x03) && (f & 0x14) == 0x04)
		return 1; /* SYN or FIN with RST and no ACK */
	if ((f & 0x02) && (f & 0x28))
		return 1; /* SYN with URG or PSH */
	if (!(f & 0x10)) {
		if (f == 0x02 && ack)
			return 0;
		if (!(f & 0x06))
			return 1;
		return !!(f & 0x29);
	}
	return 0;
}

static __always_inline int tcp_bad(const __u8 *t)
{
	if ((t[12] >> 4) < 5)
		return 1;
	return tcp_flags_bad(t[13], (__u16)t[18] << 8 | t[19], t[8] | t[9] | t[10] | t[11]);
}

/* parse_l4 reads the transport header at p->l4off (when there is one) the
 * way the engine's parse does. Returns 0 when the bytes are not in the
 * linear part of the buffer (the caller pulls and retries). */
static __always_inline int parse_l4(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 off = p->l4off & 0x3ff;
	__u8 *l4 = data + off;

	if (!p->l4off)
		return 1;
	switch (p->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP: {
		__u32 min = p->proto == IPPROTO_TCP ? 20 : 8;

		if (p->l4len < min) {
			if (p->proto == IPPROTO_TCP && p->l4len >= 4 && p->family == 6) {
				/* IPv6: IPFilter treats a TCP header cut short
				 * as a TCP packet with its ports (its session
				 * lists them, a portmap rewrites them both ways)
				 * with no checksum to patch (the engine's cut6):
				 * the L4 header stays, csumoff stays 0 */
				if ((void *)(l4 + 4) > end)
					return 0;
				p->pflags = PF_TCP;
				p->sport = *(__u16 *)l4;
				p->dport = *(__u16 *)(l4 + 2);
				/* a first fragment makes no entry under 14 bytes
				 * or with flags IPFilter calls bad (the engine's
				 * cut6Bad) */
				p->tcpbad = 1;
				if (p->l4len >= 14 && (void *)(l4 + 14) <= end) {
					p->tcpflags = l4[13];
					p->tcpbad = (l4[12] >> 4) < 5 ||
						    tcp_flags_bad(l4[13], 0, l4[8] | l4[9] | l4[10] | l4[11]);
				}
				return 1;
			}
			p->l4off = 0;
			if (p->proto == IPPROTO_TCP && p->l4len >= 4) {
				/* a TCP header cut short still has its ports:
				 * the packet finds its session by them, and
				 * only its addresses are translated (the
				 * engine's cutPorts) */
				if ((void *)(l4 + 4) > end)
					return 0;
				p->sport = *(__u16 *)l4;
				p->dport = *(__u16 *)(l4 + 2);
				p->cut = 1;
				/* a cut first fragment starts a fragment entry
				 * whatever its flags: IPFilter checks no flags
				 * of a header it does not have whole (the
				 * engine's cutFrag) */
				p->tcpbad = 0;
			}
			return 1;
		}
		if ((void *)(l4 + 20) > end && (void *)(l4 + min) > end)
			return 0;
		if ((void *)(l4 + 8) > end)
			return 0;
		p->pflags = p->proto == IPPROTO_TCP ? PF_TCP : PF_UDP;
		p->sport = *(__u16 *)l4;
		p->dport = *(__u16 *)(l4 + 2);
		if (p->proto == IPPROTO_TCP) {
			if ((void *)(l4 + 20) > end)
				return 0;
			p->tcpflags = l4[13];
			p->csumoff = off + 16;
			p->tcpbad = tcp_bad(l4);
		} else if (*(__u16 *)(l4 + 6) != 0 || p->family == 6) {
			p->csumoff = off + 6;
			p->udp0 = *(__u16 *)(l4 + 6) == 0;
		}
		return 1;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* ICMP in IPv6 or ICMPv6 in IPv4: a protocol like any other
		 * (the engine's parse) */
		if ((p->proto == IPPROTO_ICMPV6) != (p->family == 6))
			return 1;
		if (p->l4len < 8) {
			p->l4off = 0;
			return 1;
		}
		if ((void *)(l4 + 8) > end)
			return 0;
		p->icmptype = l4[0];
		p->icmptc = *(__u16 *)l4;
		p->csumoff = off + 2;
		if (p->proto == IPPROTO_ICMP && !icmp4_natq(l4[0], p->l4len)) {
			/* IPFilter looks it up with these bytes in the id slot:
			 * a query's session with that id, one of its own kind
			 * only when they are 0 (the engine's lookupNonQuery) */
			p->nq = 1;
			p->nqid = *(__u16 *)(l4 + 4);
		}
		if (p->proto == IPPROTO_ICMP ? icmp4_natq(l4[0], p->l4len) : icmp6_query(l4[0])) {
			p->pflags = PF_ICMPQ;
			p->sport = p->dport = *(__u16 *)(l4 + 4);
		} else if (p->proto == IPPROTO_ICMP ? icmp4_error(l4[0]) : icmp6_error(l4[0])) {
			/* an error too short to quote an IP header is
			 * translated as a plain packet, as the engine (and
			 * IPFilter) does */
			p->icmperr = p->l4len >= 8 + (p->proto == IPPROTO_ICMP ? 20 : 40);
		}
		return 1;
	}
	return 1;
}

/* Walks an IPv6 extension header chain (slow: only packets that have
 * one), as the engine's parse does. Sets l4off/proto, the fragment
 * header's id and more-fragments flag, fragbody. AH is one of IPFilter's
 * extension headers, its length read as theirs (8-byte units). A header
 * cut short by the end of the datagram, or running past it, leaves the
 * packet without L4 header and with no protocol (59, IPPROTO_NONE: such
 * packets share one session whatever header was cut); the engine, as
 * IPFilter, still translates its addresses. Returns 0 (the packet is
 * left alone) only for a chain it cannot read. */
struct v6walk {
	struct __sk_buff *skb;
	__u32 off;
	__u32 end;
	__u32 id;
	__u8 nh;
	__u8 done;
	__u8 ok;
	__u8 frag;
	__u8 more;
	__u8 cut;
	__u8 ah;
	__u8 pad;
};

static long v6walk_step(__u32 i, struct v6walk *c)
{
	__u8 h[4];

	switch (c->nh) {
	case 0:
	case 43:
	case 51:
	case 60:
	case 135: {
		__u32 hl;

		if (c->off + 8 > c->end) {
			c->cut = 1;
			c->done = 1;
			return 1;
		}
		if (bpf_skb_load_bytes(c->skb, c->off, h, 2) < 0) {
			c->ok = 0;
			return 1;
		}
		hl = ((__u32)h[1] + 1) * 8;
		if (c->off + hl > c->end) {
			c->cut = 1;
			c->done = 1;
			return 1;
		}
		if (c->nh == 51)
			c->ah = 1;
		c->nh = h[0];
		c->off += hl;
		return 0;
	}
	case 44: {
		struct work *w;
		__u8 f[8];

		if (c->off + 8 > c->end) {
			c->cut = 1;
			c->done = 1;
			return 1;
		}
		if (bpf_skb_load_bytes(c->skb, c->off, f, 8) < 0) {
			c->ok = 0;
			return 1;
		}
		/* the id as it sits in the packet, as IPv4's goes in
		 * host order: either way a datagram's fragments share it */
		c->id = (__u32)f[4] << 24 | (__u32)f[5] << 16 | (__u32)f[6] << 8 | f[7];
		c->more = f[3] & 1;
		c->nh = f[0];
		/* where the fragment's data starts and ends, in the packet
		 * being parsed (here: the walk's context is on the stack of
		 * a deep call chain) */
		w = get_work();
		if (w) {
			w->p.fragoff = ((__u16)f[2] << 8 | f[3]) & 0xfff8;
			w->p.fragend = w->p.fragoff + c->end - (c->off + 8);
		}
		if (((__u16)f[2] << 8 | f[3]) & 0xfff8) {
			c->frag = 1;
			c->done = 1;
			return 1;
		}
		c->off += 8;
		return 0;
	}
	}
	c->done = 1;
	return 1;
}

/* opt_copybit is IPFilter's option bit of a copied IPv4 option type
 * (IPF_OPTCOPY: security to FINN), 0 for the others. */
static __always_inline __u32 opt_copybit(__u8 t)
{
	switch (t) {
	case 130: return 0x000100; /* security */
	case 131: return 0x000200; /* LSRR */
	case 133: return 0x000400; /* extended security */
	case 134: return 0x000800; /* CIPSO */
	case 136: return 0x001000; /* SATID */
	case 137: return 0x002000; /* SSRR */
	case 147: return 0x004000; /* address extension */
	case 142: return 0x008000; /* VISA */
	case 144: return 0x010000; /* IMITD */
	case 145: return 0x020000; /* EIP */
	case 205: return 0x040000; /* FINN */
	}
	return 0;
}

/* ripso_class is the class mask of a RIPSO classification byte. */
static __always_inline __u16 ripso_class(__u8 c)
{
	switch (c) {
	case 0x01: return 0x01;
	case 0x3d: return 0x02;
	case 0x5a: return 0x04;
	case 0x66: return 0x08;
	case 0x96: return 0x10;
	case 0xab: return 0x20;
	case 0xcc: return 0x40;
	case 0xf1: return 0x80;
	}
	return 0;
}

struct fragopt_ctx {
	__u32 i;
	__u32 olen;
	__u32 optmsk;
	__u16 secmsk;
	__u16 auth;
};

/* fragopt_step reads the option at c->i of the options in w->in.b. */
static long fragopt_step(__u32 n, struct fragopt_ctx *c)
{
	struct work *w = get_work();
	__u32 i = c->i, bit;
	__u8 *o, t, l;

	if (!w || i >= c->olen || i >= 40)
		return 1;
	o = w->in.b;
	t = o[BOUND(i, 63)];
	if (t == 0) /* EOL */
		return 1;
	if (t == 1) { /* NOP */
		c->i = i + 1;
		return 0;
	}
	if (i + 1 >= c->olen)
		return 1;
	l = o[BOUND(i + 1, 63)];
	if (l < 2 || i + l > c->olen)
		return 1;
	bit = opt_copybit(t);
	if (bit && l > 4) {
		/* a second security option leaves the first's class */
		if (t == 130 && !(c->optmsk & bit)) {
			c->secmsk = ripso_class(o[BOUND(i + 2, 63)]);
			c->auth = c->secmsk ? (__u16)o[BOUND(i + 3, 63)] << 8 | o[BOUND(i + 4, 63)] : 0;
		}
		c->optmsk |= bit;
	}
	c->i = i + l;
	return 0;
}

/* nat_v4_fragopts records in p->fopt/fsec/fauth the options an IPv4
 * fragment's key holds (olen bytes at off): the copied options of more
 * than 4 bytes, the class of the first security option and its
 * authority (the engine's fragKey, packet.IPv4FragKeyOptions), so that a
 * fragment carries its first fragment's entry only with the same ones. */
GLOBAL int nat_v4_fragopts(struct __sk_buff *skb, __u32 off, __u32 olen)
{
	struct work *w = get_work();
	struct fragopt_ctx c = {};

	if (!w || !skb)
		return 0;
	if (olen > 40)
		olen = 40;
	/* into w->in.b: free until an ICMP error's inner packet */
	if (olen == 0 || bpf_skb_load_bytes(skb, off, w->in.b, BOUND(olen - 1, 63) + 1) < 0)
		return 0;
	c.olen = olen;
	bpf_loop(40, fragopt_step, &c, 0);
	if (c.auth && !(c.auth & 0x0100))
		c.auth &= 0xff00;
	w->p.fopt = c.optmsk;
	w->p.fsec = c.secmsk;
	w->p.fauth = c.auth;
	return 0;
}

GLOBAL int nat_v6_walk(struct __sk_buff *skb)
{
	struct work *w = get_work();
	struct v6walk c = {};
	struct pkt *p;

	if (!w)
		return 0;
	p = &w->p;
	c.skb = skb;
	c.off = (__u32)p->l3off + 40;
	c.end = (__u32)p->l3off + 40 + p->l4len;
	c.nh = p->proto;
	c.ok = 1;
	bpf_loop(1024, v6walk_step, &c, 0);
	if (!c.ok || !c.done)
		return 0;
	p->proto = c.nh;
	p->ipid = c.id;
	p->morefrags = c.more;
	p->ah = c.ah;
	if (c.cut) {
		/* no L4 header and no protocol: the addresses only (the
		 * engine's l4 < 0, proto 59) */
		p->proto = 59;
		p->l4off = 0;
		p->l4len = 0;
		return 1;
	}
	if (c.frag) {
		p->fragbody = 1;
		p->l4off = 0;
		return 1;
	}
	if (c.ah && (c.nh != IPPROTO_TCP || c.off + 20 > c.end)) {
		/* behind AH, IPFilter reads the ports of a whole TCP header
		 * only: UDP, a cut TCP header and ICMPv6 give a session of
		 * their protocol without ports or ids (the engine's parse) */
		p->l4off = 0;
		p->l4len = 0;
		return 1;
	}
	p->l4len = c.end - c.off;
	p->l4off = c.off;
	return 1;
}

/* ------------------------------------------------------- fast entries */

/* fkey_of gives the fast path's key of entry key k; 0 when the entry can
 * have no fast twin (IPv6, not TCP or UDP, a wildcard or shadow key). */
static __always_inline int fkey_of(struct nat_fkey *fk, const struct nat_key *k)
{
	if (k->family != 4 || k->dir > DIR_OUT || (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP))
		return 0;
	fk->src = k->src[0];
	fk->dst = k->dst[0];
	fk->sport = k->sport;
	fk->dport = k->dport;
	fk->proto = k->proto;
	fk->dir = k->dir;
	fk->pad = 0;
	return 1;
}

/* fast6_ok tells whether the entry at key k can have an IPv6 fast twin
 * (kept under k itself). */
static __always_inline int fast6_ok(const struct nat_key *k)
{
	return k->family == 6 && k->dir <= DIR_OUT && (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP);
}

/* fast_of returns the fast twin of the entry at key k, if it has one (of
 * an IPv6 entry, its struct nat_fast part). */
static __always_inline struct nat_fast *fast_of(const struct nat_key *k)
{
	struct nat_fkey fk;

	if (fast6_ok(k))
		return bpf_map_lookup_elem(&fast6, k);
	if (!fkey_of(&fk, k))
		return NULL;
	return bpf_map_lookup_elem(&fast4, &fk);
}

/* ------------------------------------------------------------- slots */

#define barrier() asm volatile("" ::: "memory")
#define READ_ONCE32(x) (*(volatile __u32 *)&(x))
#define WRITE_ONCE32(x, v) (*(volatile __u32 *)&(x) = (v))
#define READ_ONCE64(x) (*(volatile __u64 *)&(x))

/* fseq_next returns a fresh even seq for a fast entry (struct
 * nat_fast4): no element can have had it before (2^31 entries made
 * apart), so a reader that reads it twice knows no writer came between. */
static __always_inline __u32 fseq_next(void)
{
	__u64 *c = cfgp(NCFG_FSEQ);

	if (!c)
		return 2;
	return (__u32)__sync_fetch_and_add(c, 2) + 2;
}

/* fseq_kill marks a fast entry about to be deleted or replaced (its
 * element may be written for another key as soon as it is): no reader
 * trusts it from now on. */
static __always_inline void fseq_kill(__u32 *seq)
{
	WRITE_ONCE32(*seq, FSEQ_DEAD);
	barrier();
}

/* fseq_publish makes a fast entry just written with seq q + 1 whole
 * (seq q), unless it was marked since (fseq_kill): seq and pad as one
 * 64-bit word, pad 0. */
static __always_inline void fseq_publish(__u32 *seq, __u32 q)
{
	__sync_val_compare_and_swap((__u64 *)seq, (__u64)(q + 1), (__u64)q);
}

/* slot_of returns the slot of entry key k, which must be fkey_of's (IPv4
 * TCP or UDP, DIR_IN or DIR_OUT); the words of its fast4 key in w. The
 * helpers below take the session table's key, not a nat_fkey copy of it:
 * the slow path's stack has no 16 bytes to spare. */
static __always_inline struct nat_slot *slot_of(const struct nat_key *k, __u32 *w3)
{
	__u32 i;

	*w3 = k->proto | (__u32)k->dir << 8;
	i = slot_hash(k->src[0], k->dst[0], *(const __u32 *)&k->sport, *w3);
	return bpf_map_lookup_elem(&fast4dm, &i);
}

static __always_inline int slot_holds(const struct nat_slot *s, const struct nat_key *k, __u32 w3)
{
	const __u32 *x = (const __u32 *)&s->k;

	return s->k.proto && x[0] == k->src[0] && x[1] == k->dst[0] && x[2] == *(const __u32 *)&k->sport &&
	       x[3] == w3;
}

static __always_inline int fkey_ok(const struct nat_key *k)
{
	return k->family == 4 && k->dir <= DIR_OUT && (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP);
}

/* same_rewrite: f and g translate alike (what a slot copies of fast4). */
static __always_inline int same_rewrite(const struct nat_fast *f, const struct nat_fast *g)
{
	return f->nsrc == g->nsrc && f->ndst == g->ndst && *(__u32 *)&f->nsport == *(__u32 *)&g->nsport &&
	       f->ifindex == g->ifindex && f->csum_l3 == g->csum_l3 && f->csum_l4a == g->csum_l4a &&
	       f->csum_l4p == g->csum_l4p && f->flags == g->flags;
}

static __always_inline void rewrite_cp(struct nat_fast *d, const struct nat_fast *f)
{
	d->nsrc = f->nsrc;
	d->ndst = f->ndst;
	d->nsport = f->nsport;
	d->ndport = f->ndport;
	d->ifindex = f->ifindex;
	d->csum_l3 = f->csum_l3;
	d->csum_l4a = f->csum_l4a;
	d->csum_l4p = f->csum_l4p;
	d->flags = f->flags;
}

/* slot_fill gives the fast4 entry f of entry key k (just written to fast4
 * under fk) its slot. An empty slot takes k with f's rewrite in two
 * steps: written under the lock with seq left odd (no reader uses it),
 * then, the lock let go, fast4 is looked up again and only if it still
 * holds fk with that rewrite is seq made even; otherwise the slot is
 * emptied again. So a fill racing the end of k's session (fast_gone
 * removes the entry from fast4 before it clears the slot) either sees the
 * entry gone or left k in the slot before the clear, which then finds it
 * (a clear of a slot whose fill is not checked yet moves seq by two: the
 * fill sees that and leaves the slot empty). A slot that holds k already
 * (the entry was bound since) takes f's rewrite at once, its counts kept;
 * one holding another key is left as it is (the first comes first). */
static __always_inline void slot_fill(const struct nat_key *k, const struct nat_fkey *fk, const struct nat_fast *f)
{
	struct nat_slot *s;
	struct nat_fast *g;
	__u32 q, w3;
	int ok;

	if (!fkey_ok(k))
		return;
	s = slot_of(k, &w3);
	if (!s)
		return;
	bpf_spin_lock(&s->lock);
	q = s->seq;
	if (q & 1) {
		bpf_spin_unlock(&s->lock); /* another fill of it is being checked */
		return;
	}
	if (s->k.proto) {
		if (slot_holds(s, k, w3)) {
			WRITE_ONCE32(s->seq, q + 1);
			barrier();
			rewrite_cp(&s->f, f);
			barrier();
			WRITE_ONCE32(s->seq, q + 2);
		}
		bpf_spin_unlock(&s->lock);
		return;
	}
	WRITE_ONCE32(s->seq, q + 1);
	barrier();
	s->k.src = k->src[0];
	s->k.dst = k->dst[0];
	*(__u32 *)&s->k.sport = *(const __u32 *)&k->sport;
	*(__u32 *)&s->k.proto = w3;
	rewrite_cp(&s->f, f);
	s->f.tcpflags = f->tcpflags;
	s->f.pad = 0;
	s->f.last = f->last;
	s->f.pkts = 0;
	s->f.bytes = 0;
	bpf_spin_unlock(&s->lock);
	g = bpf_map_lookup_elem(&fast4, fk);
	ok = g && same_rewrite(g, f);
	bpf_spin_lock(&s->lock);
	if (s->seq == q + 1) {
		if (!ok) {
			/* nothing went through it: no count to keep */
			s->k.proto = 0;
			barrier();
		}
		WRITE_ONCE32(s->seq, q + 2);
	} else {
		/* cleared meanwhile (seq moved by two): make it even */
		WRITE_ONCE32(s->seq, s->seq + 1);
	}
	bpf_spin_unlock(&s->lock);
}

/* slot_clear empties the slot of entry key k if it holds k and returns the
 * packets counted there. seq ends two on either way: odd, then even
 * around the change as readers need; a fill not yet checked (odd) stays
 * odd, two on, which its check sees. */
static __always_inline __u64 slot_clear(const struct nat_key *k)
{
	struct nat_slot *s;
	__u64 n = 0;
	__u32 q, w3;

	if (!fkey_ok(k))
		return 0;
	s = slot_of(k, &w3);
	if (!s)
		return 0;
	bpf_spin_lock(&s->lock);
	if (slot_holds(s, k, w3)) {
		q = s->seq;
		if (!(q & 1))
			WRITE_ONCE32(s->seq, q + 1);
		barrier();
		n = s->f.pkts;
		s->k.proto = 0;
		barrier();
		WRITE_ONCE32(s->seq, q + 2);
	}
	bpf_spin_unlock(&s->lock);
	return n;
}

/* slot_dyn adds what went through the slot of entry key k, if it holds k,
 * to an entry's per-packet fields (pkts and bytes may be NULL): the later
 * time, the union of the flags, the sums. Read under the lock, a copy
 * consistent with what writers do. */
static __always_inline void slot_dyn(const struct nat_key *k, __u64 *last, __u8 *tcpflags, __u64 *pkts,
				     __u64 *bytes)
{
	struct nat_slot *s;
	__u64 l = 0, p = 0, b = 0;
	__u32 w3;
	__u8 fl = 0;
	int found = 0;

	if (!fkey_ok(k))
		return;
	s = slot_of(k, &w3);
	if (!s)
		return;
	bpf_spin_lock(&s->lock);
	if (slot_holds(s, k, w3)) {
		l = s->f.last;
		fl = s->f.tcpflags;
		p = s->f.pkts;
		b = s->f.bytes;
		found = 1;
	}
	bpf_spin_unlock(&s->lock);
	if (!found)
		return;
	if (l > *last)
		*last = l;
	*tcpflags |= fl;
	if (pkts)
		*pkts += p;
	if (bytes)
		*bytes += b;
}

/* fast_gone removes the fast twin of the entry at key k, keeping the count
 * of the packets it translated (read before the delete: the element may
 * be another key's as soon as it is deleted, struct nat_fast4). */
static __always_inline void fast_gone(const struct nat_key *k)
{
	struct nat_fkey fk;
	struct nat_fast4 *g;
	__u64 n;

	if (fast6_ok(k)) {
		struct nat_fast6 *g6 = bpf_map_lookup_elem(&fast6, k);

		if (!g6)
			return;
		fseq_kill(&g6->seq);
		n = g6->f.pkts;
		if (bpf_map_delete_elem(&fast6, k) == 0 && n)
			stat_add((k->dir & 1) * NS_SIDE + NS_FASTGONE, n);
		return;
	}
	if (!fkey_of(&fk, k))
		return;
	g = bpf_map_lookup_elem(&fast4, &fk);
	if (!g)
		return;
	fseq_kill(&g->seq);
	n = g->f.pkts;
	if (bpf_map_delete_elem(&fast4, &fk) == 0 && n)
		stat_add((fk.dir & 1) * NS_SIDE + NS_FASTGONE, n);
	/* after the delete: a fill from now on sees the entry gone */
	n = slot_clear(k);
	if (n)
		stat_add((k->dir & 1) * NS_SIDE + NS_FASTGONE, n);
}

/* The per-packet fields of an entry, wherever they are kept. */
struct dyn {
	__u64 last;
	__u8 tcpflags;
};

static __always_inline struct dyn dyn_of(const struct nat_key *k, const struct nat_sess *v)
{
	struct nat_fast *f = fast_of(k);
	struct dyn d;

	if (f) {
		d.last = f->last;
		d.tcpflags = f->tcpflags;
		/* and what went through its slot */
		slot_dyn(k, &d.last, &d.tcpflags, NULL, NULL);
	} else {
		d.last = v->last;
		d.tcpflags = v->tcpflags;
	}
	return d;
}

/* --------------------------------------------------------------- apply */

/* lifetime is the engine's session.lifetime in ticks, with IPFilter's
 * default NAT ages (fr_defnatage, fr_defnatipage, fr_defnaticmpage) as
 * ipf -T sets them. */
static __always_inline __u64 lifetime(__u32 age, __u8 proto, __u8 pflags, int w, __u8 f0, __u8 f1)
{
	if (age)
		return (__u64)age * 2;
	switch (proto) {
	case IPPROTO_TCP: {
		__u8 f = f0 | f1;

		if (f & 0x04)
			return 60;
		if ((f0 & 0x01) && (f1 & 0x01))
			return 480;
		if (f & 0x01)
			return 14400;
		if ((f0 & 0x10) && (f1 & 0x10))
			return 864000;
		return 480;
	}
	case IPPROTO_UDP:
		return cfg_or(NCFG_DEFAGE, 1200);
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if ((pflags & PF_ICMPQ) && w == 0)
			return cfg_or(NCFG_DEFICMPAGE, 6);
		return cfg_or(NCFG_DEFAGE, 1200);
	}
	return cfg_or(NCFG_DEFIPAGE, 120);
}

/* fast_rebind refills the fast slot of entry k's fast twin f, bound to
 * another interface since the twin was made (apply). A call of its own:
 * inline, slot_fill's locked sections made the slow programs' own frame,
 * the first of each of their call chains, 144 bytes. */
static __attribute__((noinline)) int fast_rebind(const struct nat_key *k, const struct nat_fast *f)
{
	struct work *w = get_work();

	/* its fast4 key in the scratch area: no stack to spare */
	if (w && fkey_of(&w->fk4, k))
		slot_fill(k, &w->fk4, f);
	return 0;
}

/* apply rewrites the packet for entry v and accounts it. The new
 * addresses and ports are written directly; the L4 checksum goes through
 * bpf_l4_csum_replace, which also does right by CHECKSUM_PARTIAL skbs
 * (only the pseudo header is in the field then) and CHECKSUM_COMPLETE
 * ones. Packet pointers are invalid afterwards. */
static __always_inline int apply(struct __sk_buff *skb, const struct nat_key *k, struct nat_sess *v, struct pkt *p,
				 __u64 now)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 l3 = p->l3off & 0xff;
	struct nat_fast *f;
	__u32 *nsrc, *ndst, l4a = v->csum_l4a;
	__u16 sp, dp;
	__u64 mf;
	int summed, dstonly = 0;

	if (v->w == 0) {
		nsrc = v->t.nsrc;
		ndst = v->t.ndst;
		sp = v->t.nsport;
		dp = v->t.ndport;
	} else {
		nsrc = v->t.odst;
		ndst = v->t.osrc;
		sp = v->t.odport;
		dp = v->t.osport;
	}
	/* an entry with a fast twin keeps its times and flags there (a
	 * packet the fast path left to this one: a fragment, IP options) */
	v->pkts++;
	v->bytes += p->len;
	f = fast_of(k);
	if (f) {
		/* the entry was bound since its twin was made (sess_take) */
		if (unlikely(f->ifindex != v->ifindex)) {
			f->ifindex = v->ifindex;
			fast_rebind(k, f);
		}
		f->last = now;
		if (p->proto == IPPROTO_TCP && p->l4off)
			f->tcpflags |= p->tcpflags;
	} else {
		v->last = now;
		if (p->proto == IPPROTO_TCP && p->l4off)
			v->tcpflags |= p->tcpflags;
	}

	if (p->family == 4) {
		struct iphdr *ip = data + l3;

		if ((void *)(ip + 1) > end)
			return -1;
		if (p->proto == IPPROTO_ICMP && p->l4off && icmp4_error(p->icmptype) && v->w == 0 &&
		    v->rtype == NT_REWRITE_IN && p->dir == DIR_IN) {
			/* an ICMP error quoting no session, the way of a
			 * rewrite-in session: IPFilter gives it the new
			 * destination only (internal/nat apply), also when
			 * its quote is too short to read (icmperr unset) */
			if (ip->daddr != ndst[0]) {
				ip->check = ~csum_fold32(
					csum_words32((__u16)~ip->check, ip->daddr, ndst[0]));
				ip->daddr = ndst[0];
			}
			return 0;
		}
		ip->saddr = nsrc[0];
		ip->daddr = ndst[0];
		if (v->csum_l3)
			ip->check = ~csum_fold32(csum_add32((__u16)~ip->check, v->csum_l3));
	} else {
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > end)
			return -1;
		if (p->proto == IPPROTO_ICMPV6 && p->l4off && icmp6_error(p->icmptype) && v->w == 0 &&
		    v->rtype == NT_REWRITE_IN && p->dir == DIR_IN) {
			/* as IPv4 above: the new destination only, and the
			 * ICMPv6 checksum, whose pseudo header holds it, by
			 * that change alone (the engine's setAddr) */
			__u32 od[4];

			__builtin_memcpy(od, &ip6->daddr, 16);
			l4a = 0;
			for (int i = 0; i < 4; i++)
				if (od[i] != ndst[i])
					l4a = csum_words32(l4a, od[i], ndst[i]);
			__builtin_memcpy(&ip6->daddr, ndst, 16);
			dstonly = 1;
		} else {
			__builtin_memcpy(&ip6->saddr, nsrc, 16);
			__builtin_memcpy(&ip6->daddr, ndst, 16);
		}
	}
	if (p->l4off && !dstonly) {
		__u8 *l4 = data + (p->l4off & 0x3ff);

		/* ports: 4 bytes (an IPv6 TCP header cut short may hold no
		 * more); anything else: 8 */
		if ((void *)(l4 + ((p->pflags & PF_TCPUDP) ? 4 : 8)) > end)
			return -1;
		if (p->pflags & PF_TCPUDP) {
			*(__u16 *)l4 = sp;
			*(__u16 *)(l4 + 2) = dp;
		} else if (p->pflags & PF_ICMPQ) {
			*(__u16 *)(l4 + 4) = sp;
		}
	}
	if (!p->csumoff)
		return 0;
	/* the engine turns a UDP sum that comes out 0 into 0xffff; so does
	 * the helper, which skips a zero field, as only an IPv6 UDP packet
	 * (where zero is invalid) reaches here with */
	mf = p->proto == IPPROTO_UDP && !p->udp0 ? BPF_F_MARK_MANGLED_0 : 0;
	summed = ip_summed(skb);
	if (summed != CHECKSUM_COMPLETE) {
		/* the field is written directly, as bpf_l4_csum_replace would
		 * have it: a CHECKSUM_PARTIAL skb holds only the pseudo
		 * header's sum there (the ports are summed later), any other
		 * the whole sum; CHECKSUM_COMPLETE needs skb->csum kept, which
		 * only the helper can do */
		__u16 *ck = data + (p->csumoff & 0x3ff);
		__u32 diff = 0;

		if ((void *)(ck + 1) > end)
			return -1;
		if (l4a && p->proto != IPPROTO_ICMP)
			diff = l4a;
		if (summed == CHECKSUM_PARTIAL) {
			if (diff)
				*ck = csum_fold32(csum_add32(*ck, diff));
		} else {
			if (v->csum_l4p && p->l4off && (p->pflags & (PF_TCPUDP | PF_ICMPQ)))
				diff = csum_add32(diff, v->csum_l4p);
			if (diff)
				*ck = ~csum_fold32(csum_add32(diff, (__u16)~*ck));
		}
		if (mf && *ck == 0)
			*ck = 0xffff;
		return 0;
	}
	if (l4a && p->proto != IPPROTO_ICMP)
		bpf_l4_csum_replace(skb, p->csumoff, 0, l4a, BPF_F_PSEUDO_HDR | mf);
	if (v->csum_l4p && p->l4off && (p->pflags & (PF_TCPUDP | PF_ICMPQ)))
		bpf_l4_csum_replace(skb, p->csumoff, 0, v->csum_l4p, mf);
	return 0;
}

/* ------------------------------------------------------------ sessions */

static __always_inline void hm_release(__u32 rule_id, __u16 port, __u8 family, const __u32 *src, const __u32 *dst)
{
	struct nat_hm_key hk = {};
	struct nat_hm *h;

	hk.rule_id = rule_id;
	hk.port = port;
	hk.family = family;
	words_cp(hk.src, src);
	words_cp(hk.dst, dst);
	h = bpf_map_lookup_elem(&hostmaps, &hk);
	if (h && __sync_fetch_and_add(&h->ref, -1) <= 1)
		bpf_map_delete_elem(&hostmaps, &hk);
}

/* sessions is preallocated as fast4 is (struct nat_fast4): an entry
 * deleted goes back to a free list at once and another CPU's next insert,
 * of any key, may write it while a packet still holds the pointer its
 * lookup returned. An entry's seq is its session's (unique: NCFG_SEQ
 * counts from 1; a shadow's copy and a wildcard's session keep it, with
 * the same tuple), and every delete marks the entry first, seq
 * SSEQ_DEAD, which no session has (sess_kill, sess_del). So a reader
 * (sess_pin, sess_held) that reads the same live seq before and after
 * what it takes from an entry took it from one session; that the entry
 * was its key's when the first read came (it may have been reused whole
 * already) it checks by the key the entry's tuple gives (sess_keyed).
 * A packet that applied an entry which changed meanwhile is dropped as
 * BadNAT: it may carry another session's addresses (nat_finish). */
#define SSEQ_DEAD 0

/* sess_kill marks entry v dead if it is still session seq's: one
 * compare-and-swap, so of two CPUs ending a session one wins, and an
 * entry reused by another session meanwhile is not touched. */
static __always_inline int sess_kill(struct nat_sess *v, __u64 seq)
{
	return seq != SSEQ_DEAD && __sync_val_compare_and_swap(&v->seq, seq, SSEQ_DEAD) == seq;
}

/* sess_unlink deletes the entry of session seq at key k, marked first.
 * An entry of another session there (a newer one took the key since the
 * caller read it) is left alone. mark says what it returns: 0, the
 * delete's result (-1 for another session's entry; with no entry at k
 * the delete is still tried: sess_del); 1, whether this call marked the
 * entry (sess_del_mark: of two CPUs ending one entry exactly one counts
 * it, and the shadow count is kept by whoever marks a shadow entry; with
 * no entry at k nothing is deleted). */
static __always_inline int sess_unlink(const struct nat_key *k, __u64 seq, int mark)
{
	struct nat_sess *v = bpf_map_lookup_elem(&sessions, k);
	int mine = 0, r;

	if (v) {
		mine = sess_kill(v, seq);
		if (!mine && READ_ONCE64(v->seq) != SSEQ_DEAD)
			return mark ? 0 : -1;
	} else if (mark) {
		return 0;
	}
	r = bpf_map_delete_elem(&sessions, k);
	return mark ? mine : r;
}

static __always_inline int sess_del(const struct nat_key *k, __u64 seq)
{
	return sess_unlink(k, seq, 0);
}

static __always_inline int sess_del_mark(const struct nat_key *k, __u64 seq)
{
	return sess_unlink(k, seq, 1);
}

/* key_same reports whether two keys are the same, word by word. */
static __always_inline int key_same(const struct nat_key *a, const struct nat_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	for (int i = 0; i < (int)(sizeof(*a) / 4); i++)
		if (x[i] != y[i])
			return 0;
	return 1;
}

/* sess_keyed reports whether entry v belongs under key k: every entry
 * is entered under the key its tuple gives (fwd_key for the forward
 * entry, rev_key for the reply; a shadow or a wildcard with a flag in
 * dir and a generation in pad, not compared). */
static __always_inline int sess_keyed(const struct nat_key *k, const struct nat_sess *v)
{
	if (k->proto != v->proto || k->family != v->family || (k->dir & 1) != ((v->sdir ^ v->w) & 1))
		return 0;
	if (v->w == 0)
		return k->sport == v->t.osport && k->dport == v->t.odport && words_eq(k->src, v->t.osrc) &&
		       words_eq(k->dst, v->t.odst);
	return k->sport == v->t.ndport && k->dport == v->t.nsport && words_eq(k->src, v->t.ndst) &&
	       words_eq(k->dst, v->t.nsrc);
}

/* sess_pin is the seq of entry v, found at key k, for sess_held after
 * the reader took what it needs; 0 when v is not to be used (marked, or
 * already another key's: as if the lookup had missed). */
static __always_inline __u64 sess_pin(const struct nat_key *k, const struct nat_sess *v)
{
	__u64 s = READ_ONCE64(v->seq);

	barrier();
	if (s == SSEQ_DEAD || !sess_keyed(k, v))
		return 0;
	return s;
}

/* sess_pin_call is sess_pin as a call of its own, for nat_run, whose
 * frame is in the deepest call chain (the ftp proxy's): inline, the
 * check would take it over the verifier's 512 bytes of stack. */
static __attribute__((noinline)) __u64 sess_pin_call(const struct nat_key *k, const struct nat_sess *v)
{
	return sess_pin(k, v);
}

/* sess_held reports whether entry v was session s's all the while since
 * sess_pin gave s. */
static __always_inline int sess_held(const struct nat_sess *v, __u64 s)
{
	barrier();
	return READ_ONCE64(v->seq) == s;
}

/* sess_delete removes the session whose entry key/v is: both entries,
 * its host map reference, its proxy state. Only the caller that marks
 * the entry (sess_kill) goes on, so a timer and a flush racing for one
 * session count it once. */
static __always_inline int sess_delete(struct nat_key *key, struct nat_sess *v, __u32 stat)
{
	__u64 seq = READ_ONCE64(v->seq), *c;
	struct nat_key k, peer;
	__u32 osrc[4], odst[4], hm_rule;
	__u16 hm_port;
	__u8 sflags, family;

	barrier();
	k = *key;
	peer = v->peer;
	hm_rule = v->hm_rule;
	hm_port = v->hm_port;
	sflags = v->sflags;
	family = v->family;
	words_cp(osrc, v->t.osrc);
	words_cp(odst, v->t.odst);
	/* what was read above is session seq's if the mark succeeds */
	if (!sess_kill(v, seq))
		return 0;
	/* the reply entry's key again, after the mark: a new session moving
	 * the reply entry aside (shadow) writes its new key here, and either
	 * that write came before the mark and is read now, or the mover's
	 * check after its write sees the mark and ends its copy itself (the
	 * mark and that check are both full barriers). Read only before the
	 * mark, the moved copy was left: an entry no timer ends, and the
	 * shadow count one too high (nat18). A key read while being
	 * written is used only if it holds this session's live entry. */
	{
		struct nat_key np = v->peer;
		struct nat_sess *pv;

		if (!key_same(&np, &peer)) {
			pv = bpf_map_lookup_elem(&sessions, &np);
			if (pv && READ_ONCE64(pv->seq) == seq)
				peer = np;
		}
	}
	/* the fast twins first, while the session still holds its keys: no
	 * new session can make a twin of k or peer meanwhile, which
	 * fast_gone, which deletes by key, could delete unmarked (struct
	 * nat_fast4) */
	fast_gone(&k);
	fast_gone(&peer);
	if (bpf_map_delete_elem(&sessions, &k) != 0)
		return 0;
	/* a shadow reply entry is counted off by whoever marks it (its
	 * mover, when it ends its copy itself) */
	if (!sess_del_mark(&peer, seq))
		peer.dir &= ~DIR_SHADOW;
	if ((k.dir | peer.dir) & DIR_SHADOW) {
		c = cfgp(NCFG_SHADOWS);
		if (c)
			__sync_fetch_and_add(c, -(!!(k.dir & DIR_SHADOW) + !!(peer.dir & DIR_SHADOW)));
	}
	c = cfgp(NCFG_COUNT);
	if (c)
		__sync_fetch_and_add(c, -1);
	if (sflags & SF_WILD) {
		c = cfgp(NCFG_WILDS);
		if (c)
			__sync_fetch_and_add(c, -1);
	}
	if (sflags & SF_HM)
		hm_release(hm_rule, hm_port, family, osrc, odst);
	if (sflags & SF_PROXY) {
		seq *= 2;
		bpf_map_delete_elem(&ftps, &seq);
		seq++;
		bpf_map_delete_elem(&ftps, &seq);
	}
	stat_inc(stat);
	return 1;
}

/* sess_expiry is when the session ends: the last packet's time plus the
 * lifetime the engine would give after it (flags only grow, so those of
 * the last packet are the final ones). */
static __always_inline __u64 sess_expiry(const struct nat_key *k, struct nat_sess *v)
{
	struct dyn d0, d1 = {};
	struct nat_sess *r;

	if (v->sflags & SF_WILD)
		return v->deadline;
	d0 = dyn_of(k, v);
	r = bpf_map_lookup_elem(&sessions, &v->peer);
	if (r)
		d1 = dyn_of(&v->peer, r);
	if (d1.last > d0.last)
		return d1.last + lifetime(v->age[1], v->proto, v->pflags, 1, d0.tcpflags, d1.tcpflags) * TICK_NS;
	return d0.last + lifetime(v->age[0], v->proto, v->pflags, 0, d0.tcpflags, d1.tcpflags) * TICK_NS;
}

static int sess_timer(void *map, struct nat_key *key, struct nat_sess *v)
{
	__u64 now = now_ns(), exp = sess_expiry(key, v);

	if (cfg(NCFG_NOEXPIRE)) {
		/* differential tests compare with an engine whose sessions
		 * never age (as ipftest's) */
		bpf_timer_start(&v->timer, 3600 * 1000000000ULL, 0);
		return 0;
	}
	/* a timer that cannot be started again (only an entry being
	 * deleted meanwhile: it was marked first, and sess_delete does
	 * nothing) would leave the session with none: it ends now */
	if (exp > now && bpf_timer_start(&v->timer, exp - now, 0) == 0)
		return 0;
	sess_delete(key, v, NS_EXPIRED);
	return 0;
}

/* entry_csum fills the checksum differences of rewriting (os, od, osp,
 * odp) into (ns, nd, nsp, ndp); unchanged words add nothing, as the
 * engine skips unchanged fields. */
static __always_inline void entry_csum(struct nat_sess *e, const __u32 *os, const __u32 *od, __u16 osp, __u16 odp,
				       const __u32 *ns, const __u32 *nd, __u16 nsp, __u16 ndp, int v6, __u8 pflags)
{
	__u32 a = 0, pt = 0;
	int n = v6 ? 4 : 1;

	for (int i = 0; i < 4; i++) {
		if (i >= n)
			break;
		if (os[i] != ns[i])
			a = csum_words32(a, os[i], ns[i]);
		if (od[i] != nd[i])
			a = csum_words32(a, od[i], nd[i]);
	}
	e->csum_l3 = v6 ? 0 : a;
	e->csum_l4a = a;
	if (pflags & PF_TCPUDP) {
		if (osp != nsp)
			pt = csum_word(pt, osp, nsp);
		if (odp != ndp)
			pt = csum_word(pt, odp, ndp);
	} else if ((pflags & PF_ICMPQ) && osp != nsp) {
		pt = csum_word(pt, osp, nsp);
	}
	e->csum_l4p = pt;
}

static __always_inline void fwd_key(struct nat_key *k, const struct nat_tuple *t, __u8 dir, __u8 proto, __u8 family)
{
	__builtin_memset(k, 0, sizeof(*k));
	words_cp(k->src, t->osrc);
	words_cp(k->dst, t->odst);
	k->sport = t->osport;
	k->dport = t->odport;
	k->proto = proto;
	k->dir = dir;
	k->family = family;
}

static __always_inline void rev_key(struct nat_key *k, const struct nat_tuple *t, __u8 dir, __u8 proto, __u8 family)
{
	__builtin_memset(k, 0, sizeof(*k));
	words_cp(k->src, t->ndst);
	words_cp(k->dst, t->nsrc);
	k->sport = t->ndport;
	k->dport = t->nsport;
	k->proto = proto;
	k->dir = dir ^ 1;
	k->family = family;
}

/* sess_arm starts the timer of the forward entry of session seq at key k,
 * just entered. bpf_timer_init fails now and then: from 6.18 it takes
 * its memory with kmalloc_nolock, which gives up (ENOMEM) where a
 * spinning allocation would wait, for single sessions and for every
 * session made during a second or so at a time (docs/datapath-cost.md,
 * "A session that outlived its lifetime", and "Timers the kernel would
 * not allocate"). Refusing such a session (nat18) dropped every new flow
 * of such a second: 10 to 15 SYNs in a row in TestPrivilegedNATPortmapClash.
 * So the session is made all the same, counted in the sweeper's untimed
 * (and NS_NOTIMER): the sweeper, whose one timer was allocated at load,
 * gives it a timer on a later tick or ends it when its lifetime is over.
 * Its packets are translated meanwhile as any session's. -EBUSY is a
 * timer the sweeper set first (it met the entry between its insert and
 * this call): it is started here all the same. Returns -1 only when the
 * entry at k is not session seq's (ended and its key taken since): the
 * caller then undoes what it entered. */
#ifndef ENOMEM
#define ENOMEM 12
#endif
#ifndef EBUSY
#define EBUSY 16
#endif
static __always_inline int sess_arm(struct nat_key *k, __u64 in_ns, __u64 seq)
{
	struct nat_sess *v;
	struct nat_sweeper *sw;
	__u32 zero = 0;
	long r = -ENOMEM;

	v = bpf_map_lookup_elem(&sessions, k);
	if (!v || READ_ONCE64(v->seq) != seq)
		return -1;
	sw = bpf_map_lookup_elem(&sweeper, &zero);
	if (!sw)
		return -1;
	/* a second try only: the first failures come alone, the rest in
	 * bursts that no number of tries gets through */
	if (!READ_ONCE64(sw->fault)) {
		r = bpf_timer_init(&v->timer, &sessions, CLOCK_MONOTONIC);
		if (r == -ENOMEM)
			r = bpf_timer_init(&v->timer, &sessions, CLOCK_MONOTONIC);
		if (r == -EBUSY)
			r = 0;
	}
	if (r != 0 || bpf_timer_set_callback(&v->timer, sess_timer) != 0 || bpf_timer_start(&v->timer, in_ns, 0) != 0) {
		stat_inc(NS_NOTIMER);
		__sync_fetch_and_add(&sw->untimed, 1);
	}
	return 0;
}

/* ---------------------------------------------------------------- sweeper */

struct sweep_ctx {
	struct nat_sweeper *sw;
	__u64 now;
};

/* sweep_cb gives forward entry key/v its timer if it has none (a
 * bpf_timer_init that succeeds: -EBUSY is one that runs), or ends the
 * session if its lifetime is over, or counts it for the next sweep. */
static long sweep_cb(void *map, struct nat_key *key, struct nat_sess *v, struct sweep_ctx *c)
{
	struct nat_sweeper *sw = c->sw;
	__u64 exp;
	long r = -ENOMEM;

	if (v->w != 0 || READ_ONCE64(v->seq) == SSEQ_DEAD)
		return 0;
	if (sw->fault != SWF_ALL)
		r = bpf_timer_init(&v->timer, &sessions, CLOCK_MONOTONIC);
	if (r == -EBUSY)
		return 0;
	exp = sess_expiry(key, v);
	if (r == 0 && bpf_timer_set_callback(&v->timer, sess_timer) == 0 &&
	    bpf_timer_start(&v->timer, exp > c->now ? exp - c->now : 1, 0) == 0) {
		__sync_fetch_and_add(&sw->armed, 1);
		return 0;
	}
	if (exp <= c->now) {
		if (sess_delete(key, v, NS_EXPIRED))
			__sync_fetch_and_add(&sw->ended, 1);
		return 0;
	}
	__sync_fetch_and_add(&sw->untimed, 1);
	return 0;
}

/* nat_sweep walks the session table when sessions were made without a
 * timer since the last walk (none: it costs a read). Sessions made
 * without one during the walk count for the next. In ipftest's mode
 * sessions need no timer: the count waits for the mode's end. */
static __always_inline void nat_sweep(struct nat_sweeper *sw)
{
	struct sweep_ctx c = {};
	__u64 n = READ_ONCE64(sw->untimed);

	if (n == 0 || cfg(NCFG_NOEXPIRE))
		return;
	__sync_fetch_and_add(&sw->untimed, -n);
	c.sw = sw;
	c.now = now_ns();
	bpf_for_each_map_elem(&sessions, sweep_cb, &c, 0);
	__sync_fetch_and_add(&sw->walks, 1);
}

/* The sweeper's period is IPFilter's tick, at which its slow timer
 * expires NAT sessions (ipf_nat_expire). */
static int sweeper_timer(void *map, __u32 *key, struct nat_sweeper *sw)
{
	nat_sweep(sw);
	bpf_timer_start(&sw->timer, TICK_NS, 0);
	return 0;
}

/* sess_take reports whether entry v applies to a packet on ifindex,
 * binding it there if it is not bound yet: a `*` rule's session is bound
 * in each direction by the first lookup that finds it (a packet, the
 * clash check of a new session, an ICMP error's lookup), as IPFilter's
 * ipf_nat_inlookup and ipf_nat_outlookup fill an empty nat_ifps slot
 * (the engine's takeIf). Two CPUs may race to bind one entry: the
 * compare-and-swap lets the first writer win, and the other sees the
 * entry bound to another interface, as if its packet had come second
 * (it goes on down the chain, or makes a session of its own). The fast
 * twin follows in apply. */
static __always_inline int sess_take(struct nat_sess *v, __u32 ifindex)
{
	__u64 *word = (__u64 *)&v->ifindex, old, cur;
	__u32 now = v->ifindex;

	if (now == ifindex)
		return 1;
	if (now != 0)
		return 0;
	/* little-endian (bpfel): ifindex is the low half */
	old = (__u64)v->sifindex << 32;
	cur = __sync_val_compare_and_swap(word, old, old | ifindex);
	return cur == old || (__u32)cur == ifindex;
}

/* shadow_undo ends shadow()'s copy at sk of session seq's entry, if no
 * other CPU marked it first, and counts it off. */
static __always_inline void shadow_undo(const struct nat_key *sk, __u64 seq)
{
	__u64 *c;

	if (!sess_del_mark(sk, seq))
		return;
	c = cfgp(NCFG_SHADOWS);
	if (c)
		__sync_fetch_and_add(c, -1);
}

/* shadow moves the entry at key k, if any, out of the way of a new
 * session: to the same key with DIR_SHADOW set, where no packet finds it,
 * its peer pointing there. The session it belongs to lives on (listed,
 * found by its other entry, ended by its timer), as in the engine, whose
 * table assignment leaves an older session reachable only by the key a
 * newer one did not take; lookups walk the shadows of a key when its
 * entry does not apply or is gone (sess_find), as IPFilter's walk a hash
 * chain. Returns 1 when it moved an entry, 0 when there was none, -1 when
 * it cannot, 2 when adopt is set and the entry applies on ifindex (see
 * sess_insert: it is left in place, bound there). */
static __always_inline int shadow(struct work *w, struct nat_key *k, int adopt, __u32 ifindex)
{
	struct nat_sess *old = bpf_map_lookup_elem(&sessions, k), *peer;
	struct nat_sess *cp = (struct nat_sess *)w->sb3;
	struct nat_key *sk = &w->x.rk2;
	__u64 life = 0, *c;
	int g, live;

	if (!old)
		return 0;
	if (adopt && sess_take(old, ifindex))
		return 2;
	if (k->dir & DIR_SHADOW)
		return -1;
	/* a copy of one session's entry, or none: an entry ending on
	 * another CPU now (marked) is not moved, and the new session's
	 * insert finds its key taken (sess_insert) */
	w->pin = sess_pin(k, old);
	if (!w->pin)
		return -1;
	copy_sess(cp, old);
	if (!sess_held(old, w->pin))
		return -1;
	{
		/* the fast twin goes (no packet finds a shadow) and gives
		 * the entry back its per-packet fields */
		struct nat_fast *f = fast_of(k);

		if (f) {
			cp->last = f->last;
			cp->tcpflags = f->tcpflags;
			cp->pkts += f->pkts;
			cp->bytes += f->bytes;
			slot_dyn(k, &cp->last, &cp->tcpflags, &cp->pkts, &cp->bytes);
		}
	}
	/* shadows stack: each takes the first free generation (key.pad) */
	*sk = *k;
	sk->dir |= DIR_SHADOW;
	for (g = 1; g < 16; g++) {
		sk->pad = g;
		if (!bpf_map_lookup_elem(&sessions, sk))
			break;
	}
	if (g == 16)
		return -1;
	if (cp->w == 0) {
		__u64 now = now_ns(), exp = sess_expiry(k, old);

		life = exp > now ? exp - now : 1;
	}
	if (bpf_map_update_elem(&sessions, sk, cp, BPF_NOEXIST) != 0)
		return -1;
	/* counted as soon as it is entered, before its key is published
	 * (the peer's back-pointer below), since whoever marks it counts
	 * it off (sess_delete) */
	c = cfgp(NCFG_SHADOWS);
	if (c)
		__sync_fetch_and_add(c, 1);
	/* the copy's timer before anything is changed (the sweeper's if the
	 * kernel gives none: sess_arm); an entry gone meanwhile undoes the
	 * move (the entry at k keeps its own) */
	if (cp->w == 0 && sess_arm(sk, life, cp->seq) != 0) {
		shadow_undo(sk, cp->seq);
		return -1;
	}
	/* marked, for a packet that holds it (its copy at sk is the same
	 * session's: that packet is dropped, nat_finish). A forward entry
	 * another CPU marked first is being ended there (its timer, a
	 * flush: sess_delete, which deletes k and the peer and counts the
	 * end) or moved by another new session's shadow: the copy goes,
	 * uncounted, and k and the peer's back-pointer are left to that CPU.
	 * Deleting k here made the ender's delete of k fail, and with the
	 * copy left (its own timer) the session was counted ended twice, or
	 * the ender left the peer and the count behind; a second mover's
	 * copy was a second live copy of one session (nat18). The packet's
	 * new session is not made (-1: INSERTFAIL), as when the pin fails.
	 * A reply entry (w 1, no timer; its ender comes from the forward
	 * entry, sess_del) is taken over as before. */
	if (!sess_kill(old, cp->seq) && cp->w == 0) {
		shadow_undo(sk, cp->seq);
		return -1;
	}
	peer = bpf_map_lookup_elem(&sessions, &cp->peer);
	/* not an entry another session has taken since */
	live = peer && READ_ONCE64(peer->seq) == cp->seq;
	if (live)
		peer->peer = *sk;
	/* A reply entry's session may be ending meanwhile (its forward
	 * entry marked: its timer, a flush). The ender reads the reply's key
	 * after its mark: if this write came first, it finds the copy; if
	 * not, the check here (a compare-and-swap that changes nothing, a
	 * full barrier after the write) sees the mark, and the copy, which
	 * that ender may not know, is ended here. Whoever marks the copy
	 * ends it and counts it off. A forward entry's copy has its own
	 * timer. */
	if (cp->w != 0 && (!live || __sync_val_compare_and_swap(&peer->seq, cp->seq, cp->seq) != cp->seq))
		shadow_undo(sk, cp->seq);
	bpf_map_delete_elem(&sessions, k);
	fast_gone(k);
	return 1;
}

/* no_twin notes that an entry which a TCP or UDP packet's key can find
 * has no fast twin (a proxy's session or its data connection's, or a
 * full fast table): from then on fast_miss looks such packets up in the
 * session table before it leaves them alone. Sticky (a new datapath
 * starts without it): one session of the kind makes the shortcut what
 * it was before this note existed, no worse. */
static __always_inline void no_twin(void)
{
	__u64 *c = cfgp(NCFG_NOTWIN);

	if (c && !*c)
		*c = 1;
}

/* fast_add makes the fast twin of entry e (at key k) when the fast path
 * can do its packets: TCP or UDP, no proxy, not a wildcard or a proxy's
 * data connection. Without one (the table is full), the entry's packets
 * go the whole way. */
static __always_inline void fast_add(struct work *w, const struct nat_key *k, const struct nat_sess *e)
{
	struct nat_fast6 *f6 = &w->fb;
	struct nat_fast4 *f4 = &w->fb4;
	int v6 = fast6_ok(k);
	struct nat_fast *f = v6 ? &f6->f : &f4->f;
	__u32 q, *old;

	/* no key the fast path reads (another protocol, a wildcard) */
	if (!v6 && !fkey_of(&w->fk4, k))
		return;
	if (e->sflags & (SF_PROXY | SF_SLAVE | SF_WILD)) {
		no_twin();
		return;
	}
	if (e->w == 0) {
		f->nsrc = e->t.nsrc[0];
		f->ndst = e->t.ndst[0];
		f->nsport = e->t.nsport;
		f->ndport = e->t.ndport;
		words_cp(f6->nsrc, e->t.nsrc);
		words_cp(f6->ndst, e->t.ndst);
	} else {
		f->nsrc = e->t.odst[0];
		f->ndst = e->t.osrc[0];
		f->nsport = e->t.odport;
		f->ndport = e->t.osport;
		words_cp(f6->nsrc, e->t.odst);
		words_cp(f6->ndst, e->t.osrc);
	}
	f->ifindex = e->ifindex;
	f->csum_l3 = e->csum_l3;
	f->csum_l4a = e->csum_l4a;
	f->csum_l4p = e->csum_l4p;
	f->flags = e->mss ? FF_MSS : 0;
	f->tcpflags = e->tcpflags;
	f->pad = 0;
	f->last = e->last;
	f->pkts = 0;
	f->bytes = 0;
	/* made with an odd seq, whole when the insert is done (struct
	 * nat_fast4); an entry it replaces is marked first, as at its end */
	q = fseq_next();
	if (v6) {
		f6->k = *k;
		f6->seq = q + 1;
		f6->pad = 0;
		old = bpf_map_lookup_elem(&fast6, k);
		if (old)
			fseq_kill(&((struct nat_fast6 *)old)->seq);
		if (bpf_map_update_elem(&fast6, k, f6, BPF_ANY)) {
			no_twin();
			return;
		}
		old = bpf_map_lookup_elem(&fast6, k);
		if (old)
			fseq_publish(&((struct nat_fast6 *)old)->seq, q);
		return;
	}
	f4->k = w->fk4;
	f4->seq = q + 1;
	f4->pad = 0;
	old = bpf_map_lookup_elem(&fast4, &w->fk4);
	if (old)
		fseq_kill(&((struct nat_fast4 *)old)->seq);
	if (bpf_map_update_elem(&fast4, &w->fk4, f4, BPF_ANY)) {
		no_twin();
		return;
	}
	old = bpf_map_lookup_elem(&fast4, &w->fk4);
	if (old)
		fseq_publish(&((struct nat_fast4 *)old)->seq, q);
	slot_fill(k, &w->fk4, f);
}

/* sess_insert enters the session described by w->ns (made by packet
 * w->p, rule rtype/age/mss) as two entries. Returns 0 on success; the
 * entries are w->k (forward) and w->s2's peer (reply).
 *
 * Another CPU may be making the session of the same flow at the same
 * moment: both packets' lookups missed, both ran the rules. IPFilter,
 * whose NAT lock serialises this, makes one session and translates the
 * second packet by it, as a lookup would. So does this: when the forward
 * key (the packet's own key) holds an entry that applies to the packet
 * here (it would have found it, had it come a moment later), that entry
 * is the packet's session and nothing is made (returns 1, w->k its key,
 * counted NS_RACED). Checked where the key is taken over (shadow, which
 * would otherwise move the other CPU's new session out of the way and
 * leave that CPU's packet with no session at its key) and again when the
 * insert finds the key taken. Not for a packet whose lookup key is not
 * its forward key (a cut TCP header's portless session, which takes over
 * the key by design; an ICMP packet looked up by bytes 4-5): these keep
 * the old way, and a packet that then finds no session is dropped
 * (nat_slow). */
static __always_inline int sess_insert(struct work *w, __u8 rtype, __u32 age0, __u32 age1, __u16 mss, __u8 sflags,
				       __u64 now, __u64 life_ns)
{
	struct pkt *p = &w->p;
	struct newsess *ns = &w->ns;
	struct nat_sess *e = WS(w), *r = WS2(w);
	struct nat_key *rk = &w->x.rk;
	int v6 = p->family == 6, adopt, g;
	__u8 dir = p->dir;
	__u64 *c;

	__builtin_memset(e, 0, sizeof(*e));
	e->t = ns->t;
	e->sifindex = p->ifindex;
	e->ifin = ns->ifin;
	e->ifout = ns->ifout;
	e->rule_id = ns->rule_id;
	e->age[0] = age0;
	e->age[1] = age1;
	e->mss = mss;
	e->sdir = dir;
	e->proto = p->proto;
	e->family = p->family;
	e->pflags = p->pflags;
	e->sflags = sflags;
	e->rtype = rtype;
	if (ns->hm_on) {
		e->sflags |= SF_HM;
		e->hm_rule = ns->hm_rule;
		e->hm_port = ns->hm_port;
	}
	c = cfgp(NCFG_SEQ);
	if (c)
		e->seq = __sync_fetch_and_add(c, 1) + 1;
	e->last = now;
	copy_sess(r, e);
	e->w = 0;
	r->w = 1;
	r->last = 0;
	e->ifindex = dir == DIR_IN ? ns->ifin : ns->ifout;
	r->ifindex = dir == DIR_IN ? ns->ifout : ns->ifin;
	entry_csum(e, ns->t.osrc, ns->t.odst, ns->t.osport, ns->t.odport, ns->t.nsrc, ns->t.ndst, ns->t.nsport,
		   ns->t.ndport, v6, p->pflags);
	entry_csum(r, ns->t.ndst, ns->t.nsrc, ns->t.ndport, ns->t.nsport, ns->t.odst, ns->t.osrc, ns->t.odport,
		   ns->t.osport, v6, p->pflags);
	fwd_key(&w->k, &ns->t, dir, p->proto, p->family);
	rev_key(rk, &ns->t, dir, p->proto, p->family);
	e->peer = *rk;
	r->peer = w->k;
	adopt = !p->cutnew && !p->nq;
	/* a key another session holds (it was made on another interface)
	 * is taken over, as the engine's table assignment does; one that
	 * applies here is another CPU's session of this very flow */
	g = shadow(w, &w->k, adopt, p->ifindex);
	if (g == 2)
		goto raced;
	if (g < 0 || shadow(w, rk, 0, 0) < 0) {
		stat_inc(p->dir * NS_SIDE + NS_INSERTFAIL);
		return -1;
	}
	/* older sessions may share its keys (shadows): its lookups walk
	 * them when it does not apply (sess_find) */
	if (cfg(NCFG_SHADOWS)) {
		e->sflags |= SF_CHAIN;
		r->sflags |= SF_CHAIN;
	}
	if (bpf_map_update_elem(&sessions, &w->k, e, BPF_NOEXIST) != 0) {
		struct nat_sess *v = bpf_map_lookup_elem(&sessions, &w->k);

		if (adopt && v && sess_take(v, p->ifindex))
			goto raced;
		stat_inc(p->dir * NS_SIDE + NS_INSERTFAIL);
		return -1;
	}
	/* the timer first, while nothing else of the session is entered
	 * (a session made without one is the sweeper's: sess_arm) */
	if (!bench_at(ST_NOARM) && sess_arm(&w->k, life_ns, e->seq) != 0) {
		sess_del(&w->k, e->seq);
		stat_inc(p->dir * NS_SIDE + NS_INSERTFAIL);
		return -1;
	}
	if (bpf_map_update_elem(&sessions, rk, r, BPF_NOEXIST) != 0) {
		sess_del(&w->k, e->seq);
		stat_inc(p->dir * NS_SIDE + NS_INSERTFAIL);
		return -1;
	}
	c = cfgp(NCFG_COUNT);
	if (c)
		__sync_fetch_and_add(c, 1);
	if (!bench_at(ST_NOTWIN)) {
		fast_add(w, &w->k, e);
		fast_add(w, rk, r);
	}
	stat_inc(p->dir * NS_SIDE + NS_ADDED);
	return 0;
raced:
	stat_raced(w, p->dir);
	return 1;
}

/* ---------------------------------------------------------------- rules */

static __always_inline int port_cmp(__u8 op, __u16 p, __u16 a, __u16 b)
{
	switch (op) {
	case PO_NONE:
		return 1;
	case PO_EQ:
		return p == a;
	case PO_NE:
		return p != a;
	case PO_LT:
		return p < a;
	case PO_GT:
		return p > a;
	case PO_LE:
		return p <= a;
	case PO_GE:
		return p >= a;
	case PO_OUT:
		return p < a || p > b;
	case PO_IN:
		return p > a && p < b;
	case PO_RANGE:
		return p >= a && p <= b;
	}
	return 0;
}

static __always_inline int op_match(const struct nat_op *o, struct a128 a)
{
	return a_eq(a_and(a, op_m(o)), op_a(o));
}

/* rule_matches is the engine's ruleMatches (without the filter's tag,
 * which rules cannot carry live). */
static __always_inline int rule_matches(const struct nat_rule *r, const struct pkt *p, struct a128 src, struct a128 dst)
{
	__u32 f = r->flags, ifx = p->dir == DIR_OUT ? r->outif : r->inif, rf = 0;
	__u16 sp = bpf_ntohs(p->sport), dp = bpf_ntohs(p->dport);

	if (!!(f & RF_V6) != (p->family == 6))
		return 0;
	if (ifx && ifx != p->ifindex)
		return 0;
	if (f & RF_ICMPIDMAP) {
		/* icmpidmap makes the rule's protocol ICMP (1), even in IPv6,
		 * queries or not (the engine's icmpID) */
		if (p->proto != IPPROTO_ICMP)
			return 0;
		/* a port test makes it tcp/udp too: queries only (the engine's
		 * icmpID) */
		if ((f & RF_IDMAPQ) && !(p->pflags & PF_ICMPQ))
			return 0;
	} else {
		if (!((f & RF_TCP) && (f & RF_UDP)) && r->proto && p->proto != r->proto)
			return 0;
		if (f & RF_TCP)
			rf |= PF_TCP;
		if (f & RF_UDP)
			rf |= PF_UDP;
		if (f & RF_ICMPQ)
			rf |= PF_ICMPQ;
		if (rf && !(rf & p->pflags))
			return 0;
	}
	if (p->fragbody && (rf & PF_TCPUDP))
		return 0;
	if (f & RF_FILTER) {
		if (op_match(&r->src, src) == !!(f & RF_NOTSRC) || op_match(&r->dst, dst) == !!(f & RF_NOTDST))
			return 0;
		if ((f & (RF_TCP | RF_UDP)) && (!port_cmp(r->sport_op, sp, r->sport_p1, r->sport_p2) ||
						!port_cmp(r->dport_op, dp, r->dport_p1, r->dport_p2)))
			return 0;
	} else if (r->type == NT_BIMAP && p->dir == DIR_IN) {
		if (!op_match(&r->nw, dst))
			return 0;
	} else if (p->dir == DIR_OUT) {
		if (!op_match(&r->orig, src))
			return 0;
	} else {
		if (!op_match(&r->orig, dst))
			return 0;
		if (r->oport_min && (dp < r->oport_min || dp > r->oport_max))
			return 0;
	}
	if ((f & RF_PROXY) && !(f & RF_FILTER) && r->proxy_port && dp != r->proxy_port)
		return 0;
	return 1;
}

/* nat_random is ipf_random(): the kernel's generator, or ipftest's
 * deterministic sequence when tests compare with the Go engine. */
static __always_inline __u32 nat_random(void)
{
	__u64 *calls, *last;
	__u32 n, number, l;

	if (!cfg(NCFG_RANDMODE))
		return bpf_get_prandom_u32();
	calls = cfgp(NCFG_RANDCALLS);
	last = cfgp(NCFG_RANDLAST);
	if (!calls || !last)
		return 0;
	n = (__u32)(*calls + 1);
	*calls = n;
	switch (n) {
	case 1:
		return 0;
	case 2:
		return 4;
	case 3:
		return 3999;
	case 4:
		return 4000;
	case 5:
		return 48999;
	case 6:
		return 49000;
	}
	l = *last ? (__u32)*last : 0xa5a5a5a5;
	number = l;
	l *= n;
	l++;
	*last = l;
	return number ^ l;
}

_Static_assert(__builtin_offsetof(struct nat_sess, ifindex) % 8 == 0 &&
		       __builtin_offsetof(struct nat_sess, sifindex) == __builtin_offsetof(struct nat_sess, ifindex) + 4,
	       "nat_sess.ifindex must open an aligned 64-bit word with sifindex (sess_take)");

/* The walk of a key's shadow generations (chain_best), one a step. */
struct chain_ctx {
	struct nat_key *k;
	__u64 best;
	__u32 ifindex;
	__u32 bg;
};

static long chain_step(__u32 i, struct chain_ctx *c)
{
	struct nat_sess *v;

	c->k->pad = i + 1;
	v = bpf_map_lookup_elem(&sessions, c->k);
	if (v && (v->ifindex == 0 || v->ifindex == c->ifindex) && v->seq > c->best) {
		c->best = v->seq;
		c->bg = i + 1;
	}
	return 0;
}

/* chain_best is the generation of the newest shadow under k (a shadow
 * key) that applies on ifindex, 0 if none. */
static __attribute__((noinline)) __u32 chain_best(struct nat_key *k, __u32 ifindex)
{
	struct chain_ctx c = { .k = k, .ifindex = ifindex };

	bpf_loop(15, chain_step, &c, 0);
	return c.bg;
}

/* sess_find is the engine's find: the session at key k that applies to a
 * packet on ifindex, bound there (sess_take). The entry at k is the
 * newest of the sessions that share the key; when it is bound to another
 * interface (and older ones may be shadowed under it: SF_CHAIN), or it
 * has ended while shadows live (NCFG_SHADOWS), the newest shadow that
 * applies is taken, as IPFilter's lookups walk a hash chain newest
 * first, skipping the sessions of other interfaces. Returns the entry
 * found, with k set to its key (a shadow's, maybe), NULL when none
 * applies. A shadow lost to a racing CPU is as none. deep: the caller
 * sits deep in the call chain (a clash check in a bpf_loop callback),
 * where no frame is left for chain_best's loop: the walk is inline. */
static __always_inline struct nat_sess *sess_find_at(struct nat_key *k, __u32 ifindex, int deep)
{
	struct nat_sess *v = bpf_map_lookup_elem(&sessions, k);
	__u64 best = 0;
	__u8 g, bg = 0, dir = k->dir;

	if (v && sess_take(v, ifindex))
		return v;
	if (dir & (DIR_SHADOW | DIR_WILD))
		return NULL;
	if (v ? !(v->sflags & SF_CHAIN) : !cfg(NCFG_SHADOWS))
		return NULL;
	k->dir = dir | DIR_SHADOW;
	if (deep) {
		/* two walks: the newest seq, then its generation. One walk
		 * that kept both made states that differ by the generation
		 * kept, under every state of the callers (nat_new_map's
		 * clash checks in map_step), and went over the verifier's
		 * million instructions on some hosts */
		for (g = 1; g < 16; g++) {
			k->pad = g;
			v = bpf_map_lookup_elem(&sessions, k);
			if (v && (v->ifindex == 0 || v->ifindex == ifindex) && v->seq > best)
				best = v->seq;
		}
		for (g = 1; g < 16 && best; g++) {
			k->pad = g;
			v = bpf_map_lookup_elem(&sessions, k);
			if (v && v->seq == best) {
				bg = g;
				break;
			}
		}
	} else {
		bg = chain_best(k, ifindex);
	}
	k->pad = bg;
	v = bg ? bpf_map_lookup_elem(&sessions, k) : NULL;
	if (v && sess_take(v, ifindex))
		return v;
	k->dir = dir;
	k->pad = 0;
	return NULL;
}

static __always_inline struct nat_sess *sess_find(struct nat_key *k, __u32 ifindex)
{
	return sess_find_at(k, ifindex, 0);
}

/* exists reports whether a live session has key k, whatever interface it
 * is bound to: the entry at k, or, when the newest session of the key has
 * ended while older ones live (NCFG_SHADOWS), any shadow under it, as the
 * engine's exists sees any session on the key's chain (a rewrite's clash
 * check, a proxy's data connection). The walk is inline (rewrite_step
 * runs in a bpf_loop callback) and leaves k as it was. */
static __always_inline int exists(struct nat_key *k)
{
	__u8 g, dir = k->dir, found = 0;

	if (bpf_map_lookup_elem(&sessions, k))
		return 1;
	if ((dir & (DIR_SHADOW | DIR_WILD)) || !cfg(NCFG_SHADOWS))
		return 0;
	k->dir = dir | DIR_SHADOW;
	for (g = 1; g < 16; g++) {
		k->pad = g;
		if (bpf_map_lookup_elem(&sessions, k)) {
			found = 1;
			break;
		}
	}
	k->dir = dir;
	k->pad = 0;
	return found;
}

/* nat_exists_on is exists for a new session's clash check, on the key in
 * the work area's k2: a session of that tuple on another interface is no
 * clash, and the check is a lookup that binds what it finds (the engine's
 * existsOn). k2 may be changed. A function of its own, verified once: the
 * walk of the key's shadows inline under each of its callers' states (the
 * allocation loops: map_step, nat_new_rdr) was most of the slow programs'
 * verification. It is the eighth frame of the deepest chain (the slow
 * program > nat_slow > nat_new > walk_step > nat_try > nat_new_map >
 * map_step > here): the walk is inline, no chain_best. */
GLOBAL int nat_exists_on(__u32 ifindex)
{
	struct work *w = get_work();

	if (!w)
		return 0;
	return sess_find_at(&w->k2, ifindex, 1) != NULL;
}

static __always_inline void key_of(struct nat_key *k, __u8 dir, __u8 proto, __u8 family, const __u32 *src,
				   const __u32 *dst, __u16 sp, __u16 dp)
{
	__builtin_memset(k, 0, sizeof(*k));
	words_cp(k->src, src);
	words_cp(k->dst, dst);
	k->sport = sp;
	k->dport = dp;
	k->proto = proto;
	k->dir = dir;
	k->family = family;
}

/* hm_get is the engine's hostmapGet with a rule: find (rule, src, dst,
 * port) and take a reference, or create it mapping to m. Returns the
 * reference count after taking it, 0 on failure; *found says whether it
 * existed, and nsrc/ndst get its addresses. */
static __always_inline __s64 hm_get(struct work *w, __u32 rule_id, __u16 port, __u8 family, const __u32 *src,
				    const __u32 *dst, const __u32 *m, __u32 *nsrc, __u32 *ndst)
{
	struct nat_hm_key *hk = &w->x.hk;
	struct nat_hm *h, *nh = &w->x.nh;
	__u64 *seq;

	__builtin_memset(hk, 0, sizeof(*hk));
	hk->rule_id = rule_id;
	hk->port = port;
	hk->family = family;
	words_cp(hk->src, src);
	words_cp(hk->dst, dst);
	h = bpf_map_lookup_elem(&hostmaps, hk);
	if (h) {
		__s64 ref = __sync_fetch_and_add(&h->ref, 1) + 1;

		words_cp(nsrc, h->nsrc);
		words_cp(ndst, h->ndst);
		stat_inc(NS_HMADD);
		return ref;
	}
	__builtin_memset(nh, 0, sizeof(*nh));
	words_cp(nh->nsrc, m);
	nh->ref = 1;
	seq = cfgp(NCFG_HMSEQ);
	if (seq)
		nh->seq = __sync_fetch_and_add(seq, 1) + 1;
	if (bpf_map_update_elem(&hostmaps, hk, nh, BPF_NOEXIST) != 0)
		return 0;
	words_cp(nsrc, nh->nsrc);
	words_cp(ndst, nh->ndst);
	stat_inc(NS_HMNEW);
	return -1; /* created: ref 1, not found */
}

/* hm_drop is hm_release for the packet path, with its key in w. */
static __always_inline void hm_drop(struct work *w, __u32 rule_id, __u16 port, __u8 family, const __u32 *src,
				    const __u32 *dst)
{
	struct nat_hm_key *hk = &w->x.hk;
	struct nat_hm *h;

	__builtin_memset(hk, 0, sizeof(*hk));
	hk->rule_id = rule_id;
	hk->port = port;
	hk->family = family;
	words_cp(hk->src, src);
	words_cp(hk->dst, dst);
	h = bpf_map_lookup_elem(&hostmaps, hk);
	if (h && __sync_fetch_and_add(&h->ref, -1) <= 1)
		bpf_map_delete_elem(&hostmaps, hk);
}

static __always_inline struct nat_rule *rule_at(__u32 slot, __u32 idx)
{
	__u32 k = slot * NAT_MAX_RULES + (idx & (NAT_MAX_RULES - 1));

	return bpf_map_lookup_elem(&rules, &k);
}

static __always_inline struct nat_rstate *rstate_at(__u32 slot, __u32 idx)
{
	__u32 k = slot * NAT_MAX_RULES + (idx & (NAT_MAX_RULES - 1));

	return bpf_map_lookup_elem(&rstates, &k);
}

/* ----------------------------------------------------------- allocation */

/* Allocation context, in the work area's spare room (struct alloc sits in
 * w->pay while a session is made; the ftp proxy uses pay later). */
struct alloc {
	__u32 slot;
	__u32 idx;
	__s32 stport;
	__u32 port;
	struct a128 stip;
	struct a128 in;
	struct a128 src;
	struct a128 dst;
	__u32 hmsrc[4];
	__u32 hmdst[4];
	__u8 hm;
	__u8 done;
	__u8 ok;
	__u8 allones;
	__u32 tries;
};

static __always_inline struct alloc *get_alloc(struct work *w)
{
	return (struct alloc *)w->pay;
}

/* map_step is one turn of ipf_nat_newmap's search loop. */
static long map_step(__u32 l, void *unused)
{
	struct work *w = get_work();
	struct alloc *a;
	struct nat_rule *r;
	struct nat_rstate *rs;
	struct pkt *p;
	struct a128 nsrc, nmask, in;
	struct nat_key *k;
	__u32 port = 0, *na;
	int v6, tcpudp, icmpq, block;

	if (!w)
		return 1;
	a = get_alloc(w);
	p = &w->p;
	r = rule_at(a->slot, a->idx);
	rs = rstate_at(a->slot, a->idx);
	if (!r || !rs)
		return 1;
	v6 = p->family == 6;
	tcpudp = p->pflags & PF_TCPUDP;
	icmpq = p->pflags & PF_ICMPQ;
	/* IPFilter's IPv6 NAT has no map-block case: an inet6 map-block
	 * allocates like a plain map (internal/nat newMap). */
	block = r->type == NT_MAPBLOCK && !v6;
	nsrc = op_a(&r->nw);
	nmask = op_m(&r->nw);
	in.hi = rs->snip[0];
	in.lo = rs->snip[1];
	if (l == 0) {
		__s64 ref;

		a_to(w->x.m, in, v6);
		/* found, or created with the pool's current address */
		ref = hm_get(w, r->id, 0, p->family, w->ns.t.osrc, w->ns.t.odst, w->x.m, w->x.hn, w->x.hd);
		if (ref != 0) {
			in = a_from(w->x.hn, v6);
			a->hm = 1;
		}
	} else if (l == 1 && a->hm) {
		hm_drop(w, r->id, 0, p->family, w->ns.t.osrc, w->ns.t.odst);
		a->hm = 0;
	}
	if (a->allones && rs->spnext == 0 && l > 0)
		goto fail;
	if (r->type == NT_BIMAP && a_eq(op_m(&r->orig), op_m(&r->nw))) {
		in = a_or(nsrc, a_and(a->src, a_not(op_m(&r->orig), v6)));
	} else if (block) {
		__u64 h, ppip = r->ppip, ippip = r->ippip;

		if (l >= r->ppip || (l > 0 && !tcpudp))
			goto fail;
		if (!ippip || !ppip)
			goto fail;
		h = a_and(a->src, a_not(op_m(&r->orig), v6)).lo;
		in.hi = 0;
		in.lo = (h / ippip) & a_not(op_m(&r->nw), v6).lo;
		in = a_add(in, nsrc.lo);
		if (!v6)
			in = a_trim(in, 0);
		if (tcpudp) {
			__u64 pp = ((__u64)bpf_ntohs(p->sport) + l) % ppip;

			pp += ppip * (h % ippip);
			port = (__u16)(pp + 1024);
		}
	} else if (a_zero(nsrc) && a->allones) {
		struct nat_ifaddr *ia;

		if (l > 0)
			goto fail;
		ia = bpf_map_lookup_elem(&ifaddrs, &p->ifindex);
		if (!ia) {
			stat_inc(NS_SIDE * p->dir + NS_IFADDR);
			goto fail;
		}
		if (v6) {
			if (!(ia->v6[0] | ia->v6[1] | ia->v6[2] | ia->v6[3]))
				goto fail;
			in = a_from(ia->v6, 1);
		} else {
			if (!ia->v4)
				goto fail;
			in = a_from(&ia->v4, 0);
		}
	} else if (a_zero(nsrc) && a_zero(nmask) && r->nw.kind == AK_NORMAL) {
		if (l > 0)
			goto fail;
		in = a->src;
	} else if (!a->allones && rs->spnext == 0 && (l > 0 || !a->hm)) {
		struct a128 x = { rs->snip[0], rs->snip[1] };

		x = a_add(x, 1);
		rs->snip[0] = x.hi;
		rs->snip[1] = x.lo;
	}
	if (tcpudp && !block && (r->flags & RF_AUTO)) {
		__u64 ppip = r->ppip, ippip = r->ippip;

		if (l > 0 && ppip && l % ppip == 0 && l > ppip && !a->allones) {
			struct a128 x = { rs->snip[0], rs->snip[1] };

			x = a_add(x, 1);
			rs->snip[0] = x.hi;
			rs->snip[1] = x.lo;
		}
		if (ppip && ippip) {
			__u64 pp = ((__u64)bpf_ntohs(p->sport) + l % ppip) % ppip;

			pp += ppip * (a->src.lo % ippip);
			port = (__u16)(pp + 1024);
		}
	} else if (!block && (tcpudp || icmpq) && rs->spnext != 0) {
		__s32 pn;

		if (r->flags & RF_SEQ)
			pn = rs->spnext;
		else
			pn = (__s32)(nat_random() % (__u32)(r->spmax - r->spmin + 1)) + r->spmin;
		port = (__u16)pn;
		rs->spnext++;
		if (rs->spnext > r->spmax) {
			rs->spnext = r->spmin;
			if (!a->allones) {
				struct a128 x = { rs->snip[0], rs->snip[1] };

				x = a_add(x, 1);
				rs->snip[0] = x.hi;
				rs->snip[1] = x.lo;
			}
		}
	}
	{
		struct a128 snip = { rs->snip[0], rs->snip[1] };

		if (r->nw.kind == AK_RANGE) {
			if (a_less(op_m(&r->nw), snip)) {
				rs->snip[0] = r->nw.a[0];
				rs->snip[1] = r->nw.a[1];
			}
		} else if (!a->allones && !a_zero(nmask) && a_less(nsrc, a_and(a_add(snip, 1), nmask))) {
			struct a128 x = a_add(nsrc, 1);

			rs->snip[0] = x.hi;
			rs->snip[1] = x.lo;
		}
	}
	if (port == 0 && (tcpudp || icmpq))
		port = bpf_ntohs(p->sport);
	na = w->x.na;
	k = &w->k2;
	a_to(na, in, v6);
	key_of(k, DIR_IN, p->proto, p->family, w->ns.t.odst, na, p->dport, bpf_htons((__u16)port));
	if (icmpq)
		k->sport = bpf_htons((__u16)port);
	/* an ICMP query is never a clash: IPFilter's ipf_nat_newmap does not
	 * find its session (the engine's newMap); the new one takes the keys
	 * over (shadow) */
	if (p->cutnew || icmpq || !nat_exists_on(p->ifindex)) {
		a->in = in;
		a->port = port;
		a->ok = 1;
		return 1;
	}
	{
		struct a128 snip = { rs->snip[0], rs->snip[1] };

		if (rs->spnext != 0 && a->stport == rs->spnext && !a_zero(snip) && a_eq(a->stip, snip))
			goto fail;
		if (rs->spnext == 0 && l > 0 && a_eq(snip, a->stip))
			goto fail;
	}
	if (l > (1 << 17))
		goto fail;
	return 0;
fail:
	stat_inc(NS_SIDE * p->dir + NS_WRAP);
	{
		struct work *ww = get_work();

		if (ww)
			ww->nwraps++;
	}
	a->ok = 0;
	return 1;
}

/* new_map allocates the new source of an outbound session (ipf_nat_newmap). */
GLOBAL int nat_new_map(__u32 slot, __u32 idx)
{
	struct work *w = get_work();
	struct nat_rule *r;
	struct nat_rstate *rs;
	struct alloc *a;
	struct pkt *p;
	int v6;

	if (!w)
		return 0;
	a = get_alloc(w);
	p = &w->p;
	r = rule_at(slot, idx);
	rs = rstate_at(slot, idx);
	if (!r || !rs)
		return 0;
	v6 = p->family == 6;
	__builtin_memset(a, 0, sizeof(*a));
	a->slot = slot;
	a->idx = idx;
	a->src = a_from(p->src, v6);
	a->allones = a_ones(op_m(&r->nw), v6) && r->nw.kind != AK_RANGE;
	a->stip.hi = rs->snip[0];
	a->stip.lo = rs->snip[1];
	a->stport = rs->spnext;
	bpf_loop((1 << 17) + 2, map_step, NULL, 0);
	if (!a->ok) {
		if (a->hm)
			hm_drop(w, r->id, 0, p->family, w->ns.t.osrc, w->ns.t.odst);
		return 0;
	}
	a_to(w->ns.t.nsrc, a->in, v6);
	if (!a->hm && hm_get(w, r->id, 0, p->family, w->ns.t.osrc, w->ns.t.odst, w->ns.t.nsrc, w->x.hn, w->x.hd) != 0)
		a->hm = 1;
	if (a->hm) {
		w->ns.hm_on = 1;
		w->ns.hm_rule = r->id;
		w->ns.hm_port = 0;
	}
	if (p->pflags & PF_TCPUDP) {
		w->ns.t.nsport = bpf_htons((__u16)a->port);
	} else if (p->pflags & PF_ICMPQ) {
		w->ns.t.nsport = bpf_htons((__u16)a->port);
		w->ns.t.ndport = w->ns.t.nsport;
	}
	return 1;
}

/* Sticky host map search with no rule (hostmapGet(nil, src, dst, port)):
 * the oldest entry of any sticky inbound rule (state in w->sc). */
static long sticky_step(__u32 i, void *unused)
{
	struct work *w = get_work();
	struct sticky_ctx *c;
	struct nat_order *o;
	struct nat_hm_key hk = {};
	struct nat_rule *r;
	struct nat_hm *h;
	__u32 idx, ok;

	if (!w)
		return 1;
	c = &w->sc;
	ok = c->slot * 2 + DIR_IN;
	o = bpf_map_lookup_elem(&orders, &ok);
	if (!o || i >= c->n)
		return 1;
	idx = o->idx[BOUND(i, NAT_MAX_RULES - 1)];
	r = rule_at(c->slot, idx);
	if (!r || !(r->flags & RF_STICKY))
		return 0;
	hk.rule_id = r->id;
	hk.port = c->port;
	hk.family = w->p.family;
	words_cp(hk.src, w->ns.t.osrc);
	words_cp(hk.dst, w->ns.t.odst);
	h = bpf_map_lookup_elem(&hostmaps, &hk);
	if (h && (!c->found || h->seq < c->seq)) {
		c->found = 1;
		c->seq = h->seq;
		c->found_idx = idx;
		words_cp(c->ndst, h->ndst);
	}
	return 0;
}

static __always_inline int sticky_find(struct sticky_ctx *c, __u32 slot, __u16 port)
{
	__u32 ok = slot * 2 + DIR_IN;
	struct nat_order *o = bpf_map_lookup_elem(&orders, &ok);

	__builtin_memset(c, 0, sizeof(*c));
	if (!o)
		return 0;
	c->slot = slot;
	c->n = o->n;
	c->port = port;
	bpf_loop(NAT_MAX_RULES, sticky_step, NULL, 0);
	return c->found;
}

/* new_rdr picks the new destination of an inbound session (ipf_nat_newrdr).
 * Returns 0 on failure, 1 on success, 3 on success when a round-robin rule
 * is to move; *ridx may change to the rule a sticky flow had before. */
GLOBAL int nat_new_rdr(__u32 slot, __u32 idx0)
{
	struct work *w = get_work();
	struct nat_rule *r;
	struct nat_rstate *rs;
	struct pkt *p;
	struct a128 in, ndst, nmask;
	struct nat_key *k;
	__u32 *na = w ? w->x.na : NULL, idx = idx0;
	__u16 dport, nport;
	int v6, move = 1, tcpudp, icmpq;

	if (!w)
		return 0;
	p = &w->p;
	r = rule_at(slot, idx);
	if (!r)
		return 0;
	dport = bpf_ntohs(p->dport);
	if (((r->flags & RF_RR) || r->nw.kind == AK_SPLIT) && (r->flags & RF_STICKY)) {
		if (sticky_find(&w->sc, slot, dport)) {
			idx = w->sc.found_idx;
			r = rule_at(slot, idx);
			if (!r)
				return 0;
			move = 0;
		}
	}
	rs = rstate_at(slot, idx);
	if (!rs)
		return 0;
	w->ns.rule_idx = idx;
	w->ns.rule_id = r->id;
	v6 = p->family == 6;
	tcpudp = p->pflags & PF_TCPUDP;
	icmpq = p->pflags & PF_ICMPQ;
	ndst = op_a(&r->nw);
	nmask = op_m(&r->nw);
	if (r->type == NT_BIMAP) {
		ndst = op_a(&r->orig);
		nmask = op_m(&r->orig);
	}
	if (r->nw.kind == AK_SPLIT) {
		int hm = 0;

		in.hi = rs->dnip[0];
		in.lo = rs->dnip[1];
		if (!(r->flags & RF_RR) && (r->flags & RF_STICKY) && sticky_find(&w->sc, slot, dport)) {
			/* the engine reads the entry's ndst, which is unset */
			in = a_from(w->sc.ndst, v6);
			move = 0;
			hm = 1;
		}
		if (!hm) {
			if (a_eq(op_a(&r->nw), in)) {
				rs->dnip[0] = r->nw.m[0];
				rs->dnip[1] = r->nw.m[1];
				move = 0;
			} else {
				rs->dnip[0] = r->nw.a[0];
				rs->dnip[1] = r->nw.a[1];
			}
		}
	} else if (a_zero(ndst) && a_ones(nmask, v6)) {
		struct nat_ifaddr *ia = bpf_map_lookup_elem(&ifaddrs, &p->ifindex);

		if (!ia) {
			stat_inc(NS_SIDE * p->dir + NS_IFADDR);
			return 0;
		}
		if (v6) {
			if (!(ia->v6[0] | ia->v6[1] | ia->v6[2] | ia->v6[3]))
				return 0;
			in = a_from(ia->v6, 1);
		} else {
			if (!ia->v4)
				return 0;
			in = a_from(&ia->v4, 0);
		}
	} else if (a_zero(ndst) && a_zero(nmask)) {
		in = a_from(p->dst, v6);
	} else if (r->type == NT_BIMAP && a_eq(op_m(&r->orig), op_m(&r->nw))) {
		in = a_or(ndst, a_and(a_from(p->dst, v6), a_not(nmask, v6)));
	} else {
		in = ndst;
	}
	nport = dport;
	if (rs->dpnext != 0) {
		/* a from/to rdr: P - LO + HI, LO its destination port test's
		 * first port (the engine's newRdr) */
		if (!(r->flags & RF_FIXEDDP) && (r->oport_min != r->oport_max || (r->flags & RF_FILTER))) {
			__s32 base = (r->flags & RF_FILTER) ? r->dport_p1 : r->oport_min;

			nport = (__u16)((__s32)dport - base + r->dpmax);
		} else {
			nport = (__u16)rs->dpnext;
			rs->dpnext++;
			if (rs->dpnext > r->dpmax)
				rs->dpnext = r->dpmin;
		}
	}
	if (a_zero(in)) {
		if (nport == dport)
			return 0;
		in = a_from(p->dst, v6);
	}
	a_to(na, in, v6);
	k = &w->k2;
	key_of(k, DIR_OUT, p->proto, p->family, na, p->src, bpf_htons(nport), p->sport);
	if (p->proto == IPPROTO_ICMP && (icmpq || p->nq)) {
		/* IPFilter looks an ICMP packet's new tuple up with its type
		 * and code word where sessions keep the id (the engine's
		 * newRdr) */
		k->sport = k->dport = p->icmptc;
	} else if (icmpq) {
		k->sport = bpf_htons(nport);
		k->dport = k->sport;
	} else if (!tcpudp) {
		k->sport = k->dport = 0;
	}
	/* an ICMPv6 query is never a clash; an ICMPv4 packet clashes by its
	 * type and code word (the engine's newRdr) */
	if ((p->proto == IPPROTO_ICMP || !icmpq) && nat_exists_on(p->ifindex)) {
		stat_inc(NS_SIDE * p->dir + NS_EXISTS);
		w->nexists++;
		return 0;
	}
	words_cp(w->ns.t.ndst, na);
	if (r->flags & RF_STICKY) {
		if (hm_get(w, r->id, dport, p->family, p->src, p->dst, na, w->x.hn, w->x.hd) != 0) {
			w->ns.hm_on = 1;
			w->ns.hm_rule = r->id;
			w->ns.hm_port = dport;
		}
	}
	if (tcpudp) {
		w->ns.t.ndport = bpf_htons(nport);
	} else if (icmpq) {
		w->ns.t.nsport = bpf_htons(nport);
		w->ns.t.ndport = w->ns.t.nsport;
	}
	return move ? 3 : 1;
}

/* The rewrite odometer (the engine's newRewrite, IPFilter's
 * ipf_nat_newrewrite): each try takes the rule's current source address,
 * source port, destination address and destination port and steps at
 * most one of them, the one stepnext points at. */
#define REWRITE_TRIES 20 /* the engine's rewriteTries */

/* rw_steps reports whether a rewrite target is a pool the odometer steps
 * (not 0/0, 0/32, a single host or a destination list). */
static __always_inline int rw_steps(const struct nat_op *o, int v6)
{
	struct a128 m = op_m(o);

	if (o->kind == AK_RANGE)
		return 1;
	return o->kind == AK_NORMAL && !a_zero(m) && !a_ones(m, v6);
}

/* step_addr moves a pool to its next address, back to the first after
 * the last (IPFilter walks on past it: docs/ipfilter-differences.md C18). */
static __always_inline void step_addr(const struct nat_op *o, __u64 *cur)
{
	struct a128 c = { cur[0], cur[1] };

	c = a_add(c, 1);
	if (o->kind == AK_RANGE) {
		if (a_less(op_m(o), c))
			c = op_a(o);
	} else if (!a_eq(a_and(c, op_m(o)), op_a(o))) {
		c = a_add(op_a(o), 1);
	}
	cur[0] = c.hi;
	cur[1] = c.lo;
}

static __always_inline void step_port(__s32 *cur, __u16 lo, __u16 hi)
{
	(*cur)++;
	if (*cur > hi)
		*cur = lo;
}

static long rewrite_step(__u32 l, void *unused)
{
	struct work *w = get_work();
	struct alloc *a;
	struct nat_rule *r;
	struct nat_rstate *rs;
	struct pkt *p;
	struct nat_key k;
	int v6, tcpudp, ports, srcs, dsts, changed = 0;

	if (!w)
		return 1;
	a = get_alloc(w);
	p = &w->p;
	r = rule_at(a->slot, a->idx);
	rs = rstate_at(a->slot, a->idx);
	if (!r || !rs)
		return 1;
	v6 = p->family == 6;
	tcpudp = p->pflags & PF_TCPUDP;
	ports = tcpudp || (p->pflags & PF_ICMPQ);
	srcs = rw_steps(&r->nsrc, v6);
	dsts = rw_steps(&r->ndst, v6);
	/* l > 0: the previous try's tuple exists (IPFilter's natl) */
	if (!srcs && rs->spnext == 0 && !dsts && rs->dpnext == 0 && l > 0)
		return 1;
	words_cp(w->ns.t.nsrc, p->src);
	words_cp(w->ns.t.ndst, p->dst);
	w->ns.t.nsport = p->sport;
	w->ns.t.ndport = p->dport;
	if (!a_zero(op_m(&r->nsrc)) || r->nsrc.kind != AK_NORMAL) {
		struct a128 x = { rs->snip[0], rs->snip[1] };

		a_to(w->ns.t.nsrc, x, v6);
	}
	if (!srcs) {
		if (rs->stepnext == 0)
			rs->stepnext = 1;
	} else if (rs->stepnext == 0) {
		step_addr(&r->nsrc, rs->snip);
		rs->stepnext++;
		changed = 1;
	}
	if (ports) {
		if (tcpudp && rs->spnext)
			w->ns.t.nsport = bpf_htons((__u16)rs->spnext);
		if (rs->stepnext == 1 && !changed && l > 0) {
			step_port(&rs->spnext, r->spmin, r->spmax);
			rs->stepnext++;
			changed = 1;
		}
	} else {
		rs->stepnext = 2;
	}
	if (!a_zero(op_m(&r->ndst)) || r->ndst.kind != AK_NORMAL) {
		struct a128 x = { rs->dnip[0], rs->dnip[1] };

		a_to(w->ns.t.ndst, x, v6);
	}
	if (!dsts) {
		if (rs->stepnext == 2)
			rs->stepnext = 3;
	} else if (rs->stepnext == 2 && !changed && l > 0) {
		step_addr(&r->ndst, rs->dnip);
		rs->stepnext++;
		changed = 1;
	}
	if (ports) {
		if (tcpudp && rs->dpnext)
			w->ns.t.ndport = bpf_htons((__u16)rs->dpnext);
		if (rs->stepnext == 3 && !changed) {
			step_port(&rs->dpnext, r->dpmin, r->dpmax);
			rs->stepnext++;
		}
	} else if (rs->stepnext == 3) {
		rs->stepnext = 0;
	}
	rs->stepnext &= 3;
	key_of(&k, p->dir == DIR_IN ? DIR_OUT : DIR_IN, p->proto, p->family, w->ns.t.ndst, w->ns.t.nsrc,
	       w->ns.t.ndport, w->ns.t.nsport);
	if (!exists(&k)) {
		a->ok = 1;
		return 1;
	}
	return l >= REWRITE_TRIES - 1;
}

/* new_rewrite builds the 4-tuple of a rewrite session. */
GLOBAL int nat_new_rewrite(__u32 slot, __u32 idx)
{
	struct work *w = get_work();
	struct alloc *a;

	if (!w)
		return 0;
	a = get_alloc(w);
	__builtin_memset(a, 0, sizeof(*a));
	a->slot = slot;
	a->idx = idx;
	bpf_loop(REWRITE_TRIES, rewrite_step, NULL, 0);
	return a->ok;
}

/* ----------------------------------------------------------- rule walk */

static __always_inline void hit(__u32 slot, __u32 idx)
{
	__u32 k = slot * NAT_MAX_RULES + (idx & (NAT_MAX_RULES - 1));
	__u64 *v = bpf_map_lookup_elem(&hits, &k);

	if (v)
		*v += 1;
}

/* nat_insert enters the session w->ns has been given for w->p, with the
 * rule at idx (the one the session belongs to). Returns 0 on success, 1
 * when another CPU had just made the packet's session (sess_insert). */
GLOBAL int nat_insert(__u32 slot, __u32 idx)
{
	struct work *w = get_work();
	struct nat_rule *r = rule_at(slot, idx);
	struct pkt *p;
	__u64 now, life;
	int res;

	if (!w || !r)
		return -1;
	p = &w->p;
	now = now_ns();
	life = lifetime(r->age[0], p->proto, p->pflags, 0, p->l4off ? p->tcpflags : 0, 0) * TICK_NS;
	res = sess_insert(w, r->type, r->age[0], r->age[1], r->mss, (r->flags & RF_FTP) ? SF_PROXY : 0, now, life);
	if (res != 0)
		return res;
	if (r->flags & RF_FTP) {
		/* a fresh proxy state, zeroed in the scratch room */
		__u64 k = WS(w)->seq * 2;

		__builtin_memset(w->orig, 0, sizeof(struct nat_ftp));
		bpf_map_update_elem(&ftps, &k, w->orig, BPF_ANY);
		k++;
		bpf_map_update_elem(&ftps, &k, w->orig, BPF_ANY);
	}
	return 0;
}

/* nat_try sets up a session for the packet in w->p with the rule at idx,
 * which matched it (the engine's newSession). Returns 0 on failure, 1 on
 * success, 3 on success when a round-robin rule is to move, 4 when
 * another CPU had just made the packet's session (its key in w->k): what
 * this one allocated is given back (the host map reference; a port or
 * address is only taken by a session) and the rule counts no hit. */
GLOBAL int nat_try(__u32 slot, __u32 idx)
{
	struct work *w = get_work();
	struct nat_rule *r;
	struct pkt *p;
	int res, ins;

	if (!w)
		return 0;
	p = &w->p;
	r = rule_at(slot, idx);
	if (!r)
		return 0;
	if (cfg(NCFG_COUNT) >= cfg(NCFG_MAX)) {
		stat_inc(NS_SIDE * p->dir + NS_TABLEMAX);
		return 0;
	}
	__builtin_memset(&w->ns, 0, sizeof(w->ns));
	words_cp(w->ns.t.osrc, p->src);
	words_cp(w->ns.t.odst, p->dst);
	words_cp(w->ns.t.nsrc, p->src);
	words_cp(w->ns.t.ndst, p->dst);
	w->ns.t.osport = w->ns.t.nsport = p->sport;
	w->ns.t.odport = w->ns.t.ndport = p->dport;
	w->ns.rule_idx = idx;
	w->ns.rule_id = r->id;
	/* a rule without an interface ("*") leaves its session unbound
	 * in both directions: the first lookup in each binds it (sess_take) */
	w->ns.ifin = r->inif;
	w->ns.ifout = r->outif;
	if (r->type == NT_REWRITE_IN || r->type == NT_REWRITE_OUT)
		res = nat_new_rewrite(slot, idx);
	else if (p->dir == DIR_OUT)
		res = nat_new_map(slot, idx);
	else
		res = nat_new_rdr(slot, idx);
	if (!res)
		return 0;
	ins = bench_at(ST_NOINSERT) ? -1 : nat_insert(slot, w->ns.rule_idx);
	if (ins != 0) {
		if (w->ns.hm_on)
			hm_drop(w, w->ns.hm_rule, w->ns.hm_port, p->family, p->src, p->dst);
		return ins == 1 ? 4 : 0;
	}
	return res;
}

struct walk_ctx {
	__u32 slot;
	__u32 n;
	__u32 idx;
	__s32 res;
	__u8 failed;
	__u8 done;
	__u8 v6;
	__u8 lev;  /* the mask being walked (index into masks) */
	__u32 j;   /* the next rule of the order to look at */
	__u32 h;   /* the bucket of the packet's address under that mask */
	__u32 a[4]; /* the address the table is keyed by, network order */
};

/* The walk's state sits in the work area's ftp room (w->tmp: only the ftp
 * proxy uses it, after the walk), not on nat_new's stack: the chain of
 * frames under nat_new (walk_step > nat_try > nat_new_map > map_step >
 * nat_exists_on) has no 48 bytes to spare. */
_Static_assert(sizeof(struct walk_ctx) <= FTP_MAXPAY, "walk_ctx does not fit in the work area's tmp");

static __always_inline struct walk_ctx *walk_of(struct work *w)
{
	return (struct walk_ctx *)w->tmp;
}

/* mask_word is the network-order mask of word i of a /len prefix. */
static __always_inline __u32 mask_word(__u32 len, __u32 i)
{
	__s32 b = (__s32)len - 32 * (__s32)i;

	if (b <= 0)
		return 0;
	if (b >= 32)
		return ~0u;
	return bpf_htonl(~0u << (32 - b));
}

/* hash_word is NAT_HASH_FN's term for a word as it sits in memory. */
static __always_inline __u32 hash_word(__u32 w)
{
	return w + (w >> 12);
}

/* walk_bucket is the bucket the packet's address falls in under the
 * mask of level lev (NAT_HASH_FN, NAT_HASH_FN6); the level past the last
 * mask is the bucket of address 0 (the engine's second look there). */
static __always_inline __u32 walk_bucket(struct walk_ctx *c, const struct nat_order *o)
{
	__u32 l = c->lev, len, h;
	__u64 li;

	if (l >= o->nmasks[c->v6 & 1])
		return 0;
	/* a fresh register the verifier bounds (the compiler would reuse
	 * the one compared with nmasks) */
	li = l;
	asm volatile("" : "+r"(li));
	if (li >= NAT_LEVELS)
		return NAT_BUCKETS; /* no bucket */
	len = o->masks[c->v6 & 1][li];
	h = hash_word(c->a[0] & mask_word(len, 0));

	if (c->v6)
		h += hash_word(c->a[1] & mask_word(len, 1)) + hash_word(c->a[2] & mask_word(len, 2)) +
		     hash_word(c->a[3] & mask_word(len, 3));
	return h % NAT_BUCKETS;
}

/* walk_step looks at one rule of the order under one mask: the rules of
 * the current mask's bucket in order, then the next mask, and last the
 * bucket of address 0 once more (IPFilter's walk runs one slot past its
 * last mask, slot 0: the engine's walk in translate.go). */
static long walk_step(__u32 i, void *unused)
{
	struct work *w = get_work();
	struct walk_ctx *c;
	struct nat_order *o;
	struct nat_rule *r;
	__u32 idx, j, ok;
	int res;

	if (!w)
		return 1;
	c = walk_of(w);
	ok = c->slot * 2 + w->p.dir;
	o = bpf_map_lookup_elem(&orders, &ok);
	if (!o || c->lev > o->nmasks[c->v6 & 1])
		return 1;
	if (c->j >= c->n) {
		c->j = 0;
		c->lev++;
		if (c->lev > o->nmasks[c->v6 & 1])
			return 1;
	}
	if (c->j == 0)
		c->h = walk_bucket(c, o);
	j = BOUND(c->j, NAT_MAX_RULES - 1);
	c->j++;
	if (o->bucket[j] != c->h)
		return 0;
	idx = o->idx[j];
	r = rule_at(c->slot, idx);
	if (!r)
		return 0;
	if (!rule_matches(r, &w->p, a_from(w->p.src, w->p.family == 6), a_from(w->p.dst, w->p.family == 6)))
		return 0;
	if (r->flags & RF_NO) {
		hit(c->slot, idx);
		c->done = 1;
		return 1;
	}
	res = nat_try(c->slot, idx);
	if (!res) {
		c->failed = 1;
		return 0;
	}
	if (res != 4)
		hit(c->slot, idx);
	c->idx = idx;
	c->res = res;
	c->done = 1;
	return 1;
}

/* rotate moves a round-robin rule to the back of the order, behind the
 * other rules of its bucket (IPFilter takes it out of its table and adds
 * it again; the engine's rotate). It finds the rule, then moves it one
 * place at a time, each swap under the order's lock: a concurrent
 * rotation may stop it early, but the order stays a permutation of the
 * rules. */
struct rot_ctx {
	__u32 key;
	__u32 idx;
	__u32 pos;
	__u8 bucket;
	__u8 found;
	__u8 pad[2];
};

static long rot_find(__u32 i, struct rot_ctx *c)
{
	struct nat_order *o = bpf_map_lookup_elem(&orders, &c->key);

	if (!o || i >= o->n || i >= NAT_MAX_RULES)
		return 1;
	if (o->idx[BOUND(i, NAT_MAX_RULES - 1)] == c->idx) {
		c->pos = i;
		c->bucket = o->bucket[BOUND(i, NAT_MAX_RULES - 1)];
		c->found = 1;
		return 1;
	}
	return 0;
}

static long rot_swap(__u32 k, struct rot_ctx *c)
{
	struct nat_order *o = bpf_map_lookup_elem(&orders, &c->key);
	__u32 i = BOUND(c->pos + k, NAT_MAX_RULES - 1), j = BOUND(i + 1, NAT_MAX_RULES - 1);
	long stop = 1;

	if (!o || c->pos + k + 1 >= NAT_MAX_RULES)
		return 1;
	bpf_spin_lock(&o->lock);
	if (c->pos + k + 1 < o->n && o->idx[i] == c->idx) {
		__u16 t = o->idx[i];

		o->idx[i] = o->idx[j];
		o->idx[j] = t;
		o->bucket[i] = o->bucket[j];
		o->bucket[j] = c->bucket;
		stop = 0;
	}
	bpf_spin_unlock(&o->lock);
	return stop;
}

static __always_inline void rotate(__u32 slot, __u32 dir, __u32 idx)
{
	struct rot_ctx c = {};

	c.key = slot * 2 + dir;
	c.idx = idx;
	bpf_loop(NAT_MAX_RULES, rot_find, &c, 0);
	if (c.found)
		bpf_loop(NAT_MAX_RULES, rot_swap, &c, 0);
}

/* nat_new runs the rules for a packet no session knows (w->p). Returns 1
 * with the new forward entry's key in w->k, 0 when no rule applies, -1
 * when rules matched but none could make a session (the packet is
 * dropped, as IPFilter blocks it). */
GLOBAL int nat_new(void)
{
	struct work *w = get_work();
	struct walk_ctx *c;
	__u32 ok;
	struct nat_order *o;

	if (!w)
		return 0;
	c = walk_of(w);
	__builtin_memset(c, 0, sizeof(*c));
	c->slot = cfg(NCFG_ACTIVE) & 1;
	ok = c->slot * 2 + (w->p.dir & 1);
	o = bpf_map_lookup_elem(&orders, &ok);
	if (!o || !o->n)
		return 0;
	c->n = o->n;
	c->v6 = w->p.family == 6;
	__builtin_memcpy(c->a, (w->p.dir & 1) == DIR_IN ? w->p.dst : w->p.src, sizeof(c->a));
	bpf_loop(NAT_MAX_RULES * NAT_LEVELS, walk_step, NULL, 0);
	/* found again: one register less to keep across the loop */
	w = get_work();
	if (!w)
		return 0;
	c = walk_of(w);
	if (c->res) {
		__u32 slot = c->slot & 1, idx = c->idx;
		struct nat_rule *r = rule_at(slot, idx);

		/* only the rdr list turns, and not an inbound bimap (the
		 * engine's check: IPFilter moves a round-robin rdr only) */
		if (r && (r->flags & RF_RR) && c->res == 3 && (w->p.dir & 1) == DIR_IN && r->type != NT_BIMAP)
			rotate(slot, w->p.dir & 1, idx);
		return 1;
	}
	return c->failed ? -1 : 0;
}

/* ------------------------------------------------------------- wildcards */

/* nat_wild looks for a proxy's wildcard entry matching w->p and turns it
 * into a session (the engine's lookupWild). Returns 1 with the new
 * forward key in w->k, 2 when another CPU has just made the packet's
 * session (from the wildcard, for the same flow: its entry at the
 * packet's key w->k2 applies here; nat_slow takes it), 0 when none
 * applies.
 *
 * The session's entries go in before the wildcard's go out, so that a
 * packet of the flow on another CPU finds one or the other at every
 * moment (with the wildcard gone first, a packet of that moment found
 * neither and left untranslated). Two CPUs turning the wildcard for one
 * flow: one insert fails and that CPU takes the other's session; for two
 * flows (two source ports): both insert, one deletes the wildcard, and
 * the other takes its own session back out, as if it had come after
 * (the wildcard stands for one connection). */
GLOBAL int nat_wild(void)
{
	struct work *w = get_work();
	struct nat_sess *v;
	struct nat_key k, rk, *kw, *pk;
	struct pkt *p;
	__u16 port;
	__u64 *c;
	int i;

	if (!w)
		return 0;
	p = &w->p;
	kw = &w->x.rk;
	pk = &w->x.rk2;
	for (i = 0; i < 2; i++) {
		key_of(kw, (p->dir & 1) | DIR_WILD, p->proto, p->family, p->src, p->dst, i ? p->sport : 0,
		       i ? 0 : p->dport);
		v = bpf_map_lookup_elem(&sessions, kw);
		if (!v || v->w != i || (v->ifindex && v->ifindex != p->ifindex))
			continue;
		port = i ? p->dport : p->sport;
		/* the session the wildcard stood for, with its port known: a
		 * copy of one wildcard's entry (sess_pin) */
		w->pin = sess_pin(kw, v);
		if (!w->pin)
			continue;
		*pk = v->peer;
		copy_sess(WS(w), v);
		if (!sess_held(v, w->pin))
			continue;
		WS(w)->t.osport = WS(w)->t.nsport = port;
		WS(w)->sflags &= ~SF_WILD;
		WS(w)->deadline = 0;
		WS(w)->last = 0;
		fwd_key(&k, &WS(w)->t, WS(w)->sdir, WS(w)->proto, WS(w)->family);
		rev_key(&rk, &WS(w)->t, WS(w)->sdir, WS(w)->proto, WS(w)->family);
		if (exists(&k) || exists(&rk)) {
			/* another CPU's session of this packet's flow, just
			 * made (from this wildcard, most likely), is what a
			 * lookup a moment later would have found */
			v = bpf_map_lookup_elem(&sessions, &w->k2);
			if (v && sess_take(v, p->ifindex))
				return 2;
			/* a session of the tuple (on another interface): the
			 * wildcard is used up and makes none; the session it
			 * stood for is no longer counted */
			if (sess_del(kw, w->pin) != 0)
				return 0;
			sess_del(pk, w->pin);
			c = cfgp(NCFG_WILDS);
			if (c)
				__sync_fetch_and_add(c, -1);
			stat_inc(NS_WILDUSED);
			goto uncount;
		}
		WS(w)->w = 0;
		WS(w)->ifindex = WS(w)->sdir == DIR_IN ? WS(w)->ifin : WS(w)->ifout;
		WS(w)->peer = rk;
		entry_csum(WS(w), WS(w)->t.osrc, WS(w)->t.odst, WS(w)->t.osport, WS(w)->t.odport, WS(w)->t.nsrc, WS(w)->t.ndst,
			   WS(w)->t.nsport, WS(w)->t.ndport, WS(w)->family == 6, WS(w)->pflags);
		copy_sess(WS2(w), WS(w));
		WS2(w)->w = 1;
		WS2(w)->ifindex = WS(w)->sdir == DIR_IN ? WS(w)->ifout : WS(w)->ifin;
		WS2(w)->peer = k;
		entry_csum(WS2(w), WS(w)->t.ndst, WS(w)->t.nsrc, WS(w)->t.ndport, WS(w)->t.nsport, WS(w)->t.odst, WS(w)->t.osrc,
			   WS(w)->t.odport, WS(w)->t.osport, WS(w)->family == 6, WS(w)->pflags);
		if (bpf_map_update_elem(&sessions, &k, WS(w), BPF_NOEXIST) != 0) {
			/* another CPU's, made from the wildcard at once */
			v = bpf_map_lookup_elem(&sessions, &w->k2);
			if (v && sess_take(v, p->ifindex))
				return 2;
			goto gone;
		}
		/* its timer before the wildcard goes (the sweeper's if the
		 * kernel gives none: sess_arm) */
		if (sess_arm(&k, lifetime(WS(w)->age[0], WS(w)->proto, WS(w)->pflags, 0, 0, 0) * TICK_NS, w->pin) != 0 ||
		    bpf_map_update_elem(&sessions, &rk, WS2(w), BPF_NOEXIST) != 0) {
			sess_del(&k, w->pin);
			goto gone;
		}
		/* the wildcard's entries go; the session stays counted (the
		 * wildcard was) */
		if (sess_del(kw, w->pin) != 0) {
			/* another CPU took it for another flow first */
			sess_del(&k, w->pin);
			sess_del(&rk, w->pin);
			return 0;
		}
		sess_del(pk, w->pin);
		c = cfgp(NCFG_WILDS);
		if (c)
			__sync_fetch_and_add(c, -1);
		stat_inc(NS_WILDUSED);
		/* a proxy's data connection: no fast twin */
		no_twin();
		w->k = k;
		return 1;
gone:
		/* the wildcard is used up all the same (the engine's) */
		if (sess_del(kw, w->pin) != 0)
			return 0;
		sess_del(pk, w->pin);
		c = cfgp(NCFG_WILDS);
		if (c)
			__sync_fetch_and_add(c, -1);
		stat_inc(NS_WILDUSED);
		stat_inc(NS_SIDE * p->dir + NS_INSERTFAIL);
uncount:
		c = cfgp(NCFG_COUNT);
		if (c)
			__sync_fetch_and_add(c, -1);
		return 0;
	}
	return 0;
}

/* wild_add enters a proxy's wildcard session (the engine's slave with
 * wildSP, linked by linkSlave): dir and addresses as given, destination
 * port port (host order), any source port. deadline is when it ends if no
 * packet comes. Returns 1 if made; the forward wildcard key is left in
 * w->k for the proxy to remember. */
static __always_inline int wild_add(struct work *w, const struct nat_sess *parent, __u8 dir, __u8 proto,
				    const __u32 *osrc, const __u32 *odst, const __u32 *nsrc, const __u32 *ndst,
				    __u16 port, __u64 deadline)
{
	struct nat_sess *e = WS(w), *r = WS2(w);
	/* the reply key in the scratch area (shadow and nat_wild use it
	 * while a session is made, before the proxy runs): on the stack it
	 * made ftp_conn's frame the deepest of the proxy's chain */
	struct nat_key *rk = &w->x.rk2;
	__u64 *c;

	if (cfg(NCFG_COUNT) >= cfg(NCFG_MAX))
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	words_cp(e->t.osrc, osrc);
	words_cp(e->t.odst, odst);
	words_cp(e->t.nsrc, nsrc);
	words_cp(e->t.ndst, ndst);
	e->t.odport = e->t.ndport = bpf_htons(port);
	e->sifindex = parent->sifindex;
	{
		/* the parent's interfaces as bound now (the engine's slave
		 * copies its ifIn and ifOut): its entry's for its direction,
		 * its peer's for the other */
		struct nat_sess *pp = bpf_map_lookup_elem(&sessions, &parent->peer);
		__u32 pif = parent->ifindex, oif = pp ? pp->ifindex : 0;

		e->ifin = parent->sdir == DIR_IN ? pif : oif;
		e->ifout = parent->sdir == DIR_IN ? oif : pif;
	}
	e->rule_id = parent->rule_id;
	e->age[0] = parent->age[0];
	e->age[1] = parent->age[1];
	e->sdir = dir;
	e->proto = proto;
	e->family = parent->family;
	e->pflags = proto == IPPROTO_UDP ? PF_UDP : PF_TCP;
	e->sflags = SF_WILD | SF_SLAVE;
	e->rtype = parent->rtype;
	e->deadline = deadline;
	c = cfgp(NCFG_SEQ);
	if (c)
		e->seq = __sync_fetch_and_add(c, 1) + 1;
	copy_sess(r, e);
	e->w = 0;
	r->w = 1;
	e->ifindex = dir == DIR_IN ? e->ifin : e->ifout;
	r->ifindex = dir == DIR_IN ? e->ifout : e->ifin;
	fwd_key(&w->k, &e->t, dir | DIR_WILD, proto, e->family);
	rev_key(rk, &e->t, dir, proto, e->family);
	rk->dir |= DIR_WILD;
	e->peer = *rk;
	r->peer = w->k;
	/* before the first wildcard is there (nat_slow) */
	c = cfgp(NCFG_WILDSEEN);
	if (c && !*c)
		__sync_fetch_and_add(c, 1);
	if (bpf_map_update_elem(&sessions, &w->k, e, BPF_NOEXIST) != 0)
		return 0;
	{
		__u64 now = now_ns();

		/* its timer (the sweeper's if the kernel gives none:
		 * sess_arm) */
		if (sess_arm(&w->k, deadline > now ? deadline - now : 1, e->seq) != 0 ||
		    bpf_map_update_elem(&sessions, rk, r, BPF_NOEXIST) != 0) {
			sess_del(&w->k, e->seq);
			return 0;
		}
	}
	c = cfgp(NCFG_COUNT);
	if (c)
		__sync_fetch_and_add(c, 1);
	c = cfgp(NCFG_WILDS);
	if (c)
		__sync_fetch_and_add(c, 1);
	return 1;
}

/* ------------------------------------------------------------ fragments */

static __always_inline void frag_key(struct nat_frag_key *fk, const struct pkt *p)
{
	__builtin_memset(fk, 0, sizeof(*fk));
	words_cp(fk->src, p->src);
	words_cp(fk->dst, p->dst);
	fk->id = p->ipid;
	fk->proto = p->proto;
	fk->family = p->family;
	fk->optmsk = p->fopt;
	fk->secmsk = p->fsec;
	fk->auth = p->fauth;
}

/* frag_end4 is where an IPv4 first fragment ends for the fragments that
 * follow: IPFilter's firstend, in 8-byte units rounded down; at least 24
 * bytes for TCP; 8 for an ICMP error or a query shorter than its type's
 * minimum (the engine's v4FirstEnd). */
static __always_inline __u16 frag_end4(const struct pkt *p)
{
	__u16 e = p->fragend & ~7;

	if (p->proto == IPPROTO_TCP && e < 24)
		e = 24;
	else if (p->proto == IPPROTO_ICMP && p->l4len >= 8 &&
		 (icmp4_error(p->icmptype) ||
		  ((p->icmptype == 13 || p->icmptype == 14) && p->l4len < 20) ||
		  ((p->icmptype == 17 || p->icmptype == 18) && p->l4len < 12)))
		e = 8;
	return e;
}

/* frag_sess finds the session of a fragment entry, by either entry key
 * it noted (one may belong to a newer session now), putting the key it
 * found it by in k; NULL when the session has ended. */
static __always_inline struct nat_sess *frag_shadow(const struct nat_key *base, __u64 seq, struct nat_key *k);

static __always_inline struct nat_sess *frag_sess(const struct nat_frag *fe, struct nat_key *k)
{
	struct nat_sess *v = bpf_map_lookup_elem(&sessions, &fe->ska);

	if (v && v->seq == fe->seq) {
		*k = fe->ska;
		return v;
	}
	v = bpf_map_lookup_elem(&sessions, &fe->skb);
	if (v && v->seq == fe->seq) {
		*k = fe->skb;
		return v;
	}
	if (!cfg(NCFG_SHADOWS))
		return NULL;
	v = frag_shadow(&fe->ska, fe->seq, k);
	return v ? v : frag_shadow(&fe->skb, fe->seq, k);
}

/* frag_shadow finds session seq's entry among the shadows of key base,
 * k the walk's key and, when found, the entry's. A newer session that
 * took over both keys of the fragment entry's session (shadow) leaves
 * that session alive under them: its later fragments still follow it,
 * as the engine's and IPFilter's entries point at the session itself
 * (dif19, TestDifferentialRandom seed 190303: looked up under the two
 * keys only, the session was taken for ended and the fragment left
 * untranslated). */
static __always_inline struct nat_sess *frag_shadow(const struct nat_key *base, __u64 seq, struct nat_key *k)
{
	struct nat_sess *v;

	*k = *base;
	if (k->dir & (DIR_SHADOW | DIR_WILD))
		return NULL;
	k->dir |= DIR_SHADOW;
	for (__u8 g = 1; g < 16; g++) {
		k->pad = g;
		v = bpf_map_lookup_elem(&sessions, k);
		if (v && v->seq == seq)
			return v;
	}
	return NULL;
}

/* frag_live reports whether the session a fragment entry goes with still
 * lives (the engine drops a session's entries with it), under its keys
 * or their shadows (frag_shadow). */
static __always_inline int frag_live(const struct nat_frag *fe)
{
	struct nat_sess *v = bpf_map_lookup_elem(&sessions, &fe->ska);
	struct nat_key k;

	if (v && v->seq == fe->seq)
		return 1;
	v = bpf_map_lookup_elem(&sessions, &fe->skb);
	if (v && v->seq == fe->seq)
		return 1;
	if (!cfg(NCFG_SHADOWS))
		return 0;
	return frag_shadow(&fe->ska, fe->seq, &k) || frag_shadow(&fe->skb, fe->seq, &k);
}

/* frag_copy is a fragment body's copy of its datagram's entry fe (found
 * at w->fk), or NULL when it cannot be trusted. frags is an LRU hash: an
 * entry is evicted when another CPU enters a datagram in a full table,
 * or replaced (frag_put), and its element written for another datagram
 * at once, while a body on this CPU reads it. So the body copies the
 * entry, looks its key up again and compares (an element written since
 * differs, or is no longer at the key), and takes only an entry whose
 * session key has its own addresses (a first fragment notes the key it
 * was looked up by: every fragment of a datagram has the same): another
 * datagram's entry, even whole, would lead it to another session. Not
 * for an ICMP error's entry (DIR_ICMPERR), whose key is the quoted
 * packet's. */
static __always_inline struct nat_frag *frag_copy(struct work *w, const struct nat_frag *fe, const struct pkt *p)
{
	struct nat_frag *c = &w->fv, *again;
	const __u64 *a, *b;

	__builtin_memcpy(c, fe, sizeof(*c));
	barrier();
	again = bpf_map_lookup_elem(&frags, &w->fk);
	if (!again)
		return NULL;
	a = (const __u64 *)c;
	b = (const __u64 *)again;
	for (int i = 0; i < (int)(sizeof(*c) / 8); i++)
		if (a[i] != b[i])
			return NULL;
	if (!(c->k.dir & DIR_ICMPERR) &&
	    (!words_eq(c->ska.src, p->src) || !words_eq(c->ska.dst, p->dst) || c->ska.proto != p->proto ||
	     c->ska.family != p->family))
		return NULL;
	return c;
}

/* frag_put enters a first fragment's entry unless its datagram has one
 * whose session lives: IPFilter's cache keeps the entry it has (ipfr_new
 * finds it and adds none), so a later first fragment with the same key
 * never takes it over (the engine's addFrag). */
static __always_inline void frag_put(struct nat_frag_key *fk, struct nat_frag *fv)
{
	struct nat_frag *old = bpf_map_lookup_elem(&frags, fk);

	if (old && frag_live(old))
		return;
	bpf_map_update_elem(&frags, fk, fv, BPF_ANY);
}

/* note_frag remembers which entry a first fragment used, for the
 * fragments that follow (the engine's noteFrag): IPv4's by the IP id,
 * IPv6's by the fragment header's. The caller has put the session's
 * keys and seq in w->fv. */
static __always_inline void note_frag(const struct pkt *p, struct nat_key *k)
{
	struct work *w = get_work();

	if (!p->morefrags || !w)
		return;
	frag_key(&w->fk, p);
	w->fv.k = *k;
	w->fv.end = p->fragend;
	if (p->family == 4) {
		w->fv.end = frag_end4(p);
	} else if ((p->fragend - p->fragoff) & 7 || p->proto == IPPROTO_AH || p->ah ||
		   (p->proto == IPPROTO_TCP && p->l4len < 14)) {
		/* IPv6: no entry for a first fragment whose data is not a
		 * multiple of 8 bytes (bad), for AH, or for less than 14
		 * bytes of TCP header; the end is exact (the engine's
		 * noteFrag) */
		return;
	}
	w->fv.pad = 0;
	frag_put(&w->fk, &w->fv);
}

/* ------------------------------------------------------------ MSS clamp */

struct mss_ctx {
	struct __sk_buff *skb;
	__u32 l4;
	__u32 hl;
	__u32 i;
	__u16 max;
	__u16 csumoff;
	__u8 done;
};

static long mss_step(__u32 n, struct mss_ctx *c)
{
	__u8 o[2];
	__u16 mss, w1, w2, n1, n2;
	__u8 b[6];

	if (c->i >= c->hl)
		return 1;
	if (bpf_skb_load_bytes(c->skb, c->l4 + c->i, o, 1) < 0)
		return 1;
	if (o[0] == 0)
		return 1;
	if (o[0] == 1) {
		c->i++;
		return 0;
	}
	if (c->i + 1 >= c->hl || bpf_skb_load_bytes(c->skb, c->l4 + c->i, o, 2) < 0 || o[1] < 2)
		return 1;
	if (o[0] == 2 && o[1] == 4 && c->i + 4 <= c->hl) {
		__u32 at = c->l4 + c->i;

		if (bpf_skb_load_bytes(c->skb, at + 2, b, 2) < 0)
			return 1;
		mss = (__u16)b[0] << 8 | b[1];
		if (mss <= c->max)
			return 1;
		b[0] = c->max >> 8;
		b[1] = c->max & 0xff;
		if ((c->i & 1) == 0) {
			bpf_skb_store_bytes(c->skb, at + 2, b, 2, 0);
			bpf_l4_csum_replace(c->skb, c->csumoff, bpf_htons(mss), bpf_htons(c->max), 2);
			return 1;
		}
		/* the option sits at an odd offset: patch the two aligned
		 * words that hold the value */
		if (bpf_skb_load_bytes(c->skb, at + 1, b, 4) < 0)
			return 1;
		w1 = *(__u16 *)b;
		w2 = *(__u16 *)(b + 2);
		b[1] = c->max >> 8;
		b[2] = c->max & 0xff;
		n1 = *(__u16 *)b;
		n2 = *(__u16 *)(b + 2);
		bpf_skb_store_bytes(c->skb, at + 1, b, 4, 0);
		bpf_l4_csum_replace(c->skb, c->csumoff, w1, n1, 2);
		bpf_l4_csum_replace(c->skb, c->csumoff, w2, n2, 2);
		return 1;
	}
	c->i += o[1];
	return 0;
}

GLOBAL int nat_mss(struct __sk_buff *skb, __u32 l4, __u32 csumoff, __u32 max)
{
	struct mss_ctx c = {};
	__u8 h[2];

	if (!skb || bpf_skb_load_bytes(skb, l4 + 12, h, 2) < 0 || !(h[1] & 0x02))
		return 0;
	c.skb = skb;
	c.l4 = l4;
	c.hl = (h[0] >> 4) * 4;
	c.i = 20;
	c.max = max;
	c.csumoff = csumoff;
	bpf_loop(64, mss_step, &c, 0);
	return 0;
}

/* ------------------------------------------------------------ ICMP errors */

static __always_inline __u16 be16(const __u8 *b, __u32 off)
{
	return (__u16)b[BOUND(off, ICMP_INNER - 1)] << 8 | b[BOUND(off + 1, ICMP_INNER - 1)];
}

static __always_inline void put16(__u8 *b, __u32 off, __u16 v)
{
	b[BOUND(off, ICMP_INNER - 1)] = v >> 8;
	b[BOUND(off + 1, ICMP_INNER - 1)] = v & 0xff;
}

/* csum_upd16 is the engine's ChecksumUpdate16, on host-order values. */
static __always_inline __u16 csum_upd16(__u16 hc, __u16 o, __u16 n)
{
	__u32 s = (__u32)(__u16)~hc + (__u16)~o + n;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~(__u16)s;
}

/* inner_walk_step is one header of the walk over the extension headers of
 * an IPv6 packet quoted in an ICMPv6 error (at base in the packet, the
 * quoted datagram ending at end), as the engine's parse walks any
 * packet's: hop-by-hop, routing, destination options, mobility and AH
 * (its length read as IPFilter's, in 8-byte units) and the fragment
 * header. A header cut short by the end of the quoted datagram leaves it
 * with no protocol (59); a fragment header with an offset makes a
 * fragment body. ok is 1 once the walk has come to its end. */
struct inner_walk_ctx {
	struct __sk_buff *skb;
	__u32 base; /* where the quoted packet starts in skb */
	__u32 off;
	__u32 end;
	__u8 nh;
	__u8 ok;
	__u8 cut;
	__u8 frag;
	__u8 ah;
	__u8 pad[3];
};

/* inner_walk_step reads the header from the packet, not from w->in.b:
 * an offset into the buffer would be a precise scalar to the verifier,
 * one state per length the chain may have reached. */
static long inner_walk_step(__u32 i, struct inner_walk_ctx *c)
{
	__u8 h[4];
	__u32 hl;

	switch (c->nh) {
	case 0:
	case 43:
	case 51:
	case 60:
	case 135:
		if (c->off + 8 > c->end) {
			c->cut = 1;
			break;
		}
		if (bpf_skb_load_bytes(c->skb, c->base + c->off, h, 2) < 0)
			return 1;
		hl = ((__u32)h[1] + 1) * 8;
		if (c->off + hl > c->end) {
			c->cut = 1;
			break;
		}
		if (c->nh == 51)
			c->ah = 1;
		c->nh = h[0];
		c->off += hl;
		return 0;
	case 44:
		if (c->off + 8 > c->end) {
			c->cut = 1;
			break;
		}
		if (bpf_skb_load_bytes(c->skb, c->base + c->off, h, 4) < 0)
			return 1;
		c->nh = h[0];
		if (((__u16)h[2] << 8 | h[3]) & 0xfff8)
			c->frag = 1;
		else {
			c->off += 8;
			return 0;
		}
		break;
	}
	c->ok = 1;
	return 1;
}

/* nat_inner_walk walks the extension headers of the IPv6 packet in w->in
 * (its next header in in->proto, its datagram ending at end) and leaves
 * in in->proto, in->l4 and in->l4len what the engine's parse finds after
 * them: protocol 59 and no L4 header for a chain cut short, a fragment
 * body (in->fragbody) for a fragment header with an offset, and no L4
 * header to read in place behind AH but for a whole TCP header. A
 * function of its own so that the verifier walks it once. The headers
 * are read from the packet, so the chain may run past the ICMP_INNER bytes
 * held in w->in.b. Returns 0 when it cannot be read to its end. */
GLOBAL int nat_inner_walk(struct __sk_buff *skb, __u32 base, __u32 end)
{
	struct work *w = get_work();
	struct inner_walk_ctx c = {};
	struct inner *in;

	if (!w || !skb)
		return 0;
	in = &w->in;
	c.skb = skb;
	c.base = base;
	c.off = 40;
	c.end = end;
	c.nh = in->proto;
	/* each header takes at least 8 bytes of an error's quote (at most
	 * an IPv6 minimum MTU) */
	bpf_loop(1280 / 8, inner_walk_step, &c, 0);
	if (!c.ok)
		return 0;
	in->proto = c.nh;
	if (c.cut) {
		in->proto = 59;
		in->l4 = 0;
		return 1;
	}
	if (c.frag) {
		in->fragbody = 1;
		in->l4 = 0;
		return 1;
	}
	if (c.ah && (c.nh != IPPROTO_TCP || c.off + 20 > end)) {
		/* behind AH only a whole TCP header has ports (the engine's
		 * parse): the rest goes to inner_parse's reading of a cut
		 * header, as the engine's parseInner does with its l4 < 0 */
		in->l4 = 0;
		return 1;
	}
	in->l4 = c.off;
	in->l4len = end - c.off;
	return 1;
}

/* nat_inner_parse is the engine's parseInner over in->b (m bytes held of a
 * total of tot). Returns 0 when the engine would not parse it, and when
 * the quoted TCP, UDP or ICMP header, whose ports, ids and checksum a
 * translation rewrites, lies beyond the ICMP_INNER bytes held (only
 * behind IPv6 extension headers of more than ICMP_INNER - 60 bytes): the
 * kernel leaves such an error alone. A function of
 * its own: the verifier walks what follows it once for all its outcomes. */
GLOBAL int nat_inner_parse(struct __sk_buff *skb, __u32 base, __u32 tot)
{
	struct work *w = get_work();
	struct inner *in;
	__u8 *b;
	__u32 end, hl;

	if (!w || !skb)
		return 0;
	in = &w->in;
	b = in->b;

	in->l4 = 0;
	in->pflags = 0;
	in->fragbody = 0;
	in->sport = in->dport = 0;
	if (in->m < 1)
		return 0;
	if (b[0] >> 4 == 4) {
		if (in->m < 20)
			return 0;
		hl = (b[0] & 15) * 4;
		if (hl < 20 || hl > tot)
			return 0;
		in->v6 = 0;
		in->hl = hl;
		in->proto = b[9];
		__builtin_memset(in->src, 0, 32);
		__builtin_memcpy(in->src, b + 12, 4);
		__builtin_memcpy(in->dst, b + 16, 4);
		end = be16(b, 2);
		if (end > tot || end < hl)
			end = tot;
		if (be16(b, 6) & 0x1fff) {
			in->fragbody = 1;
			return 1;
		}
		in->l4 = hl;
		in->l4len = end - hl;
	} else if (b[0] >> 4 == 6) {
		__u8 nh;

		if (in->m < 40)
			return 0;
		in->v6 = 1;
		in->hl = 40;
		__builtin_memcpy(in->src, b + 8, 16);
		__builtin_memcpy(in->dst, b + 24, 16);
		nh = b[6];
		end = 40 + (__u32)be16(b, 4);
		if (end > tot)
			end = tot;
		in->proto = nh;
		in->l4 = 40;
		in->l4len = end - 40;
		if (nh == 0 || nh == 43 || nh == 51 || nh == 60 || nh == 135 || nh == 44) {
			if (!nat_inner_walk(skb, base, end))
				return 0;
			if (in->fragbody)
				return 1;
		}
	} else {
		return 0;
	}
	switch (in->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		if (in->l4 && (in->l4len >= (in->proto == IPPROTO_TCP ? 20u : 8u) ||
			       (in->v6 && in->proto == IPPROTO_TCP && in->l4len >= 4))) {
			/* a whole header; in IPv6 a TCP header of 4 bytes or
			 * more is one too (the engine's cut6) */
			in->pflags = in->proto == IPPROTO_TCP ? PF_TCP : PF_UDP;
		} else if (tot >= in->hl + 4) {
			/* a header cut short: the ports are there. IPv4 wants 8
			 * bytes of it (the engine's parseInner, as IPFilter);
			 * it reads them where the L3 header ends */
			if (!in->v6 && tot < in->hl + 8)
				return 0;
			in->l4 = in->hl;
			in->l4len = tot - in->hl;
			in->pflags = in->proto == IPPROTO_TCP ? PF_TCP : PF_UDP;
		} else {
			in->l4 = 0;
			return 1;
		}
		if (in->l4 + 4 > in->m)
			return 0;
		in->sport = be16(b, in->l4);
		in->dport = be16(b, in->l4 + 2);
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* ICMP in IPv6 or ICMPv6 in IPv4: a protocol like another */
		if ((in->proto == IPPROTO_ICMPV6) != in->v6)
			break;
		if (!in->l4 || in->l4len < 8) {
			in->l4 = 0;
			return 1;
		}
		if (in->l4 + 8 > in->m)
			return 0;
		if (in->proto == IPPROTO_ICMP ? icmp4_query(b[BOUND(in->l4, ICMP_INNER - 1)])
					      : icmp6_query(b[BOUND(in->l4, ICMP_INNER - 1)])) {
			in->pflags = PF_ICMPQ;
			in->sport = in->dport = be16(b, in->l4 + 4);
		}
		break;
	}
	/* the bytes a rewrite patches (ports, ids, checksums) must be held */
	switch (in->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (in->l4 && in->l4 + (in->l4len < 20 ? in->l4len : 20) > in->m)
			return 0;
	}
	return 1;
}

/* inner_l4csum is the engine's l4csum for the embedded packet: the offset
 * of its L4 checksum, 0 if none (tot is the embedded length). */
static __always_inline __u32 inner_l4csum(struct inner *in, __u32 tot)
{
	__u32 c;

	if (!in->l4)
		return 0;
	switch (in->proto) {
	case IPPROTO_TCP:
		c = in->l4 + 16;
		break;
	case IPPROTO_UDP:
		if (in->l4 + 8 <= tot && !in->v6 && be16(in->b, in->l4 + 6) == 0)
			return 0;
		c = in->l4 + 6;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		c = in->l4 + 2;
		break;
	default:
		return 0;
	}
	if (c + 2 > tot || c + 2 > in->m)
		return 0;
	return c;
}

/* inner_addr is the engine's setAddr on the embedded packet. */
static __always_inline void inner_addr(struct inner *in, __u32 tot, int which, const __u32 *a)
{
	__u32 *old = which ? in->dst : in->src;
	__u32 base = in->v6 ? 8 + 16 * which : 12 + 4 * which, c;
	int n = in->v6 ? 8 : 2;
	__u8 nb[16];

	if (words_eq(old, a))
		return;
	__builtin_memcpy(nb, a, 16);
	c = inner_l4csum(in, tot);
	for (int i = 0; i < 8; i++) {
		__u16 o, nw;

		if (i >= n)
			break;
		o = be16(in->b, base + 2 * i);
		nw = (__u16)nb[2 * i] << 8 | nb[2 * i + 1];
		put16(in->b, base + 2 * i, nw);
		if (!in->v6)
			put16(in->b, 10, csum_upd16(be16(in->b, 10), o, nw));
		if (c && in->proto != IPPROTO_ICMP) {
			__u16 hc = csum_upd16(be16(in->b, c), o, nw);

			if (in->proto == IPPROTO_UDP && hc == 0)
				hc = 0xffff;
			put16(in->b, c, hc);
		}
	}
	words_cp(old, a);
}

/* inner_port is the engine's setPort on the embedded packet. */
static __always_inline void inner_port(struct inner *in, __u32 tot, int which, __u16 pn)
{
	__u32 off, c;
	__u16 old;

	if (!in->l4)
		return;
	if (in->pflags & PF_ICMPQ)
		off = in->l4 + 4;
	else if (in->pflags & PF_TCPUDP)
		off = in->l4 + 2 * which;
	else
		return;
	if (off + 2 > in->m)
		return;
	old = be16(in->b, off);
	if (old == pn)
		return;
	put16(in->b, off, pn);
	c = inner_l4csum(in, tot);
	if (c) {
		__u16 hc = csum_upd16(be16(in->b, c), old, pn);

		if (in->proto == IPPROTO_UDP && hc == 0)
			hc = 0xffff;
		put16(in->b, c, hc);
	}
}

/* calc_sumd is IPFilter's CALC_SUMD, side effects included. */
static __always_inline __u32 calc_sumd(__u32 *s1, __u32 *s2)
{
	__u32 sd;

	*s1 = (*s1 & 0xffff) + (*s1 >> 16);
	*s1 = (*s1 & 0xffff) + (*s1 >> 16);
	*s2 = (*s2 & 0xffff) + (*s2 >> 16);
	*s2 = (*s2 & 0xffff) + (*s2 >> 16);
	if (*s1 > *s2)
		(*s2)--;
	sd = *s2 - *s1;
	return (sd & 0xffff) + (sd >> 16);
}

static __always_inline __u16 ipf_port_delta(__u16 cksum, __u16 os, __u16 ns, __u16 od, __u16 nd)
{
	__u32 sum1 = ns, sum4 = os, sum3 = nd, sum2 = od, sumd2, s;

	calc_sumd(&sum4, &sum1);
	calc_sumd(&sum2, &sum3);
	sumd2 = calc_sumd(&sum1, &sum4);
	sumd2 += calc_sumd(&sum3, &sum2);
	if (sumd2 == 0)
		return cksum;
	for (int i = 0; i < 3; i++)
		sumd2 = (sumd2 & 0xffff) + (sumd2 >> 16);
	s = (__u16)~cksum;
	s += ~sumd2 & 0xffff;
	s = (s >> 16) + (s & 0xffff);
	s = (s >> 16) + (s & 0xffff);
	return ~(__u16)s;
}

/* outer_addr rewrites the outer source (which 0) or destination of the
 * ICMP error, with the IPv4 header checksum and, for ICMPv6, the pseudo
 * header's share of icmp_ck (host order, updated in place). */
static __always_inline int outer_addr(struct __sk_buff *skb, struct pkt *p, int which, const __u32 *a, __u16 *icmp_ck)
{
	__u32 *old = which ? p->dst : p->src;
	__u32 l3 = p->l3off & 0xff;
	__u8 ob[16], nb[16];
	__u16 ipck = 0;
	int n = p->family == 6 ? 8 : 2;

	if (words_eq(old, a))
		return 0;
	__builtin_memcpy(ob, old, 16);
	__builtin_memcpy(nb, a, 16);
	if (p->family == 4 && bpf_skb_load_bytes(skb, l3 + 10, &ipck, 2) < 0)
		return -1;
	ipck = bpf_ntohs(ipck);
	for (int i = 0; i < 8; i++) {
		__u16 o, nw;

		if (i >= n)
			break;
		o = (__u16)ob[2 * i] << 8 | ob[2 * i + 1];
		nw = (__u16)nb[2 * i] << 8 | nb[2 * i + 1];
		if (p->family == 4)
			ipck = csum_upd16(ipck, o, nw);
		else
			*icmp_ck = csum_upd16(*icmp_ck, o, nw);
	}
	if (p->family == 4) {
		ipck = bpf_htons(ipck);
		bpf_skb_store_bytes(skb, l3 + 12 + 4 * which, a, 4, BPF_F_RECOMPUTE_CSUM);
		bpf_skb_store_bytes(skb, l3 + 10, &ipck, 2, BPF_F_RECOMPUTE_CSUM);
	} else {
		bpf_skb_store_bytes(skb, l3 + 8 + 16 * which, a, 16, BPF_F_RECOMPUTE_CSUM);
	}
	words_cp(old, a);
	return 0;
}

/* fixICMPChecksum: the ICMP checksum follows every 16-bit word of the
 * embedded bytes that changed from in->o to in->b (m bytes). */
struct fix_ctx {
	__u32 m;
	__u16 ck;
	__u16 pad;
};

static long fix_step(__u32 k, struct fix_ctx *c)
{
	struct work *w = get_work();
	struct inner *in;
	__u32 i = k * 2;
	__u16 o, nw;

	if (!w || i >= c->m || i >= ICMP_INNER)
		return 1;
	in = &w->in;
	if (i + 1 < c->m) {
		o = be16(in->o, i);
		nw = be16(in->b, i);
	} else {
		/* an odd last byte, as the high half of a word */
		o = (__u16)in->o[BOUND(i, ICMP_INNER - 1)] << 8;
		nw = (__u16)in->b[BOUND(i, ICMP_INNER - 1)] << 8;
	}
	if (o != nw)
		c->ck = csum_upd16(c->ck, o, nw);
	return 0;
}

static __always_inline __u16 inner_fix(struct inner *in, __u16 ck, __u32 m)
{
	struct fix_ctx c = { .m = m, .ck = ck };

	bpf_loop(ICMP_INNER / 2, fix_step, &c, 0);
	return c.ck;
}

/* nat_inner_rewrite puts the session's tuple (w->t) into the packet an
 * ICMP error quotes (w->in, tot its length): back, the original addresses
 * and ports (the error goes against the session's direction), else the
 * translated ones. A function of its own, verified once: its four
 * address rewrites (eight 16-bit words each, with their checksums) inline
 * in nat_icmperr were verified again under each state of the lookup
 * before them. */
GLOBAL int nat_inner_rewrite(__u32 tot, __u32 back)
{
	struct work *w = get_work();
	struct nat_tuple *t;
	struct inner *in;

	if (!w)
		return 0;
	in = &w->in;
	t = &w->t;
	if (back) {
		inner_addr(in, tot, 0, t->osrc);
		inner_addr(in, tot, 1, t->odst);
		if (in->pflags & PF_ICMPQ) {
			inner_port(in, tot, 0, bpf_ntohs(t->osport));
		} else {
			inner_port(in, tot, 0, bpf_ntohs(t->osport));
			inner_port(in, tot, 1, bpf_ntohs(t->odport));
		}
	} else {
		inner_addr(in, tot, 0, t->ndst);
		inner_addr(in, tot, 1, t->nsrc);
		if (in->pflags & PF_ICMPQ) {
			inner_port(in, tot, 0, bpf_ntohs(t->nsport));
		} else {
			inner_port(in, tot, 0, bpf_ntohs(t->ndport));
			inner_port(in, tot, 1, bpf_ntohs(t->nsport));
		}
	}
	return 0;
}

/* nat_icmperr translates an ICMP error whose embedded packet belongs to a
 * session (the engine's icmpError). Returns 1 if translated. */
GLOBAL int nat_icmperr(struct __sk_buff *skb)
{
	struct work *w = get_work();
	struct inner *in;
	struct pkt *p;
	struct nat_sess *v;
	struct nat_tuple *t;
	struct nat_key *k;
	__u32 tot, m, off, tm;
	__u16 ck, cknet;
	struct nat_key speer;
	__u8 sdir;
	int fwd;

	if (!w || !skb)
		return 0;
	p = &w->p;
	in = &w->in;
	if (!p->l4off || p->l4len < 8 + 20)
		return 0;
	/* an IPv4 error with options is no error to IPFilter's NAT
	 * (ipf_nat_icmperrorlookup checks fin_hlen), as the engine */
	if (p->family == 4 && p->l4off != p->l3off + 20)
		return 0;
	tot = p->l4len - 8;
	m = tot < ICMP_INNER ? tot : ICMP_INNER;
	off = (__u32)p->l4off + 8;
	in->m = m;
	if (m < 20 || bpf_skb_load_bytes(skb, off, in->b, m & (ICMP_INNER - 1) ? m & (ICMP_INNER - 1) : ICMP_INNER) < 0)
		return 0;
	if (!nat_inner_parse(skb, off, tot))
		return 0;
	k = &w->k2;
	t = &w->t;
	key_of(k, p->dir, in->proto, in->v6 ? 6 : 4, in->dst, in->src, bpf_htons(in->dport), bpf_htons(in->sport));
	/* the error's lookup binds the session as a packet's does */
	v = sess_find(k, p->ifindex);
	if (!v)
		return 0;
	/* an error is the session's only when it goes back to the quoted
	 * packet's sender (the engine's icmpError, as IPFilter) */
	if (!words_eq(p->dst, in->src))
		return 0;
	/* a copy of one session's entry (sess_pin), or as none */
	w->pin = sess_pin(k, v);
	if (!w->pin)
		return 0;
	*t = v->t;
	sdir = v->sdir;
	speer = v->peer;
	if (!sess_held(v, w->pin))
		return 0;
	__builtin_memcpy(in->o, in->b, ICMP_INNER);
	nat_inner_rewrite(tot, p->dir != sdir);
	if (bpf_skb_load_bytes(skb, p->l4off + 2, &cknet, 2) < 0)
		return 0;
	ck = bpf_ntohs(cknet);
	tm = m;
	if ((in->pflags & PF_TCPUDP) && in->l4 && in->l4 + 4 <= m) {
		int kept;

		if (in->proto == IPPROTO_TCP)
			kept = in->l4len >= 18;
		else
			kept = in->l4len >= 8 && in->l4 + 8 <= m && be16(in->b, in->l4 + 6) != 0;
		if (!kept) {
			__u16 os = be16(in->o, in->l4), od = be16(in->o, in->l4 + 2);
			__u16 ns = be16(in->b, in->l4), nd = be16(in->b, in->l4 + 2);

			/* the ports' change goes through IPFilter's delta */
			put16(in->o, in->l4, ns);
			put16(in->o, in->l4 + 2, nd);
			ck = ipf_port_delta(inner_fix(in, ck, tm), os, ns, od, nd);
			goto store;
		}
	}
	ck = inner_fix(in, ck, tm);
store:
	if (bpf_skb_store_bytes(skb, off, in->b, m & (ICMP_INNER - 1) ? m & (ICMP_INNER - 1) : ICMP_INNER,
				BPF_F_RECOMPUTE_CSUM) < 0)
		return 0;
	fwd = 0;
	if (p->morefrags) {
		/* an error sent as a first fragment: the rest of its datagram
		 * gets the same outer header (the engine's icmpErr fragment
		 * entries; docs/ipfilter-differences.md C19) */
		/* the key in the work area: this function's stack is in the
		 * deepest call chain (nat_inner_walk's) */
		struct nat_frag *fv = &w->fv;

		__builtin_memset(fv, 0, sizeof(*fv));
		fv->k.dir = DIR_ICMPERR;
		fv->k.sport = p->dir == DIR_IN;
		fv->ska = *k;
		fv->skb = speer;
		fv->seq = w->pin;
		/* ipfr_firstend's, as any first fragment's: an ICMPv4
		 * error's is 8 (the engine's icmpError) */
		fv->end = p->family == 4 ? frag_end4(p) : p->fragend;
		if (p->dir == DIR_IN) {
			words_cp(fv->k.src, in->src);
		} else if (sdir == DIR_OUT) {
			/* the new source and the new destination (a
			 * rewrite's; the engine's fragEntry.dst) */
			words_cp(fv->k.src, t->nsrc);
			words_cp(fv->k.dst, t->ndst);
			fv->k.sport |= 2;
		} else
			words_cp(fv->k.src, t->odst);
		frag_key(&w->fk, p);
		frag_put(&w->fk, fv);
	}
	if (p->dir == DIR_IN) {
		outer_addr(skb, p, 1, in->src, &ck);
	} else if (sdir == DIR_OUT) {
		outer_addr(skb, p, 0, t->nsrc, &ck);
		outer_addr(skb, p, 1, t->ndst, &ck);
	} else
		outer_addr(skb, p, 0, t->odst, &ck);
	cknet = bpf_htons(ck);
	bpf_skb_store_bytes(skb, p->l4off + 2, &cknet, 2, BPF_F_RECOMPUTE_CSUM);
	stat_inc(p->dir * NS_SIDE + NS_ICMP);
	return 1 + fwd;
}

/* ------------------------------------------------------------ ftp proxy */

GLOBAL int nat_proxy(struct __sk_buff *skb, __u32 fwd);

/* ---------------------------------------------------------------- main */

static __always_inline void mark_done(struct __sk_buff *skb)
{
	struct nat_hot *h = get_hot();

	if (h && h->cookie)
		skb->cb[4] = h->cookie;
}

/* nat_finish rewrites a packet of a known session (entry key w->k2) and
 * runs what follows the rewrite: MSS clamping, the note for later
 * fragments, and (from the main function) the proxy. Returns 1 when no
 * entry is at w->k2 any more (it ended, or another CPU's new session took
 * the key over, since the caller found or made it): the packet is left
 * as it came, and the caller must not send it on so. A rewrite apply
 * gives up on (a header too short for the ports) returns 0: the
 * addresses were written, as the engine does. Returns 2 when the entry
 * changed while it was applied (its session ended and another CPU's new
 * session reused it, sess_pin): the packet may carry that session's
 * addresses, and the caller drops it (BadNAT). */
GLOBAL int nat_finish(struct __sk_buff *skb)
{
	struct work *w = get_work();
	struct nat_sess *v;
	struct nat_key *k;
	struct pkt *p;
	__u16 mss;
	__u8 proxy, vw;
	int r;

	if (!w || !skb)
		return 0;
	p = &w->p;
	k = &w->k2;
	v = bpf_map_lookup_elem(&sessions, k);
	if (!v)
		return 1;
	w->pin = sess_pin(k, v);
	if (!w->pin)
		return 1;
	mss = v->mss;
	/* for the fragment entry this packet may make */
	w->fv.ska = *k;
	w->fv.skb = v->peer;
	w->fv.seq = w->pin;
	proxy = v->sflags & SF_PROXY;
	vw = v->w;
	if (v->sflags & SF_SLAVE)
		w->slave = 1;
	if (proxy) {
		/* the proxy needs the session's forward key */
		if (vw == 0)
			w->k = *k;
		else
			w->k = v->peer;
	}
	r = apply(skb, k, v, p, now_ns());
	if (!sess_held(v, w->pin))
		return 2;
	if (r < 0)
		return 0;
	stat_inc(p->dir * NS_SIDE + NS_TRANSLATED);
	if (p->dir == DIR_OUT)
		mark_done(skb);
	if (mss && p->proto == IPPROTO_TCP && p->l4off && p->l4len >= 20 && (p->tcpflags & 0x02))
		nat_mss(skb, p->l4off, p->csumoff, mss);
	if (p->morefrags && !p->tcpbad && !p->nonote)
		note_frag(p, k);
	/* the proxy runs from the program's main function: called from
	 * here the call chain would be deeper than the verifier allows */
	if (proxy && p->proto == IPPROTO_TCP && p->l4off)
		w->proxy = vw == 0 ? 1 : 2;
	return 0;
}

/* nat_frag_body translates a fragment after the first as the session its
 * datagram's first fragment used; one that overlaps the first fragment
 * follows none (IPFilter's fragment cache does not match it). A session
 * is whole or gone for it, as in the engine, which removes a session and
 * forgets its fragment entries at once: the entry of the fragment's
 * direction missing, or holding another session (another CPU ending the
 * session deletes its entries one by one, and a new session may take a
 * key meanwhile), is the session gone, and the fragment follows no entry
 * (before trust12 it left untranslated, or translated by the other
 * session's entry). */
GLOBAL int nat_frag_body(struct __sk_buff *skb)
{
	struct work *w = get_work();
	struct nat_frag *fe;
	struct nat_key *k;
	struct nat_sess *v;
	struct pkt *p;
	int r;

	if (!w || !skb)
		return TC_ACT_UNSPEC;
	p = &w->p;
	frag_key(&w->fk, p);
	fe = bpf_map_lookup_elem(&frags, &w->fk);
	if (fe)
		fe = frag_copy(w, fe, p);
	/* an entry ends with its session (the engine forgets it then) */
	v = NULL;
	if (fe && !(fe->k.dir & DIR_ICMPERR)) {
		v = frag_sess(fe, &w->k2);
		if (v && (v->sdir ^ v->w) != p->dir) {
			/* a fragment going the other way uses the other entry */
			w->k2 = v->peer;
			v = bpf_map_lookup_elem(&sessions, &w->k2);
			if (v && v->seq != fe->seq)
				v = NULL;
		}
		if (!v)
			fe = NULL;
	} else if (fe && !frag_live(fe)) {
		fe = NULL;
	}
	if (!fe || p->fragoff < fe->end) {
		/* no entry takes it: a protocol without ports or ids (GRE,
		 * ESP, IP in IP, ...) still finds its session by its addresses,
		 * as in IPFilter (the engine's portless); it never starts one.
		 * So does a TCP body, the portless session a TCP header cut
		 * short started (IPFilter looks it up with fin_data zero), and
		 * an ICMP body the session of an ICMP packet whose bytes 4-5
		 * are zero */
		if (p->proto == IPPROTO_UDP)
			return TC_ACT_UNSPEC;
		/* IPv6 AH bodies never find a session (the engine's check) */
		if (p->family == 6 && p->proto == IPPROTO_AH)
			return TC_ACT_UNSPEC;
		k = &w->k2;
		__builtin_memcpy(k->src, p->src, 16);
		__builtin_memcpy(k->dst, p->dst, 16);
		k->sport = 0;
		k->dport = 0;
		k->proto = p->proto;
		k->dir = p->dir;
		k->family = p->family;
		k->pad = 0;
		v = sess_find(k, p->ifindex);
		if (!v)
			return TC_ACT_UNSPEC;
		goto translate;
	}
	k = &w->k2;
	if (fe->k.dir & DIR_ICMPERR) {
		/* the rest of an ICMP error sent as a first fragment gets its
		 * first fragment's outer header (C19) */
		__u16 unused = 0;

		*k = fe->k;
		if (outer_addr(skb, p, k->sport & 1, k->src, &unused) == 0 &&
		    (!(k->sport & 2) || outer_addr(skb, p, 1, k->dst, &unused) == 0)) {
			stat_inc(p->dir * NS_SIDE + NS_FRAG);
			stat_inc(p->dir * NS_SIDE + NS_TRANSLATED);
		}
		return TC_ACT_UNSPEC;
	}
	if (!v)
		return TC_ACT_UNSPEC;
translate:
	/* one session's entry, or the session is gone (sess_pin) */
	w->pin = sess_pin(k, v);
	if (!w->pin)
		return TC_ACT_UNSPEC;
	r = apply(skb, k, v, p, now_ns());
	if (!sess_held(v, w->pin)) {
		stat_inc(p->dir * NS_SIDE + NS_BADNAT);
		return TC_ACT_SHOT;
	}
	if (r == 0) {
		stat_inc(p->dir * NS_SIDE + NS_FRAG);
		stat_inc(p->dir * NS_SIDE + NS_TRANSLATED);
	}
	return TC_ACT_UNSPEC;
}

/* nat_slow handles what the fast path does not: ICMP errors, fragment
 * bodies, and packets of no session (wildcards, then the rules). */
GLOBAL int nat_slow(struct __sk_buff *skb)
{
	struct work *w = get_work();
	struct nat_key *k;
	struct nat_sess *v;
	struct pkt *p;
	int r;

	if (!w || !skb)
		return TC_ACT_UNSPEC;
	p = &w->p;
	if (w->pre && (p->icmperr || p->fragbody))
		return TC_ACT_UNSPEC;
	/* an error quoting no session is an ICMP packet like another: it
	 * finds or starts a session of its own (internal/nat check) */
	if (p->icmperr && nat_icmperr(skb))
		return TC_ACT_UNSPEC;
	if (p->fragbody)
		return nat_frag_body(skb);
	k = &w->k2;
	key_of(k, p->dir, p->proto, p->family, p->src, p->dst, p->nq ? p->nqid : p->sport,
	       p->nq ? p->nqid : p->dport);
	v = w->nohit ? NULL : bpf_map_lookup_elem(&sessions, k);
	if (v && w->pre && !(v->sflags & SF_SLAVE)) {
		/* the egress program before the filter binds no session but
		 * a proxy's data connection's: the packet may yet be blocked,
		 * and IPFilter's NAT looks it up only after the filter */
		if (!v->ifindex || v->ifindex == p->ifindex)
			return TC_ACT_UNSPEC;
		v = NULL;
	} else if (v || (!w->pre && cfg(NCFG_SHADOWS))) {
		/* the entry, or the newest of the sessions it shadows that
		 * applies on this interface */
		v = sess_find(k, p->ifindex);
	}
	if (v) {
		/* a session that needs more than the fast path gives */
		if (w->pre && !(v->sflags & SF_SLAVE))
			return TC_ACT_UNSPEC;
		/* an ICMP packet that is not a query, found by its bytes
		 * 4-5, makes no fragment entry (the engine's check) */
		p->nonote = p->nq;
		r = nat_finish(skb);
		if (!r)
			return TC_ACT_UNSPEC;
		if (r == 2) {
			stat_inc(p->dir * NS_SIDE + NS_BADNAT);
			return TC_ACT_SHOT;
		}
		/* the session ended (a flush, its timer) or another CPU's
		 * new session took its key over, between the lookup and the
		 * rewrite: the packet is one of no session, as it would have
		 * been a moment later (sent on as it came, it would leave
		 * untranslated although its session was there) */
		key_of(k, p->dir, p->proto, p->family, p->src, p->dst, p->nq ? p->nqid : p->sport,
		       p->nq ? p->nqid : p->dport);
		v = NULL;
	}
	if (p->cut) {
		/* a TCP header cut short without a session of its ports is
		 * a packet without ports that finds no session either: it
		 * starts one of its own, which takes over the key of an
		 * earlier one (shadow), with no clash check (the engine's
		 * check and newMap: IPFilter looks it up by its ports only) */
		p->cut = 0;
		p->tcpbad = 0;
		p->cutnew = 1;
		p->sport = p->dport = 0;
		key_of(k, p->dir, p->proto, p->family, p->src, p->dst, 0, 0);
	}
	/* a session on another interface, or none */
	stat_inc(p->dir * NS_SIDE + NS_MISS);
	r = 0;
	if (cfg(NCFG_WILDS))
		r = nat_wild();
	if (r == 2) {
		/* another CPU took the wildcard at the same moment, most
		 * likely for this packet's flow (a wildcard stands for one
		 * connection, the proxy's data connection): that session is
		 * this packet's */
		v = sess_find(k, p->ifindex);
		if (v) {
			stat_raced(w, p->dir);
			if (!nat_finish(skb))
				return TC_ACT_UNSPEC;
		}
		/* gone again, or not entered yet: a wildcard matched, and
		 * the packet may not leave untranslated */
		stat_inc(p->dir * NS_SIDE + NS_BADNAT);
		return TC_ACT_SHOT;
	}
	if (!r && w->pre)
		return TC_ACT_UNSPEC; /* the rules are the other program's */
	if (!r)
		r = nat_new();
	if (r <= 0 && !p->cutnew && (r < 0 || cfg(NCFG_WILDSEEN))) {
		/* no session made: maybe because another CPU had just made
		 * this packet's own, since this one's lookup missed. A rule
		 * matched, whose clash check saw it (its reply key taken:
		 * "translation exists", or no other address or port to
		 * take); or no rule did, and the other CPU turned a proxy's
		 * wildcard into the session (which goes in before the
		 * wildcard goes out, and before the count of wildcards this
		 * packet read falls: nat_wild). Then it is this packet's
		 * session, as a lookup a moment later would have found it
		 * (not for a cut TCP header's portless session, which never
		 * finds one of its key). w->k2 was the clash checks' key. A
		 * lookup more for a packet no rule translates, once the
		 * datapath has had a wildcard (NCFG_WILDSEEN, set before the
		 * first one goes in, so that this packet reads it set if one
		 * was there when its lookup missed) */
		key_of(k, p->dir, p->proto, p->family, p->src, p->dst, p->nq ? p->nqid : p->sport,
		       p->nq ? p->nqid : p->dport);
		if (sess_find(k, p->ifindex)) {
			int f;

			stat_raced(w, p->dir);
			f = nat_finish(skb);
			if (!f)
				return TC_ACT_UNSPEC;
			if (f == 2)
				r = -1;
		}
	}
	if (r < 0) {
		stat_inc(p->dir * NS_SIDE + NS_BADNAT);
		return TC_ACT_SHOT;
	}
	if (r == 0) {
		stat_inc(p->dir * NS_SIDE + NS_IGNORED);
		return TC_ACT_UNSPEC;
	}
	w->k2 = w->k;
	if (nat_finish(skb)) {
		/* the session made for it (or, made by another CPU at the
		 * same moment, found) is gone already: another CPU's new
		 * session of another interface took its key over (the old
		 * one lives on as a shadow), or it ended. A rule matched, so
		 * the packet may not leave untranslated: dropped, as when no
		 * session could be made (fail closed) */
		stat_inc(p->dir * NS_SIDE + NS_BADNAT);
		return TC_ACT_SHOT;
	}
	return TC_ACT_UNSPEC;
}

static __always_inline int nat_run(struct __sk_buff *skb, __u32 dir, int pre)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct work *w = get_work();
	struct nat_key *k;
	struct nat_sess *v;
	struct pkt *pp;
	__u32 l3 = 14, l3dev;

	if (!w || !skb)
		return TC_ACT_UNSPEC;
	dir &= 1;
	pp = &w->p;
#define p (*pp)
	/* While user space moves the egress program behind the filter, two
	 * instances run for a moment: the second leaves alone what the first
	 * translated (the cookie is only set, and checked, during the move). */
	{
		struct nat_hot *h = get_hot();

		if (!h)
			return TC_ACT_UNSPEC;
		if (dir == DIR_OUT && h->cookie && skb->cb[4] == h->cookie)
			return TC_ACT_UNSPEC;
		l3dev = h->l3dev;
	}
	if (l3dev) {
		__u32 ifx = skb->ifindex, *l2 = bpf_map_lookup_elem(&l2lens, &ifx);

		if (l2)
			l3 = *l2 & 0xff;
	}
	__builtin_memset(pp, 0, sizeof(*pp));
	p.l3off = l3;
	p.dir = dir;
	p.ifindex = skb->ifindex;
	if (skb->len <= l3)
		return TC_ACT_UNSPEC;
	p.len = skb->len - l3;
	if (data + l3 + 40 > end && skb->len > end - data) {
		bpf_skb_pull_data(skb, skb->len < l3 + 128 ? skb->len : l3 + 128);
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
	}
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + (l3 & 0xff);
		__u32 hl, tot;

		if ((void *)(ip + 1) > end || ip->version != 4)
			return TC_ACT_UNSPEC;
		hl = ip->ihl * 4;
		if (hl < 20 || hl > p.len)
			return TC_ACT_UNSPEC;
		p.family = 4;
		p.proto = ip->protocol;
		p.src[0] = ip->saddr;
		p.dst[0] = ip->daddr;
		tot = bpf_ntohs(ip->tot_len);
		if (tot > p.len || tot < hl)
			tot = p.len;
		p.ipid = bpf_ntohs(ip->id);
		if (unlikely(hl > 20) && (ip->frag_off & bpf_htons(0x3fff)))
			nat_v4_fragopts(skb, l3 + 20, hl - 20);
		p.morefrags = !!(ip->frag_off & bpf_htons(0x2000));
		if (ip->frag_off & bpf_htons(0x1fff)) {
			p.fragbody = 1;
			p.fragoff = (bpf_ntohs(ip->frag_off) & 0x1fff) << 3;
		} else {
			p.fragend = tot - hl;
			p.l4off = l3 + hl;
			p.l4len = tot - hl;
		}
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + (l3 & 0xff);
		__u32 pl;

		if ((void *)(ip6 + 1) > end || ip6->version != 6)
			return TC_ACT_UNSPEC;
		if (p.len < 40)
			return TC_ACT_UNSPEC;
		p.family = 6;
		__builtin_memcpy(p.src, &ip6->saddr, 16);
		__builtin_memcpy(p.dst, &ip6->daddr, 16);
		p.proto = ip6->nexthdr;
		pl = bpf_ntohs(ip6->payload_len);
		if (40 + pl > p.len)
			pl = p.len - 40;
		p.l4len = pl;
		p.l4off = l3 + 40;
		switch (p.proto) {
		case 0:
		case 43:
		case 51:
		case 60:
		case 135:
		case 44:
			if (!nat_v6_walk(skb))
				return TC_ACT_UNSPEC;
			break;
		}
	} else {
		return TC_ACT_UNSPEC;
	}
	if (!parse_l4(skb, pp)) {
		/* headers beyond the linear part: pull them in and retry */
		if (bpf_skb_pull_data(skb, p.l4off + 60 < skb->len ? p.l4off + 60 : skb->len) < 0)
			return TC_ACT_UNSPEC;
		if (!parse_l4(skb, pp))
			return TC_ACT_UNSPEC;
	}
	/* ICMPv6 informational messages other than echo (MLD, neighbour
	 * discovery, ...) are left alone by every rule, as in IPFilter (the
	 * engine's checkTag) */
	if (p.family == 6 && p.proto == IPPROTO_ICMPV6 && p.l4off && p.icmptype > 129)
		return TC_ACT_UNSPEC;
	if (!p.icmperr && !p.fragbody) {
		k = &w->k;
		__builtin_memcpy(k->src, p.src, 16);
		__builtin_memcpy(k->dst, p.dst, 16);
		k->sport = p.nq ? p.nqid : p.sport;
		k->dport = p.nq ? p.nqid : p.dport;
		k->proto = p.proto;
		k->dir = dir;
		k->family = p.family;
		k->pad = 0;
		v = bpf_map_lookup_elem(&sessions, k);
		w->nohit = !v;
		if (v && pre && !(v->sflags & SF_SLAVE) && (!v->ifindex || v->ifindex == p.ifindex))
			return TC_ACT_UNSPEC; /* and binds nothing (nat_slow) */
		if (v && !v->mss && !(v->sflags & SF_PROXY) && !p.morefrags && sess_take(v, p.ifindex)) {
			/* one session's entry (sess_pin); else as a miss */
			w->pin = sess_pin_call(k, v);
			if (w->pin) {
				int r;

				if (v->sflags & SF_SLAVE)
					w->slave = 1;
				r = apply(skb, k, v, pp, now_ns());
				/* the work area found again: one register
				 * less to keep across apply (the stack of the
				 * deepest call chain has no 8 bytes left) */
				w = get_work();
				if (!w || !sess_held(v, w->pin)) {
					/* the entry changed while applied: the
					 * packet may carry another session's
					 * addresses */
					stat_inc(dir * NS_SIDE + NS_BADNAT);
					return TC_ACT_SHOT;
				}
				if (r == 0) {
					stat_inc(dir * NS_SIDE + NS_TRANSLATED);
					if (dir == DIR_OUT)
						mark_done(skb);
				}
				return TC_ACT_UNSPEC;
			}
		}
	}
	return nat_slow(skb);
#undef p
}

/* nat_main is each program's body. The packets of the data connections
 * the ftp proxy opened pass the filter, as the state entry IPFilter's
 * proxy makes for them would let them: inbound NAT runs before the filter
 * and ends the chain for them; outbound, a second egress program (pre)
 * placed before the filter does their translation and ends the chain. */
static __always_inline int nat_main(struct __sk_buff *skb, __u32 dir, int pre)
{
	struct work *w = get_work();
	int ret;

	if (!w)
		return TC_ACT_UNSPEC;
	w->proxy = 0;
	w->pre = pre;
	w->slave = 0;
	w->nohit = 0;
	w->nexists = 0;
	w->nwraps = 0;
	ret = nat_run(skb, dir, pre);
	if (w->proxy)
		nat_proxy(skb, w->proxy == 1);
	if (ret == TC_ACT_UNSPEC && w->slave && (dir == DIR_IN || pre))
		return TC_ACT_OK;
	return ret;
}

/* ----------------------------------------------------------- fast path */

#define FAST_NO 0x100 /* not a verdict: the packet needs nat_main */
/* the bytes of a nat_fast the rewrite reads (nsrc up to flags, tcpflags) */
#define FAST_REWRITE 32
_Static_assert(__builtin_offsetof(struct nat_fast, last) == FAST_REWRITE, "nat_fast's rewrite is not its first 32 bytes");

/* fast_l4_csum moves a translated packet's L4 checksum by the entry's
 * differences (diff: both of them), as the skb's checksum state needs:
 * CHECKSUM_PARTIAL holds only the pseudo header's sum, CHECKSUM_COMPLETE
 * needs skb->csum to follow, which only the helper does (the packet
 * pointers are invalid after it: nothing reads them). A UDP checksum
 * that comes out 0 is sent as 0xffff (0 means none). Both fast paths
 * share it. */
static __always_inline void fast_l4_csum(struct __sk_buff *skb, const struct nat_fast *f, __u16 *ck, __u8 proto,
					 __u32 off, __u32 diff)
{
	int summed = ip_summed(skb);

	if (likely(summed == CHECKSUM_PARTIAL)) {
		if (f->csum_l4a)
			*ck = csum_fold32(csum_add32(*ck, f->csum_l4a));
	} else if (likely(summed != CHECKSUM_COMPLETE)) {
		*ck = ~csum_fold32(csum_add32(diff, (__u16)~*ck));
	} else {
		__u64 mf = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;

		if (f->csum_l4a)
			bpf_l4_csum_replace(skb, off, 0, f->csum_l4a, BPF_F_PSEUDO_HDR | mf);
		if (f->csum_l4p)
			bpf_l4_csum_replace(skb, off, 0, f->csum_l4p, mf);
		return;
	}
	if (proto == IPPROTO_UDP && *ck == 0)
		*ck = 0xffff;
}

/* fast_account counts a packet the fast path translated in its entry
 * (the clock moves once a jiffy: most packets leave last as it is) and
 * marks an outbound one against a second translation. */
static __always_inline void fast_account(struct __sk_buff *skb, struct nat_hot *h, struct nat_fast *f, __u64 len,
					 __u8 fl, __u32 cookie, __u64 nspj)
{
	__u64 now;

	f->pkts++;
	f->bytes += len;
	if (unlikely(fl & ~f->tcpflags))
		f->tcpflags |= fl;
	if (nspj != NSPJ_MAGIC)
		now = bpf_jiffies64() * nspj; /* plain: no clock offset */
	else if (likely(h->nspj))
		now = bpf_jiffies64() * h->nspj + h->clock;
	else
		now = bpf_ktime_get_coarse_ns() + h->clock;
	if (f->last != now)
		f->last = now;
	if (unlikely(cookie))
		skb->cb[4] = cookie;
}

/* fast_miss decides a TCP/UDP packet the fast table does not know,
 * with the key k the session table would look it up by: when that table
 * does not know it either and no rule of its direction and no wildcard
 * entry could take it, it is left alone here, counted as the whole way
 * would count it (a miss, ignored), without the tail call, the second
 * parse and the rule walk. Anything else goes the whole way (FAST_NO).
 * Every entry a TCP/UDP key finds has a fast twin until no_twin says
 * otherwise: till then the fast table's miss is the session table's and
 * the second lookup (a 40-byte key) is not made. */
static __always_inline int fast_miss(__u32 dir, int pre, const struct nat_key *k)
{
	struct nat_order *o;
	__u32 ok;

	/* a key whose entry ended may have shadows, which have no twin */
	if (pre || bench_at(ST_NOSHORT) || cfg(NCFG_WILDS) || cfg(NCFG_SHADOWS))
		return FAST_NO;
	ok = (cfg(NCFG_ACTIVE) & 1) * 2 + dir;
	o = bpf_map_lookup_elem(&orders, &ok);
	if (!o || o->n || (cfg(NCFG_NOTWIN) && bpf_map_lookup_elem(&sessions, k)))
		return FAST_NO;
	stat_inc(dir * NS_SIDE + NS_MISS);
	stat_inc(dir * NS_SIDE + NS_IGNORED);
	return TC_ACT_UNSPEC;
}

/* nat_fast4 is the path of an established IPv4 TCP or UDP flow: the
 * headers read in place, one lookup with a 16-byte key in fast4, the
 * rewrite with the checksum differences the entry carries, and the
 * entry's per-packet fields; no per-CPU scratch area, no helper call but
 * for CHECKSUM_COMPLETE skbs. Anything else (another family or protocol,
 * IP options, a fragment, headers beyond the linear part, no fast entry,
 * an MSS-clamped SYN) returns FAST_NO and goes the whole way, which does
 * the same for these packets and more. Its code is laid out as one
 * straight line for a packet it translates (the exits are unlikely()).
 * Inlined in each program (dir and pre are constants there), which then
 * makes no call for the packets it translates: the rest goes on by a tail
 * call (slow_progs), so that the fast path's stack is not added to the
 * slow path's chain of calls (it would be 544 bytes, over the verifier's
 * 512). */
static __always_inline int nat_fast4(struct __sk_buff *skb, __u32 dir, int pre, struct nat_hot *h, __u32 cookie,
				     __u32 l3, __u64 nspj)
{
	void *data, *end;
	struct nat_fkey k;
	struct nat_fast *f = NULL, *fw = NULL, fc;
	struct iphdr *ip;
	__u32 len, tot, diff, *ports;
	__u16 *ck;
	__u8 *l4, proto, fl = 0;

	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip = data + l3;
	l4 = (void *)(ip + 1);
	/* the 8 bytes of a UDP header, the first 8 of a TCP one */
	if (unlikely((void *)(l4 + 8) > end) || unlikely(*(__u8 *)ip != 0x45) ||
	    unlikely(ip->frag_off & bpf_htons(0x3fff)))
		return FAST_NO;
	len = skb->len - l3;
	tot = bpf_ntohs(ip->tot_len);
	if (unlikely(tot > len || tot < 20))
		tot = len; /* as the engine takes a bad total length */
	proto = ip->protocol;
	if (likely(proto == IPPROTO_TCP)) {
		if (unlikely(tot < 40) || unlikely((void *)(l4 + 20) > end))
			return FAST_NO;
		fl = l4[13];
		ck = (__u16 *)(l4 + 16);
	} else if (likely(proto == IPPROTO_UDP)) {
		if (unlikely(tot < 28))
			return FAST_NO;
		ck = (__u16 *)(l4 + 6);
	} else {
		return FAST_NO;
	}
	ports = (__u32 *)l4;
	k.src = ip->saddr;
	k.dst = ip->daddr;
	*(__u32 *)&k.sport = *ports;
	/* proto, dir and pad in one store */
	*(__u32 *)&k.proto = proto | dir << 8;
	if (bench_at(ST_PARSE))
		return TC_ACT_UNSPEC;
	/* the key's slot first: a whole copy of its rewrite (the same even
	 * seq before and after) is used; the per-packet fields are counted
	 * in the slot itself */
	if (!bench_at(ST_NODM)) {
		__u32 q, i = slot_hash(k.src, k.dst, *(__u32 *)&k.sport, *(__u32 *)&k.proto);
		struct nat_slot *s = bpf_map_lookup_elem(&fast4dm, &i);

		if (likely(s)) {
			q = READ_ONCE32(s->seq);
			barrier();
			if (likely(s->k.src == k.src) && likely(s->k.dst == k.dst) &&
			    likely(*(__u32 *)&s->k.sport == *(__u32 *)&k.sport) &&
			    likely(*(__u32 *)&s->k.proto == *(__u32 *)&k.proto) && likely(!(q & 1))) {
				__builtin_memcpy(&fc, &s->f, sizeof(fc));
				barrier();
				if (likely(READ_ONCE32(s->seq) == q)) {
					f = &fc;
					fw = &s->f;
				}
			}
		}
	}
	if (!f) {
		/* an element of fast4 may be written for another key while
		 * it is read (struct nat_fast4): its rewrite is copied and
		 * used only if seq, even, did not move and k is the key */
		struct nat_fast4 *g = bpf_map_lookup_elem(&fast4, &k);

		if (g) {
			__u32 q = READ_ONCE32(g->seq);

			barrier();
			__builtin_memcpy(&fc, &g->f, FAST_REWRITE);
			barrier();
			if (unlikely(q & 1) || unlikely(g->k.src != k.src) || unlikely(g->k.dst != k.dst) ||
			    unlikely(*(__u32 *)&g->k.sport != *(__u32 *)&k.sport) ||
			    unlikely(*(__u32 *)&g->k.proto != *(__u32 *)&k.proto))
				return FAST_NO;
			barrier();
			if (unlikely(READ_ONCE32(g->seq) != q))
				return FAST_NO;
			f = &fc;
			fw = &g->f;
		}
	}
	if (bench_at(ST_LOOKUP))
		return TC_ACT_UNSPEC;
	if (unlikely(!f)) {
		struct nat_key sk = {};

		sk.src[0] = k.src;
		sk.dst[0] = k.dst;
		*(__u32 *)&sk.sport = *ports;
		sk.proto = proto;
		sk.dir = dir;
		sk.family = 4;
		return fast_miss(dir, pre, &sk);
	}
	/* another interface's, or not bound yet (0): the slow path binds it */
	if (unlikely(f->ifindex != skb->ifindex) || unlikely((f->flags & FF_MSS) && (fl & 0x02)))
		return FAST_NO;
	if (pre)
		return TC_ACT_UNSPEC; /* only a proxy's data connections, which have no fast entry */

	ip->saddr = f->nsrc;
	ip->daddr = f->ndst;
	if (f->csum_l3)
		ip->check = ~csum_fold32(csum_add32((__u16)~ip->check, f->csum_l3));
	*ports = *(__u32 *)&f->nsport;
	/* an IPv4 UDP datagram without a checksum keeps none; no change to
	 * the L4 checksum needs no look at the skb's checksum state */
	diff = csum_add32(f->csum_l4a, f->csum_l4p);
	if (diff && (proto == IPPROTO_TCP || *ck != 0))
		fast_l4_csum(skb, f, ck, proto, l3 + 20 + (proto == IPPROTO_TCP ? 16 : 6), diff);
	if (bench_at(ST_REWRITE))
		return TC_ACT_UNSPEC;
	fast_account(skb, h, fw, len, fl, cookie, nspj);
	return TC_ACT_UNSPEC;
}

/* key6_eq: a and b are the same nat_key (ten words). */
static __always_inline int key6_eq(const struct nat_key *a, const struct nat_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	__u32 d = 0;
	int i;

#pragma unroll
	for (i = 0; i < (int)(sizeof(*a) / 4); i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

/* nat_fast6 is nat_fast4 for IPv6: TCP or UDP right after the fixed
 * header (no extension header), the entry's own nat_key looked up in
 * fast6, the addresses and ports rewritten and the L4 checksum moved by
 * the entry's differences (IPv6 has no header checksum). A UDP datagram
 * with a zero checksum field (invalid in IPv6) goes the whole way. */
static __always_inline int nat_fast6(struct __sk_buff *skb, __u32 dir, int pre, struct nat_hot *h, __u32 cookie,
				     __u32 l3, __u64 nspj)
{
	void *data, *end;
	struct nat_key k;
	struct nat_fast6 *f6;
	struct nat_fast *f, fc;
	__u32 na[8], q;
	struct ipv6hdr *ip6;
	__u32 len, pl, diff, *ports;
	__u16 *ck;
	__u8 *l4, proto, fl = 0;

	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip6 = data + l3;
	l4 = (void *)(ip6 + 1);
	if (unlikely((void *)(l4 + 8) > end) || unlikely((*(__u8 *)ip6 >> 4) != 6))
		return FAST_NO;
	len = skb->len - l3;
	pl = bpf_ntohs(ip6->payload_len);
	if (unlikely(40 + pl > len))
		pl = len - 40; /* as the engine takes a payload beyond the buffer */
	proto = ip6->nexthdr;
	if (likely(proto == IPPROTO_TCP)) {
		if (unlikely(pl < 20) || unlikely((void *)(l4 + 20) > end))
			return FAST_NO;
		fl = l4[13];
		ck = (__u16 *)(l4 + 16);
	} else if (likely(proto == IPPROTO_UDP)) {
		if (unlikely(pl < 8))
			return FAST_NO;
		ck = (__u16 *)(l4 + 6);
		if (unlikely(*ck == 0))
			return FAST_NO;
	} else {
		return FAST_NO;
	}
	ports = (__u32 *)l4;
	__builtin_memcpy(k.src, &ip6->saddr, 16);
	__builtin_memcpy(k.dst, &ip6->daddr, 16);
	*(__u32 *)&k.sport = *ports;
	/* proto, dir, family and pad in one store */
	*(__u32 *)&k.proto = proto | dir << 8 | 6 << 16;
	f6 = bpf_map_lookup_elem(&fast6, &k);
	if (unlikely(!f6))
		return fast_miss(dir, pre, &k);
	/* a copy of a whole element of this key, as nat_fast4's of fast4 */
	q = READ_ONCE32(f6->seq);
	barrier();
	__builtin_memcpy(&fc, &f6->f, FAST_REWRITE);
	__builtin_memcpy(na, f6->nsrc, 32);
	barrier();
	if (unlikely(q & 1) || unlikely(!key6_eq(&f6->k, &k)))
		return FAST_NO;
	barrier();
	if (unlikely(READ_ONCE32(f6->seq) != q))
		return FAST_NO;
	f = &fc;
	if (unlikely(f->ifindex != skb->ifindex) || unlikely((f->flags & FF_MSS) && (fl & 0x02)))
		return FAST_NO;
	if (pre)
		return TC_ACT_UNSPEC; /* only a proxy's data connections, which have no fast entry */

	__builtin_memcpy(&ip6->saddr, na, 16);
	__builtin_memcpy(&ip6->daddr, na + 4, 16);
	*ports = *(__u32 *)&f->nsport;
	diff = csum_add32(f->csum_l4a, f->csum_l4p);
	if (diff)
		fast_l4_csum(skb, f, ck, proto, l3 + 40 + (proto == IPPROTO_TCP ? 16 : 6), diff);
	fast_account(skb, h, &f6->f, len, fl, cookie, nspj);
	return TC_ACT_UNSPEC;
}

/* nat_fast is the fast path of either family: what both need first (the
 * hot line, the double-translation guard of an outbound packet, where the
 * IP header starts), then the family's own. A stage probe stops an IPv4
 * packet at its stage and lets no IPv6 one go on. */
static __always_inline int nat_fast(struct __sk_buff *skb, __u32 dir, int pre)
{
	int v6 = skb->protocol == bpf_htons(ETH_P_IPV6);
	struct nat_hot *h = NULL;
	__u64 nspj = k_nspj();
	__u32 cookie = 0, l3 = 14;

	if (v6 ? probe() : bench_at(ST_ENTRY))
		return TC_ACT_UNSPEC;
	if (bench_at(ST_OFF) || unlikely(!v6 && skb->protocol != bpf_htons(ETH_P_IP)))
		return FAST_NO;
	/* a plain program (k_nspj) has all it needs from the hot line as
	 * constants: the verifier keeps one of the two ways */
	if (nspj == NSPJ_MAGIC) {
		h = get_hot();
		if (unlikely(!h))
			return FAST_NO;
		if (dir == DIR_OUT) {
			cookie = h->cookie;
			if (unlikely(cookie) && skb->cb[4] == cookie)
				return TC_ACT_UNSPEC;
		}
		if (unlikely(h->l3dev)) {
			__u32 ifx = skb->ifindex, *l2 = bpf_map_lookup_elem(&l2lens, &ifx);

			if (l2)
				l3 = *l2 & 0xff;
		}
	}
	if (v6)
		return nat_fast6(skb, dir, pre, h, cookie, l3, nspj);
	return nat_fast4(skb, dir, pre, h, cookie, l3, nspj);
}

/* nat_whole is the way for every packet the fast path leaves: the body of
 * the three slow programs. Inline, not a function of its own: the slow
 * programs are programs of their own now (the fast ones tail-call them),
 * and a frame less leaves the clash checks deep in the allocation's call
 * chain one for a function verified once (nat_exists_on). */
static __always_inline int nat_whole(struct __sk_buff *skb, __u32 dir, __u32 pre)
{
	if (!skb)
		return TC_ACT_UNSPEC;
	if (pre)
		return nat_main(skb, DIR_OUT, 1);
	if (dir == DIR_OUT)
		return nat_main(skb, DIR_OUT, 0);
	return nat_main(skb, DIR_IN, 0);
}

/* The programs: the fast path, then (for what it leaves) a tail call to
 * the slow program of the same hook, which user space puts in slow_progs
 * at load. Without it (never in use) the packet is left alone and
 * counted (NS_NOSLOW). */
SEC("tc")
int nat_ingress(struct __sk_buff *skb)
{
	int r = nat_fast(skb, DIR_IN, 0);

	if (r != FAST_NO || probe())
		return r != FAST_NO ? r : TC_ACT_UNSPEC;
	bpf_tail_call(skb, &slow_progs, SLOW_IN);
	stat_inc(NS_NOSLOW);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int nat_egress(struct __sk_buff *skb)
{
	int r = nat_fast(skb, DIR_OUT, 0);

	if (r != FAST_NO || probe())
		return r != FAST_NO ? r : TC_ACT_UNSPEC;
	bpf_tail_call(skb, &slow_progs, SLOW_OUT);
	stat_inc(NS_NOSLOW);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int nat_egress_pre(struct __sk_buff *skb)
{
	int r = nat_fast(skb, DIR_OUT, 1);

	if (r != FAST_NO || probe())
		return r != FAST_NO ? r : TC_ACT_UNSPEC;
	bpf_tail_call(skb, &slow_progs, SLOW_PRE);
	stat_inc(NS_NOSLOW);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int nat_slow_ingress(struct __sk_buff *skb)
{
	return nat_whole(skb, DIR_IN, 0);
}

SEC("tc")
int nat_slow_egress(struct __sk_buff *skb)
{
	return nat_whole(skb, DIR_OUT, 0);
}

SEC("tc")
int nat_slow_egress_pre(struct __sk_buff *skb)
{
	return nat_whole(skb, DIR_OUT, 1);
}

/* ---------------------------------------------------------------- flush */

struct flush_ctx {
	__u64 now;
	__u64 arg;
	__u32 mode;
	__u32 n;
};

static long flush_cb(void *map, struct nat_key *key, struct nat_sess *v, struct flush_ctx *c)
{
	int del = 0;

	if (v->w != 0)
		return 0;
	switch (c->mode) {
	case FL_ALL:
		del = 1;
		break;
	case FL_RULE:
		del = v->rule_id == (__u32)c->arg;
		break;
	case FL_EXPIRED:
		del = sess_expiry(key, v) <= c->now;
		break;
	}
	if (del && sess_delete(key, v, c->mode == FL_EXPIRED ? NS_EXPIRED : NS_FLUSHED))
		c->n++;
	return 0;
}

/* nat_flush is run by user space (BPF_PROG_TEST_RUN), never attached: it
 * removes sessions (NCFG_FLUSHMODE, NCFG_FLUSHARG) with the bookkeeping
 * the timers do, and leaves the count in NCFG_FLUSHED; it also starts
 * the sweeper (FL_ARM) and sweeps on demand (FL_SWEEP). */
SEC("tc")
int nat_flush(struct __sk_buff *skb)
{
	struct flush_ctx c = {};
	__u64 *out;

	c.mode = cfg(NCFG_FLUSHMODE);
	c.arg = cfg(NCFG_FLUSHARG);
	if (c.mode == FL_ARM || c.mode == FL_SWEEP) {
		__u32 zero = 0;
		struct nat_sweeper *sw = bpf_map_lookup_elem(&sweeper, &zero);
		__u64 failed = 1;
		long r;

		if (sw && c.mode == FL_SWEEP) {
			nat_sweep(sw);
			failed = 0;
		} else if (sw) {
			/* -EBUSY: armed by an earlier load; the callback
			 * becomes this program's */
			r = bpf_timer_init(&sw->timer, &sweeper, CLOCK_MONOTONIC);
			if ((r == 0 || r == -EBUSY) && bpf_timer_set_callback(&sw->timer, sweeper_timer) == 0 &&
			    bpf_timer_start(&sw->timer, TICK_NS, 0) == 0)
				failed = 0;
		}
		out = cfgp(NCFG_FLUSHED);
		if (out)
			*out = failed;
		return TC_ACT_UNSPEC;
	}
	if (c.mode == FL_CLOCKS) {
		/* the two clocks, for user space to measure a jiffy */
		out = cfgp(NCFG_FLUSHED);
		if (out)
			*out = bpf_jiffies64();
		out = cfgp(NCFG_FLUSHARG);
		if (out)
			*out = bpf_ktime_get_ns();
		return TC_ACT_UNSPEC;
	}
	c.now = now_ns();
	bpf_for_each_map_elem(&sessions, flush_cb, &c, 0);
	out = cfgp(NCFG_FLUSHED);
	if (out)
		*out = c.n;
	return TC_ACT_UNSPEC;
}

#include "ftp.h"
