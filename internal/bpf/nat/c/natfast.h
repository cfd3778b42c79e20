/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef SLUICE_NATFAST_H
#define SLUICE_NATFAST_H

/*
 * The IPv4 fast path's structures, shared by NAT's program (nat.h) and the
 * filter's, which runs the same fast path through the same fast4dm when
 * NAT is inline (internal/bpf/c/lib/natin.h): one definition, so the two
 * objects cannot disagree on a layout or a checksum. Only what the fast
 * path needs here: the filter's headers use other meanings for many of
 * nat.h's names.
 */

#include <linux/types.h>
#include <linux/bpf.h>

#define NAT_DM_SLOTS 131072 /* fast4dm: a slot for each entry fast4 can hold (NAT_SESS_ENTRIES; a power of two) */

/* The key of the IPv4 fast path: a TCP or UDP entry's nat_key in 16
 * bytes (the nat_key of an IPv4 entry has nothing else in it). */
struct nat_fkey {
	__u32 src;
	__u32 dst;
	__u16 sport; /* network order */
	__u16 dport;
	__u8 proto;
	__u8 dir;    /* DIR_IN or DIR_OUT, nothing else */
	__u16 pad;
};

/* The hot part of an IPv4 TCP or UDP session entry, all the fast path
 * reads and writes for a packet: the rewrite, its checksum differences
 * and the entry's per-packet fields: 56 bytes (a slot's copy; fast4's
 * value adds the key and a sequence word, struct nat_fast4 in nat.h, and
 * the fast path copies the first 32, the rewrite). While it exists
 * it holds the entry's last and tcpflags (the nat_sess's copies are
 * those it was made with); pkts and bytes count what the fast path
 * translated (the nat_sess's what the rest did), so that the fast path
 * has no counter of its own to write: the packets translated are
 * NS_TRANSLATED, plus pkts of the fast entries, plus NS_FASTGONE. */
struct nat_fast {
	__u32 nsrc;      /* network order */
	__u32 ndst;
	__u16 nsport;
	__u16 ndport;
	__u32 ifindex;   /* packets must arrive on it (0: the entry is not
			  * bound yet: the slow path binds it) */
	__u32 csum_l3;   /* as nat_sess */
	__u32 csum_l4a;
	__u32 csum_l4p;
	__u8 flags;      /* FF_* */
	__u8 tcpflags;
	__u16 pad;
	__u64 last;
	__u64 pkts;
	__u64 bytes;
};

/* A slot of fast4dm, the direct-mapped copies of fast4's entries (the
 * slot of a key is slot_idx's hash of it): an array lookup, which the
 * verifier inlines, reads no map struct and no bucket, so a packet whose
 * entry has a slot reaches one place (this value, 80 bytes) instead of
 * three (the hash's struct, a bucket, the element). fast4 stays the
 * authority: a slot is filled beside fast4 by the slow path (first come,
 * first kept: an occupied slot is not taken by another key) and cleared
 * when the entry leaves fast4; a packet whose key the slot does not hold
 * looks fast4 up as before. Readers (the fast path) take no lock: seq is
 * odd while a writer changes k or f's rewrite (or has not yet checked a
 * new fill against fast4) and changes with every write, so a reader that
 * reads the same even seq before and after its copy has a whole entry.
 * Writers (the slow path, the timers, the flush) hold lock. f's per-packet
 * fields (last, tcpflags, pkts, bytes) count what the fast path did
 * through the slot; fast4's element keeps what it did there; readers of
 * an entry's times and counts add both (slot_peek). */
struct nat_slot {
	struct bpf_spin_lock lock;
	__u32 seq;
	struct nat_fkey k; /* proto 0: empty */
	struct nat_fast f;
};

/* nat_fast.flags */
#define FF_MSS 0x01 /* SYN segments take the slow path (MSS clamping) */

/* One's complement arithmetic on raw (memory-order) 16-bit words. */
static __always_inline __u32 csum_add32(__u32 a, __u32 b)
{
	a += b;
	return a + (a < b);
}

static __always_inline __u16 csum_fold32(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* slot_hash is the slot of the fast4 key of words w0..w3 (src, dst, the
 * ports, proto | dir << 8): a multiplicative hash, each step folding the
 * high bits down (the varying octet of an IPv4 address is the high byte
 * of its word). Go's slotIdx is the same; NAT's programs and the filter's
 * inline path (natin.h) both take it from here. */
static __always_inline __u32 slot_hash(__u32 w0, __u32 w1, __u32 w2, __u32 w3)
{
	__u32 h;

	h = w0 * 0x9e3779b1;
	h = (h ^ (h >> 16) ^ w1) * 0x85ebca77;
	h = (h ^ (h >> 16) ^ w2) * 0xc2b2ae3d;
	h = (h ^ (h >> 16) ^ w3) * 0x27d4eb2f;
	h ^= h >> 16;
	return h & (NAT_DM_SLOTS - 1);
}

#endif
