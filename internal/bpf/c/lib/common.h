/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every part of the filter shares: the packet info parsed once
 * (struct pktinfo), the scan state, the per-CPU work area, and the
 * config, statistics and clock helpers.
 */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"

/* BOUND masks an index in a way the compiler cannot drop after proving a
 * tighter range, which the verifier could not follow. */
#define BOUND(x, m) ({ __u64 _v = (x); asm volatile("" : "+r"(_v)); _v & (m); })

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
	__u16 auth;    /* the IPSO option's protection authority (fi_auth), 0 without a class */
	__u32 ipid;    /* IPv4 id or IPv6 fragment id */
	__u32 fragoff; /* fragment offset in bytes */
};

#define MAX_LOGS 4

struct scan {
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
	__u32 done;     /* the scan ran to its end (or to a quick rule) */
	__u32 cut;      /* a scan of this packet ran out of steps */
	__u32 slot;
	__u32 ncall;    /* call frames on the stack */
	/* what every scan sets (above): 64 bytes with now, one line */
	__u64 now;
	__u32 stack_pos[MAX_DEPTH];
	__u32 stack_end[MAX_DEPTH];
	__u32 stack_passo[MAX_DEPTH];
	__u32 stack_call[MAX_DEPTH]; /* 1: the frame scans a called group */
	__u32 stack_pass[MAX_DEPTH]; /* call frames: pass and rule of the caller */
	__u32 stack_rule[MAX_DEPTH];
	__u32 stack_skip[MAX_DEPTH]; /* the caller's rules still to skip */
	__u32 logs[MAX_LOGS];
	__u64 cand[BLOCK_WORDS];
};

/* Per-CPU scratch: the 512-byte BPF stack cannot hold the packet info, the
 * scan state and a state entry under construction at once. TC programs run
 * with migration disabled and do not nest on one CPU. */
/* What a state entry held, for state_release (lib/state.h): its rule,
 * its flags and the bits its source is counted by (keep state
 * (max-srcs); 0: none). */
struct state_held {
	__u32 slot;
	__u32 rule;
	__u32 gen;
	__u8 flags;
	__u8 srcbits;
};

struct work {
	/* what every packet writes first, together: the packet info (cleared
	 * per packet), the state lookup's result and the scan's head */
	struct pktinfo p;
	/* result of the state lookup */
	__u32 hit_pass;
	__u32 hit_rule_no;
	__u32 hit_group_no;
	__u32 hit_logtag;
	__u32 hit_rev;  /* the state hit was a reply */
	__u32 hit_slot; /* slot and rule index that created the entry */
	__u32 hit_idx;
	struct scan s;
	struct state_entry e;
	__u8 obuf[64]; /* IPv4 / TCP options: variable offsets need a map value */
	struct run_key hk; /* scan_hot's runs-table key: not on the stack,
			    * which is full at that depth */
	struct frag_key fk;   /* fragment cache key and new entry: the calls */
	struct frag_entry fe; /* that make them are deep in the stack */
	__u32 fsrc_slot;      /* the rule sl_frag_add's entry comes from */
	__u32 fsrc_idx;       /* (five arguments are all a call takes) */
	struct state_key rk;  /* state_create's key: the same (the call is deep) */
	struct src_key srck;  /* and its source's, max-srcs (lib/srcs.h), */
	struct src_key srck_rule; /* and that source's rule's, */
	struct src_key srck_rel;  /* and an entry's that goes (sl_src_entry), */
	struct state_held held;   /* and what that entry held; */
	__u32 src_held;           /* bits srck was counted by (src_new) */
	struct state_key rel_key; /* the key of a replaced entry (state_unlink_later) */
	__u32 src_bits;           /* src_hold's limits: bits, max-per-src, */
	__u32 src_mps;            /* max-srcs */
	__u32 src_ms;
	__u64 src_one;
	/* what sl_route did last (the tests read it back: test runs do not
	 * carry out a redirect): rt_seq counts its calls that had a rule
	 * with a route; rt_to is the interface the packet was redirected to
	 * (to, reply-to, fastroute), rt_dup the one a copy went to, rt_fast
	 * set when fastroute was tried */
	__u32 rt_seq;
	__u32 rt_to;
	__u32 rt_dup;
	__u32 rt_fast;
	/* the packet made a state entry of which IPFilter takes it for a
	 * reply (a first packet to 0.0.0.0 or ::): its rule's reply-to
	 * routes it, not its to (sl_state_create; the engine's stateAdd) */
	__u32 made_rev;
	/* filter()'s copy of the config for the generic program (F_SLOT) */
	__u32 cf_slot;
	__u32 cf_logflags;
	__u64 cf_feat;
};

/* Load-time specialisation (spec_linux.go). The loader sets these for the
 * rule sets the program may run, the active and the inactive one (so that
 * ipf -s needs no other program), and replaces the attached program when
 * they change: the verifier knows them and removes the code a packet of
 * these sets can never run. The defaults make the generic program, which
 * reads everything from config. */
