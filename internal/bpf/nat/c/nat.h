/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Layout shared by the Sluice NAT datapath (nat.c) and its Go loader
 * (internal/bpf/nat/layout.go mirrors every struct and constant; a test
 * checks sizes and offsets against the BTF of the compiled object).
 *
 * Addresses in keys and sessions are in network byte order as they sit in
 * the packet (IPv4 in word 0, the other words zero). Rule operands and
 * allocation state are 128-bit numbers {hi, lo} in host order (IPv4 in the
 * low 32 bits of lo), because address pools step arithmetically.
 */
#ifndef SLUICE_NAT_H
#define SLUICE_NAT_H

#include <linux/types.h>
#include <linux/bpf.h>

#define NAT_MAX_RULES 1024 /* rules per slot */
#define NAT_NSLOTS 2       /* active and scratch: a new set is written aside */
#define NAT_SESS_ENTRIES 131072 /* hash entries: two per session, one per wild entry */
#define NAT_FRAG_ENTRIES 4096
#define NAT_HM_ENTRIES 65536
#define NAT_FTP_ENTRIES 8192

/* Rule types (ipnat.Type). */
#define NT_MAP 0
#define NT_BIMAP 1
#define NT_MAPBLOCK 2
#define NT_RDR 3
#define NT_REWRITE_IN 4
#define NT_REWRITE_OUT 5

/* Address operand kinds (ipnat.AddrKind). */
#define AK_NORMAL 0
#define AK_RANGE 1
#define AK_SPLIT 2

/* Port comparisons of from/to operands. */
#define PO_NONE 0
#define PO_EQ 1
#define PO_NE 2
#define PO_LT 3
#define PO_GT 4
#define PO_LE 5
#define PO_GE 6
#define PO_OUT 7   /* a <> b */
#define PO_IN 8    /* a >< b */
#define PO_RANGE 9 /* a : b */

/* Rule flags. */
#define RF_NO 0x1
#define RF_V6 0x2
#define RF_FILTER 0x4
#define RF_NOTSRC 0x8
#define RF_NOTDST 0x10
#define RF_TCP 0x20
#define RF_UDP 0x40
#define RF_ICMPQ 0x80
#define RF_PORTMAP 0x100
#define RF_AUTO 0x200
#define RF_SEQ 0x400
#define RF_ICMPIDMAP 0x800
#define RF_IDMAPQ 0x1000   /* icmpidmap with a port test: queries only */
#define RF_FIXEDDP 0x2000
#define RF_RR 0x4000
#define RF_STICKY 0x8000
#define RF_FTP 0x10000     /* proxy ftp */
#define RF_PROXY 0x20000   /* some proxy (its port is tested) */

/* Packet protocol flags (the engine's IPN_TCP, IPN_UDP, IPN_ICMPQUERY). */
#define PF_TCP 1
#define PF_UDP 2
#define PF_TCPUDP 3
#define PF_ICMPQ 4

/* Directions. */
#define DIR_IN 0
#define DIR_OUT 1
/* nat_key.dir bit of a proxy's wildcard entry (source port still to learn). */
#define DIR_WILD 0x80
/* nat_key.dir bit of an entry a newer session took the key of (shadow()). */
#define DIR_SHADOW 0x40
/* nat_key.dir bit of a frags value made by an ICMP error sent as a first
 * fragment: not a session's key but the outer address the rest of the
 * datagram gets (src, which one: sport 0 source, 1 destination). */
#define DIR_ICMPERR 0x20

/* Session flags. */
#define SF_PROXY 0x01 /* the ftp proxy follows it */
#define SF_SLAVE 0x02 /* opened by a proxy */
#define SF_WILD 0x04  /* waiting for its first packet (wildcard port) */
#define SF_HM 0x08    /* holds a host map reference */
#define SF_FWDSRC 0x10 /* wild: the unknown port is the forward source port */
#define SF_CHAIN 0x20  /* older sessions may share this entry's key (shadows) */

/* Config keys (array of u64). */
#define NCFG_ACTIVE 0    /* slot of the active rules */
#define NCFG_COUNT 1     /* live sessions (atomic) */
#define NCFG_WILDS 2     /* live wildcard entries (atomic) */
#define NCFG_SEQ 3       /* creation counter (atomic) */
#define NCFG_MAX 4       /* nat_table_max */
#define NCFG_RANDMODE 5  /* 0: bpf_get_prandom_u32, 1: ipftest's sequence */
#define NCFG_RANDCALLS 6
#define NCFG_RANDLAST 7
/* 8..11: in struct nat_hot (user space reads and writes them as these
 * keys: NCFG_L3DEV, NCFG_COOKIE, NCFG_NSPERJIFFY, NCFG_CLOCK) */
