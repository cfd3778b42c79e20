/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The sweeper and the control program. IPFilter's slow timer expires
 * state and runs the watermark flush every tick; here a bpf_timer does it
 * every SWEEP_NS, so the table gives back expired entries with no daemon.
 * sluice_control is how user space starts the timer and removes state entries
 * (ipf -FS) through the same accounting as the packet path.
 */
#ifndef SLUICE_SWEEP_H
#define SLUICE_SWEEP_H

#include "common.h"
#include "state.h"
#include "dca.h"

#define TICK_NS 500000000ULL

struct bpf_map;

/* What one pass over the state table removes. */
#define SWEEP_EXPIRED 0 /* entries whose time ran out */
#define SWEEP_QUEUE 1   /* TCP entries in TCP state c->st (the later side) */
#define SWEEP_IDLE 2    /* TCP entries idle for c->idle or longer */
#define SWEEP_ALL 3     /* everything (ipf -FS) */

/* The callbacks count what they remove through a pointer into a map
 * value: a count kept in the context itself would be a different known
 * constant on every call, and the verifier, which checks a callback as a
 * loop body until its states repeat, would never see them repeat. */
struct sweep_ctx {
	__u64 now;
	__u64 idle;
	__u32 mode;
	__u32 st;
	__u64 *removed;
};

static __always_inline int sweep_gone(const struct state_key *k, const struct state_entry *e, const struct sweep_ctx *c)
{
	int gone = 0;

	switch (c->mode) {
	case SWEEP_EXPIRED:
		gone = e->expire < c->now;
		break;
	case SWEEP_QUEUE: {
		__u8 q = e->tcp[0].state > e->tcp[1].state ? e->tcp[0].state : e->tcp[1].state;

		gone = k->proto == IPPROTO_TCP && q == c->st;
		break;
	}
	case SWEEP_IDLE:
		gone = k->proto == IPPROTO_TCP && c->now - e->last >= c->idle;
		break;
	case SWEEP_ALL:
		gone = 1;
		break;
	}
	return gone;
}

static long sweep_state(struct bpf_map *map, struct state_key *k, struct state_entry *e, struct sweep_ctx *c)
{
	/* a copy: state_unlink names the twin it promotes through the key,
	 * and the map's own key is read-only */
	struct state_key kk;

	/* the lifetime, state and last packet of a flow whose packets go
	 * through its st_dm slot are the slot's */
	slot_sync(k, e);
	if (!sweep_gone(k, e, c))
		return 0;
	__builtin_memcpy(&kk, k, sizeof(kk));
	if (!kk.twin && !kk.wild && (e->flags & SF_TWIN)) {
		/* the twin first when it goes too: removing the key's entry
		 * promotes its twin, a new element in the bucket this pass
		 * has passed, so an expired twin stayed (counted, found by
		 * no packet) until the next pass, and ipf -FS left it */
		struct state_entry *t;

		kk.twin = 1;
		t = bpf_map_lookup_elem(&states, &kk);
		if (t && sweep_gone(&kk, t, c) && state_unlink(&kk, t))
			*c->removed += 1;
		kk.twin = 0;
	}
	if (state_unlink(&kk, e))
		*c->removed += 1;
	return 0;
}

static long sweep_dca(struct bpf_map *map, struct dca_conn_key *k, struct dca_conn *e, struct sweep_ctx *c)
{
	if (e->expire < c->now)
		dca_unlink(k);
	return 0;
}

static long sweep_dca_zero(struct bpf_map *map, struct dca_key *k, __u32 *n, struct sweep_ctx *c)
{
	if (*n == 0)
		bpf_map_delete_elem(&dca, k);
	return 0;
}

/* sweep_frag removes a fragment cache entry whose time ran out (IPFilter's
 * ipf_frag_expire: a datagram whose rest never came) and counts the others
 * in frag_count's key 1 (c->removed points there). */
static long sweep_frag(struct bpf_map *map, struct frag_key *k, struct frag_entry *e, struct sweep_ctx *c)
{
	if (e->expire <= c->now)
		bpf_map_delete_elem(&frags, k);
	else
		*c->removed += 1;
	return 0;
}

/* sweep_frags expires the fragment cache and sets its count to the
 * entries left. An entry a packet adds meanwhile may be counted twice or
 * not at all, until the next pass. */
static __always_inline void sweep_frags(__u64 now)
{
	struct sweep_ctx c = {};
	__u32 zero = 0, one = 1;
	__s64 *n = bpf_map_lookup_elem(&frag_count, &zero);
	__s64 *walk = bpf_map_lookup_elem(&frag_count, &one);

	if (!n || !walk)
		return;
	*walk = 0;
	c.now = now;
	c.removed = (__u64 *)walk;
	bpf_for_each_map_elem(&frags, sweep_frag, &c, 0);
	*n = *walk;
}

static __always_inline void sweep_pass(struct sweep_ctx *c, __u32 mode)
{
	c->mode = mode;
	bpf_for_each_map_elem(&states, sweep_state, c, 0);
}

static __always_inline int over_low(void)
{
	__u32 zero = 0;
	__s64 *cnt = bpf_map_lookup_elem(&state_count, &zero);
	__u64 size = cfg(CFG_STATESIZE);

	if (!cnt || !size)
		return 0;
	return *cnt > 0 && (__u64)*cnt * 100 / size > cfg(CFG_WMLOW);
}