volatile const __u64 k_feat = ~0ULL; /* FEAT_* bits any slot it may run uses */
volatile const __u32 k_mode = KM_CONFIG;
volatile const __u32 k_defpass = 0; /* KM_IDLE or k_cfg: default_pass */
volatile const __u32 k_state = 1;   /* state entries may exist */
/* k_cfg: the program is made for one active slot and the configuration in
 * force, which it then does not read per packet (but for the on/off
 * switch): the slot, its FEAT_* word, default_pass (k_defpass), min_ttl,
 * the ipf -l flags and the L2 mode. ipf -s puts the other slot's program (loaded beforehand) in
 * place. 0 (the generic program): read them from config. */
volatile const __u32 k_cfg = 0;
volatile const __u32 k_slot = 0;
volatile const __u64 k_sfeat = 0; /* its FEAT_* bits (the IDX_* ones: config) */
volatile const __u32 k_minttl = 0;
volatile const __u32 k_logflags = 0;
volatile const __u32 k_anyl3 = 0;

/* KHAS(f): the program was loaded for sets that may need f (FEAT_LOG,
 * FEAT_RET and FEAT_FRAGS also say what entries and config may need) */
#define KHAS(f) (k_feat & (f))

/* HAS(f): the active slot uses feature f, and the program was loaded for
 * sets that may (a constant false removes the code) */
#define HAS(f) ((k_feat & (f)) && (feat & (f)))

/* GLOBAL functions are verified once on their own instead of once per call
 * path; that keeps the verifier's work linear in the program's size. */
#define GLOBAL __attribute__((noinline))

/* skb->mark of a generated reply (return-rst / return-icmp) and of a
 * packet an outbound rule routed elsewhere (to / dup-to) */
#define REPLY_MARK 0x51c3e7f1
/* skb->mark of a packet an inbound rule sent out of another interface (to,
 * reply-to, fastroute) or copied there (dup-to): the egress program gives
 * it ipf_fastroute's treatment, not the outbound filter. FASTRT_NOSTATE:
 * the rule returns an error or reset, and ipf_fastroute then skips the
 * state check. */
#define FASTRT_MARK 0x51c3e7f2
#define FASTRT_NOSTATE_MARK 0x51c3e7f3

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

static __always_inline struct conf *conf_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&config, &zero);
}

static __always_inline __u64 cfg(__u32 key)
{
	struct conf *c = conf_get();

	/* a mask the compiler keeps: it may drop a range check it can
	 * prove, which the verifier then cannot see */
	return c ? c->v[BOUND(key, CFG_N - 1)] : 0;
}

/* The per-rule storage of a slot: rule idx's entry in the slot's inner
 * map of outer (rules, pps, rule_states), NULL past the set. */
static __always_inline void *slot_elem(void *outer, __u32 slot, __u32 idx)
{
	__u32 s = slot;
	void *inner;

	if (s >= NSLOTS)
		return NULL;
	inner = bpf_map_lookup_elem(outer, &s);
	if (!inner)
		return NULL;
	idx &= RULE_CAP - 1;
	return bpf_map_lookup_elem(inner, &idx);
}

static __always_inline struct rule *rule_at(__u32 slot, __u32 idx)
{
	return slot_elem(&rules, slot, idx);
}

/* state_flags_set sets flag bits f in a state entry's flags by an atomic
 * OR on the 8-byte word that holds them (group_no, then flags as byte 4,
 * bpfel; the programs are built for -mcpu=v1, where clang has 64-bit
 * atomics only). The entry's flags are written after its insert by
 * packets on any CPU (SF_OPTREV, the first reply's) and by state_put
 * (SF_TWIN, when another CPU adds the twin): with plain read-modify-writes
 * of the byte, one could undo the other's bit (a lost SF_TWIN leaves the
 * twin found by no lookup of the key). Each bit is set once in an entry's
 * life, so the cost is once a flow. The OR leaves group_no as it is. */
static __always_inline void state_flags_set(struct state_entry *e, __u8 f)
{
	_Static_assert(__builtin_offsetof(struct state_entry, flags) % 8 == 4, "state_entry.flags moved: fix state_flags_set");
	__sync_fetch_and_or((__u64 *)((char *)e + __builtin_offsetof(struct state_entry, flags) - 4), (__u64)f << 32);
}

/* rule_count counts a packet of plen bytes that matched r. The counters
 * live in the rule (one lookup for both), updated atomically. */
static __always_inline void rule_count(struct rule *r, __u32 plen)
{
	__sync_fetch_and_add(&r->hits, 1);
	__sync_fetch_and_add(&r->bytes, plen);
}

static __always_inline struct statblock *stats_get(void)
{
	/* both calls are inlined: the address of this CPU's block, with no
	 * load (a per-CPU array's lookup loads the block's pointer from the
	 * map, a page more for every packet to find) */
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&stats, &cpu);
}

static __always_inline void stat_inc(__u32 key)
{
	struct statblock *sb = stats_get();

	if (sb)
		sb->v[key & (NSTATS - 1)]++;
}

static __always_inline void drop_inc(__u32 reason)
{
	struct statblock *sb = stats_get();

	if (sb)
		sb->drop[reason & (NREASONS - 1)]++;
}

static __always_inline __u64 now_ns(void)
{
	/* the coarse clock (the kernel's tick, a few ms) is ample for
	 * timeouts counted in IPFilter's half seconds, and reads no clock
	 * source */
	return bpf_ktime_get_coarse_ns() + cfg(CFG_CLOCK);
}

#endif