#define NCFG_L3DEV 8
#define NCFG_COOKIE 9
#define NCFG_NSPERJIFFY 10
#define NCFG_CLOCK 11
#define NCFG_FTP_INSECURE 12
#define NCFG_FTP_PASVONLY 13
#define NCFG_FTP_FORCEPASV 14
#define NCFG_FTP_SINGLE 15
#define NCFG_NEXTID 16   /* rule ids (user space) */
#define NCFG_FLUSHMODE 17 /* argument of the flush program */
#define NCFG_FLUSHARG 18
#define NCFG_FLUSHED 19   /* result of the flush program */
#define NCFG_HMSEQ 20
#define NCFG_NRULES 21    /* 21, 22: rules in slot 0, 1 (user space) */
#define NCFG_FTPRULES 23  /* the rules use the ftp proxy (user space) */
#define NCFG_NOEXPIRE 24  /* tests: the timers keep every session */
#define NCFG_DEFAGE 25     /* fr_defnatage in ticks (0: 1200): UDP, ICMP replies */
#define NCFG_DEFIPAGE 26   /* fr_defnatipage (0: 120): other protocols */
#define NCFG_DEFICMPAGE 27 /* fr_defnaticmpage (0: 6): ICMP queries */
#define NCFG_NOTWIN 28     /* an entry a TCP/UDP packet can find has no fast twin (sticky) */
#define NCFG_SHADOWS 29    /* live shadow entries (atomic): lookups walk them (sess_find) */
#define NCFG_PLAIN 30      /* the fast programs in use are plain: no hot line (user space; k_nspj) */
#define NCFG_WILDSEEN 31   /* a proxy's wildcard was made (sticky): see nat_slow */
#define NCFG_FSEQ 32      /* the fast entries' seq (atomic): fseq_next */
#define NCFG_N 33

/* The configuration every packet reads, in one map value (one lookup,
 * one cache line): the hot map's only entry. */
struct nat_hot {
	__u64 nspj;   /* the length of a jiffy, measured at load */
	__u64 clock;  /* added to the clock: tests move time */
	__u32 cookie; /* marks a packet the egress program translated */
	__u32 l3dev;  /* some attached device has no link-layer header */
};

/* slow_progs indexes: the slow program of each hook. */
#define SLOW_IN 0
#define SLOW_OUT 1
#define SLOW_PRE 2
#define SLOW_N 3

/* Flush program modes. */
#define FL_ALL 1     /* every session (ipnat -F) */
#define FL_RULE 2    /* the sessions of rule id FLUSHARG (ipnat -rp, purge) */
#define FL_EXPIRED 3 /* sessions past their lifetime at the (moved) clock */
#define FL_CLOCKS 4  /* read jiffies and ns into FLUSHED and FLUSHARG */
#define FL_ARM 5     /* start the sweeper's timer: FLUSHED 0 when it runs */
#define FL_SWEEP 6   /* sweep once now (tests) */

/* The sweeper's fault injection (struct nat_sweeper's fault, tests): the
 * allocation of a session's timer fails in the packets' path only, or
 * in the sweeper's too. */
#define SWF_PACKETS 1
#define SWF_ALL 2

/* Statistics (per-CPU array, index side*NS_SIDE + n for sided ones). */
#define NS_SIDE 16
#define NS_TRANSLATED 0
#define NS_IGNORED 1     /* packets untranslated */
#define NS_BADNAT 2      /* a rule matched but no session could be made: dropped */
#define NS_ADDED 3
#define NS_MISS 4        /* lookup misses */
#define NS_TABLEMAX 5
#define NS_EXISTS 6      /* translation exists */
#define NS_ICMP 7        /* ICMP errors translated */
#define NS_FRAG 8        /* fragments translated */
#define NS_PROXYFAIL 9   /* the proxy could not rewrite a segment */
#define NS_INSERTFAIL 10
#define NS_WRAP 11       /* allocation searched all and failed */
#define NS_IFADDR 12     /* no interface address for 0/32 */
#define NS_FASTGONE 13   /* packets the fast path translated for entries now gone */
#define NS_RACED 14      /* first packets translated by the session another CPU made at once */
#define NS_EXPIRED 32
#define NS_FLUSHED 33
#define NS_HMNEW 34
#define NS_HMADD 35
#define NS_WILDUSED 36
#define NS_CLONES 37
#define NS_NOSLOW 38     /* packets left alone: no slow program (never in use) */
#define NS_NOTIMER 39    /* sessions made without their timer: the sweeper's (sess_arm) */
#define NS_N 48