/* watermark_flush is ipf_state_flush(2) through ipf_queueflush, as the Go
 * engine has it (state.Table.flushAggressive): TCP entries in CLOSED
 * first, then, while the table is over state_wm_low (of state_size),
 * TIME_WAIT, FIN_WAIT_2, and those idle for ever shorter intervals. */
static __always_inline void watermark_flush(struct sweep_ctx *c)
{
	__u64 ticks = c->now / TICK_NS, interval;

	c->st = TS_CLOSED;
	sweep_pass(c, SWEEP_QUEUE);
	c->st = TS_TIME_WAIT;
	if (over_low())
		sweep_pass(c, SWEEP_QUEUE);
	c->st = TS_FIN_WAIT_2;
	if (over_low())
		sweep_pass(c, SWEEP_QUEUE);
	if (!over_low())
		return;
	if (ticks > 2 * 43200)
		interval = 2 * 43200;
	else if (ticks > 2 * 1800)
		interval = 2 * 1800;
	else if (ticks > 2 * 30)
		interval = 2 * 30;
	else
		interval = 2 * 10;
	for (int i = 0; i < 17; i++) {
		if (interval < 2 || !over_low())
			break;
		c->idle = interval * TICK_NS;
		sweep_pass(c, SWEEP_IDLE);
		interval /= 2;
	}
}

/* sweep removes the expired entries, runs the watermark flush when the
 * table asked for one, and gives back the quotas of DCA connections that
 * expired. */
static __always_inline void sweep(struct sweeper *sw)
{
	struct sweep_ctx c = {};

	c.now = now_ns();
	c.removed = &sw->swept;
	sweep_pass(&c, SWEEP_EXPIRED);
	if (sw->doflush) {
		if (c.now - sw->wm_last > cfg(CFG_WMFREQ)) {
			c.removed = &sw->flushed;
			watermark_flush(&c);
		}
		sw->doflush = 0;
		sw->wm_last = c.now;
	}
	bpf_for_each_map_elem(&dca_conns, sweep_dca, &c, 0);
	bpf_for_each_map_elem(&dca, sweep_dca_zero, &c, 0);
	sweep_frags(c.now);
	sw->runs++;
}

static int sweep_timer(void *map, __u32 *key, struct sweeper *sw)
{
	sweep(sw);
	bpf_timer_start(&sw->timer, SWEEP_NS, 0);
	return 0;
}

static long ctl_kill(__u32 i, struct sweep_ctx *c)
{
	struct state_key *k = bpf_map_lookup_elem(&ctl_keys, &i);
	struct state_key kk;
	struct state_entry *e;

	if (!k)
		return 1;
	__builtin_memcpy(&kk, k, sizeof(kk));
	e = bpf_map_lookup_elem(&states, &kk);
	if (e && state_unlink(&kk, e))
		*c->removed += 1;
	return 0;
}

/* ctl_msg_of returns the call's own struct ctl_msg in the packet, if it
 * carries one (CTL_MAGIC). */
static __always_inline struct ctl_msg *ctl_msg_of(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ctl_msg *m = data + 14;

	if ((void *)(m + 1) > end || m->magic != CTL_MAGIC)
		return NULL;
	return m;
}

/* sluice_control carries out a control call: its operation and count from
 * the packet (struct ctl_msg), or from ctl_args for an older Sluice's
 * call. CTL_ARM starts the sweeper (again after a reload: the callback is
 * the new program's), CTL_KILL removes the n state entries whose keys are
 * in ctl_keys (the caller holds the pin directory's lock), CTL_SWEEP
 * sweeps once now (tests move the clock). What CTL_KILL removed goes back
 * where the arguments came from. Named apart from the older sluice_ctl,
 * which reads only ctl_args: user space tells the two by the name. */
SEC("tc")
int sluice_control(struct __sk_buff *skb)
{
	__u32 zero = 0, op, n;
	struct ctl_msg *m = ctl_msg_of(skb);
	struct ctl_args *a = NULL;
	struct sweeper *sw = bpf_map_lookup_elem(&sweeper, &zero);
	struct sweep_ctx c = {};
	__u64 removed = 0;
	int ret = 0;

	if (m) {
		op = m->op;
		n = m->n;
	} else {
		a = bpf_map_lookup_elem(&ctl_args, &zero);
		if (!a)
			return 0;
		op = a->op;
		n = a->n;
	}
	if (!sw)
		return 0;
	switch (op) {
	case CTL_ARM:
		bpf_timer_init(&sw->timer, &sweeper, 1 /* CLOCK_MONOTONIC */);
		if (bpf_timer_set_callback(&sw->timer, sweep_timer) != 0)
			ret = -1;
		else
			ret = bpf_timer_start(&sw->timer, SWEEP_NS, 0) == 0 ? 0 : -1;
		break;
	case CTL_KILL:
		c.removed = &removed;
		bpf_loop(n < CTL_KEYS ? n : CTL_KEYS, ctl_kill, &c, 0);
		if (a)
			a->removed = removed;
		break;
	case CTL_SWEEP:
		sweep(sw);
		break;
	}
	/* the packet again: helpers were called since */
	m = ctl_msg_of(skb);
	if (m) {
		m->removed = removed;
		m->magic = CTL_DONE;
	}
	return ret;
}

#endif
