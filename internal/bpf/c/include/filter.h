/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Layout shared by the Sluice filter datapath (filter.c and lib/) and its
 * Go loader: bpf2go generates the Go structs from these; the constants the
 * Go side uses are in layout.go, and TestHeaderConstants compares every one
 * of them (and IPFilter's FR_* and FI_* values) with the #defines here.
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <linux/types.h>
#include <linux/bpf.h>

/* Rule storage: three slots, each holding a set of up to RULE_CAP rules
 * in maps sized to it. Two hold the active and inactive sets; the third
 * is scratch so a new active set can be written without touching the
 * running one and published by one config write. */
#define RULE_CAP 4194304
#define NSLOTS 3
#define MAX_LISTS 512
#define MAX_DEPTH 16
#define IFACE_SLOTS 4096
/* Steps (bpf_loop iterations: a rule looked at, a run of index blocks
 * skipped, a group left) one scan may take: bpf_loop's limit. The loader
 * refuses a set in which a scan could need more. */
#define SCAN_BUDGET 8388608

/* The index works on blocks of 16 rules: a candidate bitmap says which
 * blocks may hold a rule matching the packet. It covers sets of up to
 * IDX_RULES rules. */
#define IDX_RULES 16384
#define BLOCK_SHIFT 4
#define NBLOCKS (IDX_RULES >> BLOCK_SHIFT)
#define BLOCK_WORDS (NBLOCKS / 64)

/* List ids within a slot; groups follow. */
#define LIST_IN 0
#define LIST_OUT 1
#define LIST_ACCT_IN 2
#define LIST_ACCT_OUT 3
#define LIST_GROUP0 4

/* Rule action flags: IPFilter's FR_* values (ip_fil.h), as the Go side
 * (sluice/internal/ruleset) has them; a test compares the two. */
#define FR_CALL 0x00000 /* command 0: call rule, or with FR_LOG a "log" rule */
#define FR_BLOCK 0x00001
#define FR_PASS 0x00002
#define FR_AUTH 0x00003
#define FR_PREAUTH 0x00004
#define FR_ACCOUNT 0x00005
#define FR_SKIP 0x00006
#define FR_DECAPSULATE 0x00008
#define FR_CMDMASK 0x0000f
#define FR_LOG 0x00010 /* ipftest -D shows pass 0x...12 for "pass log" */
#define FR_CALLNOW 0x00020
#define FR_NOTSRCIP 0x00040
#define FR_NOTDSTIP 0x00080
#define FR_QUICK 0x00100
#define FR_KEEPFRAG 0x00200
#define FR_KEEPSTATE 0x00400
#define FR_FASTROUTE 0x00800
#define FR_RETRST 0x01000
#define FR_RETICMP 0x02000
#define FR_FAKEICMP 0x03000
#define FR_RETMASK 0x03000
#define FR_OUTQUE 0x04000
#define FR_INQUE 0x08000
#define FR_LOGBODY 0x10000
#define FR_LOGFIRST 0x20000
#define FR_LOGORBLOCK 0x40000
#define FR_STLOOSE 0x80000
#define FR_FRSTRICT 0x100000
#define FR_STSTRICT 0x200000
#define FR_NEWISN 0x400000
#define FR_NOICMPERR 0x800000
#define FR_STATESYNC 0x1000000
#define FR_COPIED 0x2000000
#define FR_INACTIVE 0x4000000
#define FR_NOMATCH 0x8000000
/* ipf_flags bits a log record's pass may carry (FF_*). */
#define FF_LOGPASS 0x10000000
#define FF_LOGBLOCK 0x20000000
#define FF_LOGNOMATCH 0x40000000

/* Which tests a rule carries. */
#define M_IFACE 0x0001
#define M_SRC 0x0002
#define M_DST 0x0004
#define M_NOTSRC 0x0008
#define M_NOTDST 0x0010
#define M_PROTO 0x0020
#define M_TCPUDP 0x0040
#define M_TOS 0x0080
#define M_TTL 0x0100
#define M_FLAGS 0x0200
#define M_ICMP 0x0400
#define M_SPORT 0x0800
#define M_DPORT 0x1000
#define M_WITH 0x2000
#define M_OPT 0x4000
#define M_NEVER 0x8000 /* e.g. an interface that does not exist */
#define M_SEC 0x10000
#define M_SRCPOOL 0x20000 /* source looked up in pool table src_pool */
#define M_DSTPOOL 0x40000
#define M_EXPR 0x80000 /* exp { ... } rule: expr_count values from expr_start */

/* Port comparison operators. */
#define PORT_EQ 1
#define PORT_NE 2
#define PORT_LT 3
#define PORT_GT 4
#define PORT_LE 5
#define PORT_GE 6
#define PORT_OUT 7 /* lo <> hi */
#define PORT_IN 8  /* lo >< hi */
#define PORT_RANGE 9 /* lo : hi */

/* Packet flags: IPFilter's FI_* values, so a rule's "with" mask applies
 * unchanged; bits above 0x800000 are Sluice's own. */
#define PF_TCPUDP 0x01 /* the header at l4off is TCP or UDP (also behind IPv4 AH) */
#define PF_IPOPTS 0x02
#define PF_FRAG 0x04
#define PF_SHORT 0x08
#define PF_NAT 0x10
#define PF_MCAST 0x20
#define PF_BCAST 0x40
#define PF_MBCAST 0x80
#define PF_STATE 0x100
#define PF_BADNAT 0x200
#define PF_BAD 0x400
#define PF_OOW 0x800
#define PF_ICMPERR 0x1000
#define PF_FRAGBODY 0x2000
#define PF_BADSRC 0x4000
#define PF_LOWTTL 0x8000
#define PF_V6HDRS 0x10000
#define PF_ICMPQUERY 0x80000
#define PF_AH 0x200000
#define PF_PORTS 0x1000000  /* ports and flags may be tested */
#define PF_ICMPOK 0x2000000 /* icmp-type may be tested */
#define PF_JUMBO 0x4000000
#define PF_PULLUP 0x8000000 /* L4 header not in the buffer: dropped */
#define PF_BADFRAG 0x10000000 /* starts inside its first fragment (reason badfrag) */
/* a SYN's window-scale, SACK-permitted or MSS option has the wrong length:
 * not FI_BAD for the rules (ipf_state_add sets it after they matched), but
 * the entry the SYN makes records FI_BAD as its direction's flags, so that
 * direction's later packets miss it (semantics case syn-option-bad-length) */
#define PF_OPTBAD 0x20000000
/* FI_CMP: the flags a packet must share with the first packet of its
 * state slot. FI_TCPUDP follows from the protocol except behind IPv4 AH,
 * where AH+UDP and AH+ICMP share a state key. */
#define PF_CMP 0x5cfe3

/* IPv6 extension header bits, in the packet's option bits (IPFilter's
 * ip6exthdr table; "v6hdr" and "with v6hdrs NAME" test them). */
#define V6X_HOPOPTS 0x001
#define V6X_IPV6 0x002
#define V6X_ROUTING 0x004
#define V6X_FRAG 0x008
#define V6X_ESP 0x010
#define V6X_AH 0x020
#define V6X_NONE 0x040
#define V6X_DSTOPTS 0x080
#define V6X_MOBILITY 0x100

/* Config keys (array of u64). What a packet with no rules reads (the
 * active slot, enabled, default pass, L2 mode, log flags, the slot's
 * features) is keys 1..8: one cache line on this kernel, where an array
 * map's value starts 56 bytes into a line (behind struct bpf_map, 312
 * bytes), so key 0 ends a line and keys 1..8 fill the next; two lines at
 * worst on another layout. (An mmapable map would start the value at a
 * page, but in vmalloc memory: 4 KiB pages, a TLB miss more.) */
#define CFG_INACTIVE 0    /* slot of the inactive set */
#define CFG_ACTIVE 1      /* slot of the active set */
#define CFG_ENABLED 2     /* filter on (ipf -E) */
#define CFG_DEFPASS 3     /* default_pass flags */
#define CFG_ANYL3 4       /* the filter is on an interface without a link-layer header */
#define CFG_LOGFLAGS 5    /* ipf -l: FR_PASS/FR_BLOCK/FR_NOMATCH bits to log */
#define CFG_INDEX0 6      /* 6..8: the slot's IDX_* and FEAT_* bits */
#define CFG_CLOCK 9       /* added to bpf_ktime_get_ns: tests move time */
#define CFG_MINTTL 10
#define CFG_STATEMAX 11
#define CFG_TO_TCP 12     /* 12..23: TCP state timeouts, ns */
#define CFG_TO_UDP 24
#define CFG_TO_UDPACK 25
#define CFG_TO_ICMP 26
#define CFG_TO_ICMPACK 27
#define CFG_TO_IP 28
#define CFG_STATELOG 29
#define CFG_FRAG_TTL 30   /* frag_ttl, ns */
#define CFG_STATESIZE 31  /* state_size: the watermarks' low mark divides by it */
#define CFG_WMHIGH 32     /* state_wm_high, percent of state_max */
#define CFG_WMLOW 33      /* state_wm_low, percent of state_size */
#define CFG_WMFREQ 34     /* state_wm_freq, ns */
#define CFG_DCA 35        /* HP DCA (keep limit) on: ipf -m e / -m d */
#define CFG_GEN0 36       /* 36..38: generation of each slot's rules */
/* 39, 40, 41: user space only (the swap journal, ipf's rollback token,
 * the active set's number) */
/* 42: user space only (the all-interfaces mode) */
/* 43..46: user space only (spec key, clsact, NAT inline) */
#define CFG_FRAG_SIZE 47  /* frag_size: the fragment cache's most entries (0: FRAG_SIZE_DEF) */
#define CFG_N 64

/* The fragment cache: the map's capacity, and IPFilter's ipfr_size, what
 * it holds when the configuration has no frag_size (one pinned by an
 * older Sluice) */
#define FRAG_CAP 4096
#define FRAG_SIZE_DEF 257

struct conf {
	__u64 v[CFG_N];
};

/* Index dimensions of a slot (CFG_INDEX0 + slot); 0: no index. The source
 * ones are only written when a rule tests them, so sets without source
 * tests do not pay their lookups. */
#define IDX_ON 1    /* destination address and port */
#define IDX_SRC 2   /* source address */
#define IDX_SPORT 4 /* source port */

/* What else the slot's rules use, so a packet skips what they do not. */
#define FEAT_ACCT_IN 0x100  /* count in rules */
#define FEAT_ACCT_OUT 0x200 /* count out rules */
#define FEAT_CLOCK 0x400    /* rules that need the time: keep state/frags, pps, keep limit */
#define FEAT_ROUTE 0x800    /* rules with to, dup-to or fastroute */
#define FEAT_IDLE 0x1000    /* no rules in the main lists */
#define FEAT_LIMITS 0x2000  /* rules with pps or a keep limit */
#define FEAT_LOG 0x4000     /* rules that log (log, pass log, ...) */
#define FEAT_RET 0x8000     /* rules with return-* (or a keep limit's) */
#define FEAT_POOL 0x10000   /* rules with pools or group-map calls */
#define FEAT_EXPR 0x20000   /* exp { } rules */
/* in k_feat only: fragment entries may exist (keep frags, state) */
#define FEAT_FRAGS 0x40000
/* The direction's scans need no candidate index: its main list is scanned
 * from its compact form (struct hotlist), and outbound its accounting list
 * too, or it is empty. A packet then skips the index lookups (an LPM and a
 * hash lookup, four 128-byte bitmaps ANDed): nothing would read them. Not
 * in k_feat (the slot's word only). */
#define FEAT_HOT_IN 0x80000
#define FEAT_HOT_OUT 0x100000

/* k_mode of a specialised program (filter.c, spec_linux.go). */
#define KM_CONFIG 0 /* read enabled, default pass, logging, L2 mode from config */
#define KM_OFF 1    /* filter off (ipf -D's switch): every packet passes untouched */
#define KM_IDLE 2   /* on, no rule in either set, no state, no logging, every
		     * interface with a link-layer header: clean packets get k_defpass */

/* Per-direction statistics (index dir*ST_DIR + n) then globals. What
 * every packet counts (pass, packets, a state lookup's miss or hit, and
 * with the default pass nomatch: what an idle filter counts) is in the
 * first five of its direction, 40 bytes: one cache line of this CPU's
 * block, two at worst (the per-CPU value is only 8-aligned). (ST_NOMATCH
 * and ST_BLOCK swapped numbers in dp7: counters pinned by an older Sluice
 * read swapped until zeroed.) The state
 * table's hits and misses are the sums of the directions' (ST_STKEPT,
 * ST_MISS). */
#define ST_DIR 32
#define ST_PASS 0
#define ST_PKTS 1
#define ST_MISS 2 /* no state entry passed the packet (the table's misses) */
#define ST_STKEPT 3
#define ST_BLOCK 14
#define ST_SHORT 5
#define ST_BAD 6
#define ST_LOGPASS 7
#define ST_LOGBLOCK 8
#define ST_LOGGED 9
#define ST_LOGFAIL 10
#define ST_ACCT 11
#define ST_STLOST 12
#define ST_IPV6 13
#define ST_NOMATCH 4 /* with pass, stkept and miss: what an idle packet counts */
#define ST_FRAG 15
#define ST_NOTIP 16
/* ST_CLEAN + (nomatch) + 2 * (IPv6), 17-20: a packet passed on the idle
 * path or by a constant list (filter.c idle_verdict), counted once for
 * pass, pkts and miss (and nomatch, IPv6): user space adds it to each */
#define ST_CLEAN 17
#define ST_CLEAN_NOMATCH 1
#define ST_CLEAN_IPV6 2
#define ST_RST 64
#define ST_ICMPREP 65
#define ST_ADD_TCP 66
#define ST_ADD_UDP 67
#define ST_ADD_ICMP 68
#define ST_ADD_OTHER 69
#define ST_MAXREF 72 /* refused: rule limit or state_max */
#define ST_EXPIRED 73
#define ST_CLOSED 74
#define ST_DCA 75
#define ST_PPS 76
#define ST_RETFAIL 77
#define ST_OOW 78
#define ST_ROUTED 80 /* sent out by to / fastroute */
#define ST_DUPPED 81 /* copies sent by dup-to */
#define ST_ROUTEFAIL 82
#define ST_SCANCUT 83 /* a scan ran out of steps: packet blocked */
#define ST_DCAFULL 86 /* DCA connection table full: connection refused */
#define ST_SRCFULL 87 /* max-srcs source table full: entry refused */
#define ST_ACTIVE 79 /* not per-cpu meaningful: maintained as +/- */
#define NSTATS 128

/* Block reasons (ipmon "reason:", IPFilter FRB_* numbering). */
#define RSN_NONE 0
#define RSN_FILTER 1
#define RSN_LOGFAIL 2
#define RSN_PPS 3
#define RSN_JUMBO 4
#define RSN_STATEADD 6
#define RSN_PULLUP 13
#define RSN_BADFRAG 15
#define RSN_BAD 20      /* Sluice: sanity check failed and a rule blocked it */
#define RSN_DCA 21      /* Sluice: HP keep limit exceeded */
#define RSN_SCANCUT 23  /* Sluice: the rule scan ran out of steps */
#define NREASONS 32

/* TCP states (IPFilter numbering). */
#define TS_LISTEN 0
#define TS_SYN_SENT 1
#define TS_SYN_RECEIVED 2
#define TS_HALF_ESTAB 3
#define TS_ESTABLISHED 4
#define TS_CLOSE_WAIT 5
#define TS_FIN_WAIT_1 6
#define TS_CLOSING 7
#define TS_LAST_ACK 8
#define TS_FIN_WAIT_2 9
#define TS_TIME_WAIT 10
#define TS_CLOSED 11

/* State entry flags. */
#define SF_SYN 0x01     /* created by a SYN */
#define SF_SWAP 0x02    /* the entry's source is its key's dst (state.h: canon_order) */
#define SF_TWIN 0x04    /* the key's twin (state_key.twin) holds the other way's entry */
#define SF_GFILL 0x08   /* filled in under its group key by a packet to its group (state.h: wild_place) */
#define SF_OPTREV 0x10  /* opt_rev holds the options of the first reply */

#define WF_WSCALE_SEEN 0x01
#define WF_WSCALE_FIRST 0x02
#define WF_SACK 0x04

#define LOG_SNAP 128
#define LOG_PACKET 0
#define LOG_STATE 1

struct rule {
	__u32 action;
	__u32 match;
	__u32 ifindex[2];
	__u32 src[4];
	__u32 smask[4];
	__u32 dst[4];
	__u32 dmask[4];
	__u32 with_mask;
	__u32 with_want;
	__u32 opt_mask;
	__u32 opt_want;
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	__u8 sport_op;
	__u8 dport_op;
	__u8 family;
	__u8 proto;
	__u8 tos;
	__u8 ttl;
	__u8 tcpf;
	__u8 tcpf_mask;
	__u16 icmp_val;
	__u16 icmp_mask;
	__u16 head;
	__u8 ret_code;
	__u8 sec_mask;
	__u8 sec_want;
	/* keep state (max-srcs N, max-per-src M/bits): the bits of the source
	 * the entries are counted by (0: the rule has no max-srcs) and M (0:
	 * none; CompileSet refuses more than 65535) */
	__u8 src_bits;
	__u16 max_per_src;
	__u32 skip;
	__u32 pps;
	__u32 state_limit;
	__u32 keep_limit;
	__u32 age_fwd;
	__u32 age_rev;
	__u32 logtag;
	__u32 group_no;
	__u32 rule_no;
	__u16 src_pool; /* pool table ids within the slot (M_SRCPOOL/M_DSTPOOL) */
	__u16 dst_pool;
	/* to / dup-to / reply-to / fastroute (§1.3.14): interfaces and next
	 * hops (reply-to routes the replies of a keep-state flow) */
	__u32 to_ifindex;
	__u32 dup_ifindex;
	__u32 to_nh[4];
	__u32 dup_nh[4];
	__u8 route;      /* RT_* */
	__u8 to_nh_fam;  /* 4, 6 or 0: no next hop given */
	__u8 dup_nh_fam;
	__u8 reply_nh_fam;
	__u32 reply_ifindex;
	__u32 reply_nh[4];
	__u32 expr_start; /* first expr_val of an exp rule (M_EXPR), slot-relative */
	__u32 expr_count;
	__u16 call_table; /* group-map table id of a call rule (pools map) */
	__u8 call;        /* CALL_* */
	__u8 limit_cumul; /* keep limit N cumulative: one count for the rule */
	__u32 limit_ret;  /* return-* of a pass rule with a keep limit, for the
			   * connections over it (FR_RETMASK bits) */
	/* A run: this rule and the run_len - 1 after it are the same rule
	 * but for the address run_field tests (M_SRC or M_DST, one mask, no
	 * two alike). The scan looks the packet's address up in the slot's
	 * runs table instead of trying them one by one. */
	__u32 run_len;
	__u32 run_field;
	__u32 max_srcs; /* keep state (max-srcs N): sources with entries */
	/* packets and bytes that matched the rule (ipfstat's hits) */
	__u64 hits;
	__u64 bytes;
};

/* Key of the runs table of a slot: the run's first rule and the masked
 * address; the value is the slot-relative index of the rule. */
struct run_key {
	__u32 head;
	__u32 addr[4];
};

/* Key of the IPv4 runs table of a slot (runs4): a run of IPv4 rules needs
 * one word of address, so its key is 8 bytes, not 20 (half the hash and
 * the compare, and a smaller element: a million-rule blocklist is a
 * million of them). The value is the same. */
struct run4_key {
	__u32 head;
	__u32 addr;
};

/* The runs' bitmap (run_bits): a slot whose set has IPv4 runs has a bitmap
 * of 2^(64 - shift) bits, bit run_hash(head, addr) >> shift set for each
 * entry of runs4 (runs.go runBitmap). A packet whose bit is clear is in no
 * run: one line read instead of the hash's bucket and element. A hit or a
 * false positive looks the hash up. The shift is in the run's compact
 * match, in the address word its field leaves free (CM_RUN4), so the
 * bitmap and the compact lists that read it are written with the slot. */
#define RUN_HASH_K1 0x9e3779b97f4a7c15ULL
#define RUN_HASH_K2 0xbf58476d1ce4e5b9ULL

/* The small sets' bitmap (run_flat, ten14): a slot whose IPv4 runs have
 * at most runFlatMax entries (runs.go) also has them in its own
 * RUN_FLAT_WORDS words of one plain array, three bits of one word an
 * entry (run_hash's top bits: the word, then three bit numbers). Its
 * lookup is inlined (a plain array's), where run_bits' inner arrays are a
 * map-in-map lookup and a helper call, each on lines and pages of their
 * own. RUN_FLAT in the run's shift word says the slot has it; a program
 * of an older Sluice reads that word as no shift (the pipeline, safe).
 * Three slots' words are 24 KiB: one kmalloc'd object (the direct map's
 * large pages) where run_bits' inner array of 10 000 entries is vmalloc'd
 * (4 KiB pages). */
#define RUN_FLAT 0x100
#define RUN_FLAT_LOG 10
#define RUN_FLAT_WORDS (1 << RUN_FLAT_LOG)

/* The large sets' bitmap (run_flat_big, mil15): a slot whose IPv4 runs
 * have more entries than run_flat takes and a bitmap of at most 2^24 bits
 * (a million entries: runs.go runBigMax) also has run_bits' words in its
 * own RUN_BIG_WORDS words of one plain array, after word 0 (unused): slot
 * s's word w is 1 + s * RUN_BIG_WORDS + w. A probe is then an inlined
 * array lookup and the word, where run_bits is a map-in-map lookup (a
 * line of its own) and a helper call. The array is 6 MiB, so a datapath
 * has it with one entry until a set needs it (slotmaps_linux.go
 * ensureRunBig): a program bound to that one finds no word past 0 and
 * reads run_bits instead, which is still written for such a set. RUN_BIG
 * in the run's shift word says the slot has it; the shift is run_bits'
 * (an older program reads the word as no shift: the pipeline, safe). */
#define RUN_BIG 0x200
#define RUN_BIG_LOG 18
#define RUN_BIG_WORDS (1 << RUN_BIG_LOG)

/* call functions (the group-map calls, §4.3) */
#define CALL_NONE 0
#define CALL_SRCGRPMAP 1
#define CALL_DSTGRPMAP 2

/* exp { "..." } clauses, flattened: one entry per value, the values of a
 * clause consecutive and the last one marked with end. A clause holds when
 * one value matches (inverted by not); the rule matches when all hold. */
#define MAX_EXPRS 4096    /* values per slot */
#define MAX_EXPR_VALS 64  /* values per rule */

#define EXPR_NONE 0
#define EXPR_PROTO 1
#define EXPR_ADDR 2
#define EXPR_SRC 3
#define EXPR_DST 4
#define EXPR_ADDR6 5
#define EXPR_SRC6 6
#define EXPR_DST6 7
#define EXPR_PORT 8
#define EXPR_SPORT 9
#define EXPR_DPORT 10
#define EXPR_FLAGS 11

struct expr_val {
	__u32 w[4];   /* address, as src/dst are held (IPv4 in w[0]) */
	__u32 m[4];
	__u32 num;
	__u32 mask;   /* tcp.flags mask */
	__u8 op;      /* EXPR_* */
	__u8 proto;   /* the clause's implied protocol, 0: any */
	__u8 not;
	__u8 end;     /* last value of its clause */
};

#define RT_TO 0x01
#define RT_DUP 0x02
#define RT_FAST 0x04
#define RT_REPLY 0x08

/* ippool tree and hash tables of a slot, one LPM trie for all: a match on
 * an entry with neg set means "not in the table" (tree "!" entries). */
struct pool_key {
	__u32 prefixlen; /* 96 + address bits */
	__u32 slot;
	__u32 table;
	__u32 family;
	__u8 addr[16];
};

struct pool_val {
	__u32 neg;
	__u32 group; /* group-map entries: list id of the group, 0 none */
};

/* Addresses of an interface (return-icmp's source, §1.3.15); zero when
 * the interface has none of that family. */
struct if_addr {
	__u32 v4;
	__u32 v6[4];
};

struct list {
	__u32 start;
	__u32 count;
};

/* The compact match of a rule (struct cmatch): the tests most rules make,
 * in a form the scan checks in place, without fetching the rule. It never
 * passes a packet the rule would not match; a rule that tests more
 * (CM_FULL) is fetched and matched whole when the packet passes it. */
#define CM_OUT 0x0001    /* an outbound rule (FR_OUTQUE) */
#define CM_NEVER 0x0002
#define CM_PROTO 0x0004
#define CM_TCPUDP 0x0008
#define CM_SRC 0x0010    /* IPv4 source test (the rule is IPv4: word 0) */
#define CM_NOTSRC 0x0020
#define CM_DST 0x0040
#define CM_NOTDST 0x0080
#define CM_PORTS 0x0100  /* ports or flags tested: the packet must have them */
#define CM_SPORT 0x0200
#define CM_DPORT 0x0400
#define CM_FLAGS 0x0800
#define CM_FULL 0x1000   /* the rule tests more: match it whole */
#define CM_RUN 0x2000    /* a run's first rule, without the run's address:
			  * the runs table decides */
#define CM_RUN4 0x4000   /* (with CM_RUN) the compact match is the run's
			  * whole match but for its IPv4 address, whose mask
			  * is smask (CM_RUNSRC) or dmask, and the slot's runs
			  * bitmap's shift src (CM_RUNSRC) or dst: the scan
			  * reads the bitmap and the runs table in place */
#define CM_RUNSRC 0x8000 /* the run's rules differ in their source */

struct cmatch {
	__u32 src;
	__u32 smask;
	__u32 dst;
	__u32 dmask;
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	__u16 flags; /* CM_* */
	__u8 sport_op;
	__u8 dport_op;
	__u8 family;
	__u8 proto;
	__u8 tcpf;
	__u8 tcpf_mask;
};

/* The compact form of a short main list with no groups or calls (a run
 * counts as one entry): each rule's compact match and what a match does,
 * so the scan fetches no rule but one that tests more or keeps state.
 * Its rules count their matches in hot_counts, per CPU, not in the rule
 * (user space adds the two). */
#define HOT_MAX 32
/* a compact list a program made for its slot may carry as constants
 * (lib/fast.h; spec_linux.go fastMax) */
#define FAST_MAX 16
/* k_fast's bits beside the directions': that direction's constant list
 * holds an IPv4 run (lib/fast.h; spec_linux.go fastRunsIn) */
#define FAST_RUNS_IN 4
#define FAST_RUNS_OUT 8

struct hot {
	struct cmatch m;
	__u32 pos;    /* the rule (the run's first), slot-relative */
	__u32 action; /* the rule's action and skip */
	__u32 skip;
	__u32 pad;
};

/* hotlist.ok */
#define HOT_COMPACT 1 /* the list is scanned from this form */
#define HOT_NOIDX 2   /* (the in and out lists) the direction's scans need
		       * no index: FEAT_HOT_IN/_OUT, for a program made for
		       * the slot (k_cfg), which has no feature word read */

struct hotlist {
	__u32 n;
	__u32 ok; /* HOT_* */
	struct hot r[HOT_MAX];
};

/* Matches of a hot list's entries, per CPU (key as hotlists): an entry's
 * hits and bytes side by side, so a match writes one line, not two. */
struct hot_hits {
	__u64 hits;
	__u64 bytes;
};

struct hot_count {
	struct hot_hits c[HOT_MAX];
};

/* One CPU's counters: the statistics by ST_* and the drops by RSN_*, and
 * the matches of the constant lists (lib/fast.h) by slot, direction and
 * entry: a packet decided on a constant list counts its rule where it
 * counts its statistics, one block, where a per-CPU hot_counts lookup
 * reached two pages more (docs/datapath-cost.md, sl13). User space adds
 * fast[s][d] to the per-CPU hot_counts of slot s's list d, and zeroes an
 * entry by writing minus its fast count there (hotcounts_linux.go): it
 * never writes these. The blocks of all CPUs lie end to end in one array
 * (maps.h); pad, never written, keeps the line a block shares with the
 * next one's first counters free of this CPU's writes. */
struct statblock {
	__u64 v[NSTATS];
	__u64 drop[NREASONS];
	struct hot_hits fast[NSLOTS][2][FAST_MAX];
	__u64 pad[8];
};

/* The compact matches of a block of 1 << BLOCK_SHIFT rules (the index's
 * blocks), in a per-slot map beside the rules: the scan tests a block's
 * rules in place and fetches only one that passes. run_len is the rule's
 * (a run's first rule: the scan passes over the whole run). */
struct cblock {
	struct cmatch m[1 << BLOCK_SHIFT];
	__u32 run_len[1 << BLOCK_SHIFT];
};

struct counter {
	__u64 pkts;
	__u64 bytes;
};

struct pps_window {
	__u64 start;
	__u64 count;
};

struct lpm_key {
	__u32 prefixlen;
	__u32 slot;
	__u32 family;
	__u32 addr[4];
};

struct port_key {
	__u32 slot;
	__u32 port; /* 0x10000: packet without testable ports */
};

struct blocks {
	__u64 w[BLOCK_WORDS];
};

/* A concrete entry's key is canonical: the same for both directions of
 * the flow (state.h: canon_order), the entry's own direction is SF_SWAP.
 * A flow IPFilter keeps two entries for (one each way) has the second
 * under the same key with twin set (SF_TWIN on the first). A wildcard
 * entry's key is not canonical: src is the entry's source. */
struct state_key {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 family;
	__u8 wild; /* 1: wildcard destination (dst is zero, or the group: SF_GFILL), §3.1 */
	__u8 twin; /* 1: the flow's entry the other way round (SF_TWIN) */
};

struct tcp_side {
	__u32 end;
	__u32 maxend;
	__u32 maxwin;
	__u8 wscale;
	__u8 wflags;
	__u8 state;
	__u8 pad;
};

/* The state table holds at most this many entries; state_max may not
 * exceed it. Entries are allocated as they are made (no preallocation). */
#define STATE_CAP 262144

/* One CPU's packet and byte counts of a state entry, [rev*2 + out]: one
 * cache line. */
struct state_cnt {
	__u64 pkts[4];
	__u64 bytes[4];
};

/* Counter stripes of an entry. The kernel allocates a hash element of
 * this table (its 48-byte header, the 40-byte key, the value) in a
 * 512-byte, 512-aligned object 8 bytes in, so the value starts 32 bytes
 * into a cache line: the read part ends and the written line starts at
 * value offset 96, and each stripe (offset 160 + 64 * i) is a line of its
 * own. Four stripes fill the object exactly (value 416 bytes): the entry
 * takes no more memory than with one. */
#define STATE_STRIPES 4

/* Laid out for two CPUs sharing a flow (a request/response test runs each
 * direction on its own CPU): what a packet reads (the rule's verdict,
 * interface and option checks) first, with the tail of the key; what
 * packets of both ways write (lifetimes, window tracking) in one line
 * after it; the counters last, per CPU. A packet finds the read part
 * clean in its cache, moves one line from the other CPU and writes its
 * counters in a line no other CPU writes. */
struct state_entry {
	__u32 pass;
	__u32 rule;     /* slot-relative rule index */
	__u16 slot;
	__u16 auth;     /* IPSO authority of the creating packet, with secclass */
	__u32 gen;      /* generation of the slot's rules that made it */
	__u32 ifindex[4];
	__u32 age[2];   /* seconds, 0 = default */
	__u32 logtag;
	__u32 rule_no;
	__u32 group_no;
	__u8 flags;
	__u8 secclass;  /* of the creating packet: both directions repeat it */
	__u8 srcbits;   /* counted by its source of this many bits (max-srcs),
			 * 0: not counted (struct src_key) */
	/* how the flags of the creating way of the entry this one replaced,
	 * of one verdict, differ from flx there (state.h: flxvar_of): a
	 * packet with that difference matches too (state_create, faith16) */
	__u8 flxvar;
	/* §3.2: the FI_CMP flags each slot [out*2 + rev] saw first; the IP
	 * options (IPv6: extension headers but the fragment header) of the
	 * creating packet, which its direction repeats, and of the first
	 * reply (SF_OPTREV), which replies repeat (is_opt/is_optmsk) */
	__u32 flx[4];
	__u32 opt;
	__u32 opt_rev;
	/* a wildcard-destination entry's own destination (the group) */
	__u32 wdst[4];
	__u64 created;
	/* written by packets of both ways: one line (lifetimes only when
	 * they change, the window tracking of both sides) */
	__u64 expire;
	__u64 last;     /* last packet */
	struct tcp_side tcp[2];
	/* ICMP errors matched to the entry, [rev*2 + out] as the counters:
	 * IPFilter's is_icmppkts, which refuse an error once more have come
	 * one way than packets went the other (sl_icmperr_lookup). Saturate
	 * at 0xffff; written without atomics (a count lost to a race lets
	 * one more error by) */
	__u16 icmperr[4];
	/* the counters, by CPU (cpu % STATE_STRIPES): a CPU writes a line
	 * of its own; readers add the stripes */
	struct state_cnt cnt[STATE_STRIPES];
};

/* A slot of st_dm, the state table's direct-mapped array (est11, est15):
 * what an established packet of a flow needs of its entry, at dm_idx(key).
 * The array's lookup is inlined by the verifier (no kernel code, no map
 * struct, no bucket), so a packet whose flow holds its slot reaches this
 * value alone instead of the hash's struct, a bucket and the element.
 * The states hash stays the authority: a slot is filled by the
 * established path from the element it has just decided a packet by, and
 * emptied by every end of the entry (state_take) and by every other
 * writer of the entry (state_find, state_put: slot_detach writes what the
 * slot took, the lifetime, the window and the counts, back first).
 * Packets take no lock: a packet reads the slot, checks, and commits what
 * it changed only if it moves seq from the even value it read to odd
 * (compare and swap), and back to even after its stores. A fill takes seq
 * the same way; the ends and the write-backs (under lock, which orders
 * them among themselves) move it by two, so a packet that read the slot
 * before them fails its swap, and seq stays odd until a packet still
 * storing has done: no fill can give the slot to another flow under its
 * stores. valid is 0 while a fill is not yet checked against the hash.
 *
 * 256 bytes, page-aligned array (BPF_F_MMAPABLE): a slot is four whole
 * lines. Line 0 holds what every packet reads and writes (seq, the key's
 * IPv4 words, the lifetime, the window), line 1 what it reads (the
 * entry's verdict, interfaces, flags), line 2 its counts; the path asks
 * for the three at once. Line 3 is cold: the key's other IPv6 words, the
 * element's creation time, the lock. */
struct st_slot {
	/* line 0 */
	__u64 seq;
	__u32 ksrc;           /* key.src[0] */
	__u32 kdst;           /* key.dst[0] */
	__u32 kports;         /* key.sport | key.dport << 16 */
	__u32 kpfwt;          /* proto | family << 8 | wild << 16 | twin << 24; 0: empty */
	__u64 expire;         /* the element's while the slot holds it: written by packets */
	struct tcp_side tcp[2];
	/* line 1 */
	__u64 last;
	__u32 pass;
	__u8 flags;
	__u8 optok;           /* 1: the entry's way, 2: the other's: a clean packet's options and class match */
	__u8 valid;
	__u8 pad0;
	__u32 ifindex[4];
	__u32 flx[4];
	__u32 age[2];
	__u32 pad1[2];
	/* line 2: since the fill or the last write-back */
	__u64 pkts[4];
	__u64 bytes[4];
	/* line 3 */
	__u32 khi[6];         /* key.src[1..3], key.dst[1..3] */
	__u64 created;        /* the element's: a write-back goes to it only */
	__u64 hits;           /* packets decided through the slot, never cleared (tests) */
	struct bpf_spin_lock lock;
	__u32 pad2[5];
};

/* st_dm's slots: 8x the default state_max (4 013), an eighth of STATE_CAP;
 * a power of two (dm_idx masks). */
#define ST_DM_SLOTS 32768
_Static_assert(sizeof(struct st_slot) == 256, "st_slot: four lines");

/* A datagram's fragments, as IPFilter keys them: interface, version,
 * protocol, id, addresses, options, security class and authority. */
struct frag_key {
	__u32 src[4];
	__u32 dst[4];
	__u32 id;
	__u32 ifindex;
	__u32 opt;      /* copied option bits, and the IPSO authority (frag_key_of) */
	__u8 proto;
	__u8 family;
	__u8 secclass;
	__u8 pad;
};

struct frag_entry {
	__u64 expire;
	__u32 pass;
	__u32 rule_no;
	__u32 group_no;
	__u32 logtag;
	__u32 first_end; /* end of the first fragment, 8-byte units (seen0) */
	__u32 next_off;  /* where the next in-order fragment starts */
	__u8 seen0;      /* the first fragment (offset 0) went by */
	__u8 slot;       /* slot and index of the rule that made the entry: */
	__u8 pad[2];     /* a keep frags entry routes the datagram as its */
	__u32 rule;      /* first fragment (to, dup-to, fastroute) */
};

/* HP DCA (keep limit N [cumulative]): the connections each rule and source
 * (or rule alone, cumulative) has open, and the connections themselves so
 * that a close or expiry gives its quota back. */
struct dca_key {
	__u32 slot;
	__u32 gen;
	__u32 rule;
	__u32 src[4]; /* zero for a cumulative limit */
};

struct dca_conn_key {
	__u32 slot;
	__u32 gen;
	__u32 rule;
	__u32 src[4];
	__u32 dst[4];
	__u16 sport;
	__u16 dport;
	__u8 family;
	__u8 cumul;
	__u16 pad;
};

struct dca_conn {
	__u64 expire;
};

#define DCA_CAP 65536

/* keep state (max-srcs N, max-per-src M[/bits]), IPFilter's source
 * tracking: the entries of each rule by source (masked to the rule's
 * bits; kind SRC_ADDR) and the sources of each rule with entries (kind
 * SRC_RULE, addr zero). A value is a count; SRC_DEAD marks one at zero
 * that its releaser is deleting (lib/srcs.h). Keyed by the generation of
 * the slot's rules as rule_states is: a new set counts afresh, and each
 * entry gives its count back to the key it took it from. */
struct src_key {
	__u32 addr[4];
	__u32 slot;
	__u32 gen;
	__u32 rule;
	__u8 family;
	__u8 kind;
	__u16 pad;
};

#define SRC_ADDR 0
#define SRC_RULE 1
#define SRC_CAP 65536
#define SRC_DEAD (1ULL << 63)

/* The sweeper: a kernel timer that reclaims expired state, fragment and
 * DCA entries every SWEEP_NS and runs IPFilter's watermark flush when the
 * table passed state_wm_high (ipf_slowtimer's work, with no daemon). */
#define SWEEP_NS 500000000
struct sweeper {
	struct bpf_timer timer;
	__u64 doflush; /* the table passed state_wm_high */
	__u64 wm_last; /* when the watermark flush last ran */
	__u64 runs;
	__u64 swept;   /* expired entries removed */
	__u64 flushed; /* entries the watermark flush removed */
};

/* Control operations run through sluice_control (BPF_PROG_TEST_RUN), so that
 * user space changes the tables with the same atomic accounting as the
 * packet path. */
#define CTL_ARM 1      /* start (or restart) the sweeper */
#define CTL_KILL 2     /* remove the state entries in ctl_keys[0..n) */
#define CTL_SWEEP 3    /* one sweep now */
#define CTL_KEYS 256

struct ctl_args {
	__u32 op;
	__u32 n;
	__u64 removed; /* out: entries CTL_KILL removed */
};

/* A control call's own arguments and result, in the test run's packet
 * after its 14-byte Ethernet header (since trust12): ctl_args is one map
 * entry every process shares, so two processes' calls could run each
 * other's operation or read each other's result; a packet is the call's
 * own. sluice_control answers CTL_DONE in magic; a packet without
 * CTL_MAGIC (an older Sluice's call: 14 bytes) takes its arguments from
 * ctl_args as before. */
struct ctl_msg {
	__u32 magic;
	__u32 op;
	__u32 n;
	__u32 pad;
	__u64 removed; /* out: entries CTL_KILL removed */
};
#define CTL_MAGIC 0x51c7c7a1
#define CTL_DONE 0x51c7c7a2
#define CTL_MSG_SIZE 24 /* Go's ctlMsg (no BTF of it: no map holds one) */
_Static_assert(sizeof(struct ctl_msg) == CTL_MSG_SIZE && __builtin_offsetof(struct ctl_msg, removed) == 16,
	       "struct ctl_msg is not Go's ctlMsg");


/* Metadata only user space reads: the printed rule and list names, so
 * ipfstat can show the loaded set without a daemon holding it. */
#define TEXT_CHUNK 4096
#define TEXT_CHUNKS 262144 /* 1 GB of text over the three slots */
struct text_chunk {
	__u8 b[TEXT_CHUNK];
};

struct text_key {
	__u32 slot;
	__u32 chunk;
};

#define LIST_NAME_LEN 24
struct list_meta {
	__u32 dir;   /* 0 in, 1 out */
	__u32 acct;  /* accounting list */
	__u8 name[LIST_NAME_LEN]; /* group name, "" for the main lists */
};

struct log_rec {
	__u64 ts;
	__u32 kind;
	__u32 ifindex;
	__u32 rule_no;
	__u32 group_no;
	__u32 pass;
	__u32 reason;
	__u32 pflags;
	__u32 plen;
	__u32 logtag;
	__u16 caplen;
	__u8 dir;
	__u8 family;
	__u8 data[LOG_SNAP];
};

#endif