/* ftp proxy line buffer and limits (ip_ftp_pxy.c FTP_BUFSZ, IPF_FTPBUFSZ). */
#define FTP_BUFSZ 160
#define FTP_MAXLINE 96
/* The largest TCP payload whose tail the proxy can move after a rewrite. */
#define FTP_MAXPAY 2048
/* The most whole lines of one segment the proxy acts upon. */
#define FTP_MAXLINES 64

struct nat_op {
	__u64 a[2];
	__u64 m[2];
	__u32 kind;
	__u32 masklen;
};

struct nat_rule {
	__u32 id;
	__u32 flags;
	__u32 inif;  /* ifindex, 0 any, 0xffffffff none */
	__u32 outif;
	__u8 type;
	__u8 proto;
	__u8 sport_op;
	__u8 dport_op;
	__u16 sport_p1;
	__u16 sport_p2;
	__u16 dport_p1;
	__u16 dport_p2;
	__u16 oport_min;
	__u16 oport_max;
	__u16 spmin;
	__u16 spmax;
	__u16 dpmin;
	__u16 dpmax;
	__u16 proxy_port;
	__u16 mss;
	__u32 age[2]; /* seconds, 0: default */
	__u32 ppip;
	__u32 ippip;
	__u32 mapmask;
	__u32 rdrmask;
	struct nat_op src;
	struct nat_op dst;
	struct nat_op orig;
	struct nat_op nw;
	struct nat_op nsrc;
	struct nat_op ndst;
};

/* Allocation state of a rule (ipf_nat's in_snip, in_spnext, ...). */
struct nat_rstate {
	__u64 snip[2];
	__u64 dnip[2];
	__s32 spnext;
	__s32 dpnext;
	__s32 stepnext;
};

/* The rule hash table of a direction, as IPFilter walks it (the engine's
 * rulehash.go): idx lists the rules in the order they were added, each
 * with its bucket; a packet looks, for each mask of its family in masks
 * (longest first), at the rules of the bucket its address falls in under
 * that mask. Round-robin rules move to the back under the lock. */
#define NAT_BUCKETS 127
#define NAT_LEVELS 132 /* room for /0-/128 */
struct nat_order {
	struct bpf_spin_lock lock;
	__u32 n;
	__u16 idx[NAT_MAX_RULES];
	__u8 bucket[NAT_MAX_RULES];
	__u8 nmasks[2];            /* masks per family: IPv4, IPv6 */
	__u8 masks[2][NAT_LEVELS]; /* prefix lengths, longest first */
	__u8 pad[2];
};

struct nat_key {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport; /* network order; ICMP queries: the id in both */
	__u16 dport;
	__u8 proto;
	__u8 dir;    /* DIR_IN/DIR_OUT, | DIR_WILD */
	__u8 family; /* 4 or 6 */
	__u8 pad;
};

#include "natfast.h"

/* The fast twin of an IPv6 TCP or UDP entry (under the entry's own
 * nat_key): a nat_fast (its nsrc and ndst unused) and the new addresses,
 * so that what reads the per-packet fields reads both alike. */
struct nat_fast6 {
	struct nat_fast f;
	__u32 nsrc[4];   /* network order */
	__u32 ndst[4];
	struct nat_key k; /* as nat_fast4's */
	__u32 seq;
	__u32 pad;
};

/* fast4's value: the entry's nat_fast, the key it was made under and a
 * sequence word, which let the fast path trust a copy of an element it
 * looked up. fast4 and fast6 are preallocated: an element deleted (a
 * session's end) or replaced (an update of its key) goes back to a free
 * list at once, and another CPU's next insert, of any key, may write it
 * while a reader still holds it. So an element is written with seq odd
 * (FSEQ_DEAD before it is deleted or replaced; a fresh odd word while it
 * is being made) and made whole by one store of an even word no element
 * had before (fseq_next); a reader that reads the same even seq before
 * and after its copy, and its own key in k, copied one whole element of
 * its own key. */
struct nat_fast4 {
	struct nat_fast f;
	struct nat_fkey k;
	__u32 seq; /* 8-byte aligned with pad: a 64-bit compare-and-swap */
	__u32 pad;
};
#define FSEQ_DEAD 1

