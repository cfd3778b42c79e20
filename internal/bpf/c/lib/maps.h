/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The filter's maps: rule storage (three slots), lists, counters, the
 * index, state, fragment and keep-limit tables, pools, interface data,
 * the log ring and the metadata ipfstat reads. Layouts are in filter.h.
 */
#ifndef SLUICE_MAPS_H
#define SLUICE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "filter.h"

/* Per-rule storage is one map per slot, made to the size of the set it
 * holds (a few rules or millions) and put in its slot of these outer
 * arrays when the set is loaded. BPF_F_INNER_MAP lets the inner maps
 * differ in size. */
#define INNER_ARRAY(name, vtype, kind, flags)				\
	struct name {							\
		__uint(type, kind);					\
		__uint(max_entries, 1);					\
		__uint(map_flags, flags);				\
		__type(key, __u32);					\
		__type(value, vtype);					\
	}

INNER_ARRAY(rule_array, struct rule, BPF_MAP_TYPE_ARRAY, BPF_F_INNER_MAP);
INNER_ARRAY(pps_array, struct pps_window, BPF_MAP_TYPE_ARRAY, BPF_F_INNER_MAP);
INNER_ARRAY(count_array, __u32, BPF_MAP_TYPE_ARRAY, BPF_F_INNER_MAP);
INNER_ARRAY(cblock_array, struct cblock, BPF_MAP_TYPE_ARRAY, BPF_F_INNER_MAP);

struct run_hash {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct run_key);
	__type(value, __u32);
};

/* Each slot's runs: where a packet's address leads in each run (IPv6
 * runs; IPv4 ones too in a slot written before runs4). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct run_hash);
} runs SEC(".maps");

struct run4_hash {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct run4_key);
	__type(value, __u32);
};

/* Each slot's IPv4 runs (struct run4_key). A slot written by an older
 * Sluice has none: its IPv4 runs are in runs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct run4_hash);
} runs4 SEC(".maps");

INNER_ARRAY(runbit_array, __u64, BPF_MAP_TYPE_ARRAY, BPF_F_INNER_MAP);

/* Each slot's runs bitmap (filter.h, RUN_HASH_K1), by 64-bit word. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct runbit_array);
} run_bits SEC(".maps");

/* Each slot's small-set bitmap (filter.h RUN_FLAT): the slot's words at
 * slot * RUN_FLAT_WORDS, written in place while the slot is not running. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * RUN_FLAT_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} run_flat SEC(".maps");

/* The large sets' bitmap (filter.h RUN_BIG): one entry in the object; a
 * datapath makes it 1 + NSLOTS * RUN_BIG_WORDS when a set needs it
 * (slotmaps_linux.go ensureRunBig). Each slot's words are written in
 * place while the slot is not running. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} run_flat_big SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct rule_array);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * MAX_LISTS);
	__type(key, __u32);
	__type(value, struct list);
} lists SEC(".maps");


/* The main lists' compact forms, slot * LIST_GROUP0 + list. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS * LIST_GROUP0);
	__type(key, __u32);
	__type(value, struct hotlist);
} hotlists SEC(".maps");

/* Matches of the hot lists' rules, per CPU: no atomic, no shared line.
 * A program's constant lists (lib/fast.h) count in the statistics' block
 * instead; user space adds the two and clears an entry here (hotcounts_linux.go). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOTS * LIST_GROUP0);
	__type(key, __u32);
	__type(value, struct hot_count);
} hot_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct pps_array);
} pps SEC(".maps");

/* Each slot's rules' compact matches, by block (struct cblock). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct cblock_array);
} cblocks SEC(".maps");

/* Entries each rule has created (keep state limit). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__array(values, struct count_array);
} rule_states SEC(".maps");

/* The configuration, CFG_* keys, in one value: a packet reads it with one
 * lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conf);
} config SEC(".maps");

/* The counters, one value per CPU (keyed by its number; the loader sizes
 * the map to the possible CPUs, filterSpec): a packet counts with one
 * lookup, its statistics and a constant list's rule (statblock.fast). A plain array rather than a per-CPU one: single-packet runs of
 * the idle program cost ~30 ns less (docs/datapath-cost.md, at1), the
 * per-CPU lookup reading the block's pointer from the map's own page. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct statblock);
} stats SEC(".maps");

/* Count of live state entries (state_max), and of those with a wildcard
 * destination (key 1): lookups skip what the table cannot hold. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __s64);
} state_count SEC(".maps");

/* Not an LRU: an entry leaves only through state_unlink (expiry, the
 * sweeper, a close, ipf -FS), which keeps state_count equal to the table. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STATE_CAP);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct state_key);
	__type(value, struct state_entry);
} states SEC(".maps");

/* The state table's direct-mapped array (filter.h: struct st_slot).
 * BPF_F_MMAPABLE for the layout only: such an array's values start on a
 * page (any other starts them 312 bytes into struct bpf_array), so each
 * 256-byte slot is four whole lines. Nothing maps it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ST_DM_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct st_slot);
} st_dm SEC(".maps");

/* Fragment cache (keep frags, and fragments of flows with state). An LRU
 * map still (a pinned one of an older Sluice is kept as it is), but never
 * full: frag_count refuses new datagrams at frag_size, at most FRAG_CAP. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FRAG_CAP);
	__type(key, struct frag_key);
	__type(value, struct frag_entry);
} frags SEC(".maps");

/* Count of the fragment cache's entries (IPFilter's ipfr_inuse, key 0):
 * sl_frag_add adds each entry it puts in, each delete takes it back, and
 * the sweeper, which removes the expired ones, sets it to what its walk
 * counted (key 1 counts during the walk): that also takes in the entries
 * an older Sluice's program left in a pinned map. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __s64);
} frag_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DCA_CAP);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dca_key);
	__type(value, __u32);
} dca SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DCA_CAP);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dca_conn_key);
	__type(value, struct dca_conn);
} dca_conns SEC(".maps");

/* max-srcs counts (struct src_key): at most one key per live entry of a
 * max-srcs rule and one per such rule, so bounded by the state table's
 * entries; when full, an entry of a new source is refused (lib/srcs.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SRC_CAP);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct src_key);
	__type(value, __u64);
} srcs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sweeper);
} sweeper SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ctl_args);
} ctl_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CTL_KEYS);
	__type(key, __u32);
	__type(value, struct state_key);
} ctl_keys SEC(".maps");

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

/* Link-layer header length by ifindex (mod IFACE_SLOTS): the value is
 * ifindex << 8 | length; another ifindex, or none, means Ethernet (14). An
 * array, so the lookup every packet makes is a few instructions. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IFACE_SLOTS);
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

/* The printed rules of each slot, for ipfstat: each rule's text with its
 * length before it, one after the other in rule order, in chunks keyed
 * by slot and number. Only user space reads it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TEXT_CHUNKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct text_key);
	__type(value, struct text_chunk);
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

/* Likewise for the values of the inner maps: clang describes a struct
 * reached only through an inner map definition as a forward declaration,
 * which cannot size the map. */
struct {
	struct rule r;
	struct pps_window p;
	struct text_chunk t;
	struct run_key k;
	struct run4_key k4;
	struct cblock c;
} sluice_inner_btf SEC(".bss");

#endif