/* A session's addresses as first seen (o) and as rewritten (n). */
struct nat_tuple {
	__u32 osrc[4];
	__u32 odst[4];
	__u32 nsrc[4];
	__u32 ndst[4];
	__u16 osport;
	__u16 odport;
	__u16 nsport;
	__u16 ndport;
};

/* The sweeper (map sweeper, one element): a timer armed at load that
 * finds, every tick while there are any, the sessions made without a
 * timer of their own (sess_arm), gives them one or ends them when
 * their lifetime is over. */
struct nat_sweeper {
	struct bpf_timer timer;
	__u64 untimed; /* sessions made without a timer since the last sweep (atomic) */
	__u64 fault;   /* tests: SWF_* */
	__u64 walks;   /* sweeps that walked the session table */
	__u64 armed;   /* timers a sweep set */
	__u64 ended;   /* sessions a sweep ended */
};

/* One direction of a session: the entry packets with its key find. */
struct nat_sess {
	struct nat_tuple t;
	/* checksum differences of this entry's rewrite (one's complement
	 * sums of ~old + new): IPv4 header, pseudo header, ports or id */
	__u32 csum_l3;
	__u32 csum_l4a;
	/* ifindex and sifindex share an aligned 64-bit word: sess_take
	 * binds ifindex by a compare-and-swap on it (the BPF target has no
	 * 32-bit one at -mcpu=v1), sifindex never changes */
	__u32 ifindex;   /* packets with this key must arrive on it (0: not
			  * bound yet, see sess_take) */
	__u32 sifindex;  /* interface the session was made on */
	__u32 csum_l4p;
	__u32 ifin;      /* the session's inbound and outbound interfaces as
			  * made (0: a `*` rule's, bound per entry later) */
	__u32 ifout;
	__u32 rule_id;
	__u32 age[2];
	__u32 hm_rule;   /* host map reference (SF_HM) */
	__u16 hm_port;
	__u16 mss;
	__u8 w;          /* 0: forward entry (holds the timer), 1: reply entry */
	__u8 sdir;       /* direction of the packet that made the session */
	__u8 proto;
	__u8 family;
	__u8 pflags;     /* PF_* of the session */
	__u8 sflags;     /* SF_* */
	__u8 rtype;      /* NT_* of its rule */
	__u8 tcpflags;   /* TCP flags seen in this entry's direction */
	__u64 last;      /* ns of the last packet in this direction, 0: none */
	__u64 deadline;  /* wildcard entries: end of life */
	__u64 pkts;
	__u64 bytes;
	__u64 seq;       /* creation order */
	struct nat_key peer; /* the other direction's entry */
	struct bpf_timer timer;
};

struct nat_frag_key {
	__u32 src[4];
	__u32 dst[4];
	__u32 id;
	__u8 proto;
	__u8 family;
	/* IPv4: the copied options, as IPFilter's fragment cache keys
	 * them (ipfr_optmsk & IPF_OPTCOPY, ipfr_secmsk, ipfr_auth) */
	__u16 secmsk;
	__u32 optmsk;
	__u16 auth;
	__u16 pad;
};

struct nat_hm_key {
	__u32 rule_id;
	__u16 port;  /* host order; 0 for map rules */
	__u8 family;
	__u8 pad;
	__u32 src[4];
	__u32 dst[4];
};

struct nat_hm {
	__u32 nsrc[4];
	__u32 ndst[4];
	__s64 ref;
	__u64 seq;
};

struct nat_ifaddr {
	__u32 v4;
	__u32 v6[4];
};

struct ftp_side {
	/* FTP_BUFSZ bytes are used; the rest lets an index be masked */
	__u8 buf[256];
	__s32 r;
	__s32 w;
	__s32 lines;
	__s32 cmd;
	__u8 junk;
	__u8 pad[3];
};

struct seq_adj {
	__u32 set;
	__u32 min;
	__u32 ackmin;
	__s32 off;
	__s32 prev;
};

/* One side of an ftp control session's proxy state, at key seq*2+side;
 * the login state lives in side 0's. */
struct nat_ftp {
	struct ftp_side s;
	struct seq_adj adj;
	__s32 passok;
	__u8 incok;
	__u8 gaveup;
	__u8 pad[2];
};

/* Text of a loaded rule, for ipnat -l (the Go side keeps no copy). */
#define NAT_TEXT_LEN 504
struct nat_text {
	__u32 id;
	__u32 len;
	char text[NAT_TEXT_LEN];
};

#endif
