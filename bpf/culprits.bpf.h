/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --culprits: whom each request waited behind on its device (see struct
 * iow_flight). block_rq_issue counts the request in its device's table of
 * series in flight; block_rq_complete charges the span since the device's
 * last completion to every series in flight and takes the request out;
 * flight_sweep takes out those whose completion the kernel did not deliver.
 * Needs compare-and-swap and exchange (5.12+): only the programs that
 * claim by compare-and-swap call it.
 * A part of iowarden.bpf.c, included there after the switches, tables
 * and add(): not a helper of other objects.
 */
#ifndef IOWARDEN_CULPRITS_BPF_H
#define IOWARDEN_CULPRITS_BPF_H

/* Sized to one entry by the loader without --culprits. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_MAX_DEVS);
	__type(key, __u32);
	__type(value, struct iow_flight);
} flight SEC(".maps");

/* Entries are allocated on first charge: memory follows the pairs in use. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, IOW_CULPRIT_PAIRS);
	__type(key, struct iow_culprit_key);
	__type(value, __u64);
} culprit_ns SEC(".maps");

/* Sized to one entry by the loader without --culprits. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_STAMP_SLOTS);
	__type(key, __u32);
	__type(value, struct iow_flight_tag);
} flight_tags SEC(".maps");

/* Requests found still counted in flight when their identity was issued
 * again: their completion went undelivered (the kernel now and then runs
 * no program for a softirq run's completions), and others of that run
 * may still be counted. The sweeper polls it to sweep at once. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} flight_stale SEC(".maps");

/* A request's identity from issue to completion, requeues included: its
 * scheduler tag where it has one (the driver tag is given back on requeue,
 * before the requeue event, and taken anew), else its driver tag (then its
 * own for life). */
static __always_inline __u64 flight_ident(struct request *rq, __u32 dev)
{
	int sched_tag = rq->internal_tag;

	return ident_of(rq, dev, sched_tag >= 0 ? (1U << 31) | (__u32)sched_tag : (__u32)rq->tag);
}

static __always_inline struct iow_flight_tag *flight_tag(__u64 ident)
{
	__u32 idx = ident_index(ident);

	return bpf_map_lookup_elem(&flight_tags, &idx);
}

/* The loops over a device's table are unrolled: before 6.4 the verifier
 * rejects a loop the compiler enters in its middle (a fall-through into an
 * instruction it is still exploring), which it did here. */
#define IOW_WHO_COUNT(w) ((w) & 0xffffffffULL)
#define IOW_WHO_TAG(slot) ((__u64)(slot) + 1)

/* Adds ns to (victim, culprit) in `stage` (enum iow_stage): 1 when added.
 * Global: the verifier checks it once. */
__noinline int charge_culprit(__u32 victim, __u32 culprit, __u32 stage, __u64 ns)
{
	struct iow_culprit_key k = {.victim = victim, .culprit = culprit, .stage = stage};
	__u64 *v;

	if (!ns)
		return 0;
	v = bpf_map_lookup_elem(&culprit_ns, &k);
	if (!v) {
		if (bpf_map_update_elem(&culprit_ns, &k, &ns, BPF_NOEXIST) == 0)
			return 1;
		/* Another CPU created it meanwhile, or the table is full. */
		v = bpf_map_lookup_elem(&culprit_ns, &k);
		if (!v) {
			count_drop(IOW_DROP_CULPRIT_PAIRS_FULL);
			return 0;
		}
	}
	__sync_fetch_and_add(v, ns);
	return 1;
}

/*
 * Counts a request of series `slot` in on a device's table of series
 * (struct iow_flight's or iow_queued's who and debt): its entry (looked
 * for from the slot's hash), or the first free or idle one, taken over. A
 * series may hold two entries: what they are charged adds up the same.
 * `debt`: the time since the table's last charge. The entry's index; -1
 * when every entry is busy with other series.
 */
static __always_inline int series_enter(__u64 *who, __u64 *debt, __u32 slot, __u64 d)
{
	__u32 start = hash64(slot) >> 60;

#pragma unroll
	for (int j = 0; j < IOW_FLIGHT_SERIES; j++) {
		__u32 i = (start + j) & (IOW_FLIGHT_SERIES - 1);
		__u64 w = who[i], want;
		bool ours = (w >> 32) == IOW_WHO_TAG(slot);

		if (!ours && IOW_WHO_COUNT(w))
			continue;
		/* An idle entry changes hands with its count at 0: one swap
		 * of the whole word, so no count lands on a stale series. */
		want = ours ? w + 1 : (IOW_WHO_TAG(slot) << 32) | 1;
		if (__sync_val_compare_and_swap(&who[i], w, want) != w)
			continue;
		if (ours)
			__sync_fetch_and_add(&debt[i], d);
		else
			debt[i] = d;
		return i;
	}
	return -1;
}

/* Takes a request of series `slot` out of a device's table of series. */
static __always_inline void series_leave(__u64 *who, __u32 slot)
{
#pragma unroll
	for (int i = 0; i < IOW_FLIGHT_SERIES; i++) {
		__u64 w = who[i];

		if ((w >> 32) == IOW_WHO_TAG(slot) && IOW_WHO_COUNT(w)) {
			__sync_fetch_and_add(&who[i], -1);
			return;
		}
	}
}

/* Takes a request of series `slot` out of the device's table. */
__noinline int flight_leave(__u32 dev, __u32 slot)
{
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);

	if (f)
		series_leave(f->who, slot);
	return 0;
}

/* Takes out the request counted in under `t` (once, whoever clears it:
 * an issue, a completion, the sweep), and tells the sweeper. */
static __always_inline void flight_heal(struct iow_flight_tag *t)
{
	__u32 zero = 0, stale = __sync_lock_test_and_set(&t->slot, 0);
	__u64 *n;

	if (!stale)
		return;
	flight_leave(t->ident >> 48, stale - 1);
	n = bpf_map_lookup_elem(&flight_stale, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* mq_rq_state's MQ_RQ_IN_FLIGHT (include/linux/blk-mq.h; 1 since 4.16). */
#define IOW_MQ_RQ_IN_FLIGHT 1

/*
 * Whether the request counted in under `t` is done, its completion unseen.
 * block_rq_issue fires before the kernel marks the request in flight, so
 * its state alone cannot tell a request being issued (on another CPU) from
 * one done: a request with data is done when it is not in flight and its
 * first bio is no longer the one it was issued with (the completion clears
 * it; a requeued or completing request keeps it). One without data is done
 * when `looked` (the sweep's) found it not in flight before too.
 */
static __always_inline bool flight_gone(struct iow_flight_tag *t, bool looked)
{
	int state = IOW_MQ_RQ_IN_FLIGHT;
	__u64 rq = t->rq, bio = t->bio;

	if (!rq)
		return false;
	bpf_probe_read_kernel(&state, sizeof(state),
			      (void *)(rq + bpf_core_field_offset(struct request, state)));
	if (state == IOW_MQ_RQ_IN_FLIGHT)
		return false;
	if (!bio)
		return looked && __sync_lock_test_and_set(&t->looked, 1);
	bpf_probe_read_kernel(&bio, sizeof(bio),
			      (void *)(rq + bpf_core_field_offset(struct request, bio)));
	return bio != t->bio;
}

/* A request of series `slot` is issued, under `ident` (flight_ident()):
 * counted in on the device's table. Its entry's index; -1 when not counted.
 * Global, as the functions below: the verifier checks each loop once,
 * apart from the programs. */
__noinline int flight_count_in(__u32 dev, __u32 slot, __u64 ident)
{
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);
	struct iow_flight_tag *t = flight_tag(ident);
	__u64 now, done;
	int i;

	if (!f || !t || slot >= IOW_MAX_SLOTS)
		return -1;
	/* Its tag's previous request still counted: its completion went
	 * unseen. */
	flight_heal(t);
	now = bpf_ktime_get_ns();
	done = f->last_done_ns;
	i = series_enter(f->who, f->debt, slot, now > done ? now - done : 0);
	if (i < 0)
		count_drop(IOW_DROP_CULPRIT_UNTOLD);
	return i;
}

/* Entry i's series `slot` has its request `ident` counted in: the
 * series' previous request, still counted but done, is taken out now, not
 * when its tag comes back (under a scheduler, after every other tag of its
 * depth) or the sweep runs. */
__noinline int flight_take_prev(__u32 dev, __u32 i, __u32 slot, __u64 ident)
{
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);
	struct iow_flight_tag *p;
	__u64 prev;

	if (!f || i >= IOW_FLIGHT_SERIES)
		return 0;
	prev = __sync_lock_test_and_set(&f->last[i], ident);
	if (!prev || prev == ident)
		return 0;
	p = flight_tag(prev);
	if (p && p->ident == prev && p->slot == slot + 1 && flight_gone(p, false))
		flight_heal(p);
	return 0;
}

/* A request of series `slot` is issued under `ident`: counted in,
 * with what flight_gone() reads written before the slot that lets it
 * look (inline: a global function takes no pointer to the request). */
static __always_inline void flight_issue(__u32 dev, __u32 slot, __u64 ident, struct request *rq)
{
	struct iow_flight_tag *t = flight_tag(ident);
	int i = flight_count_in(dev, slot, ident);

	if (!t || i < 0)
		return;
	t->rq = (__u64)rq;
	t->bio = (__u64)rq->bio;
	t->looked = 0;
	t->ident = ident;
	__sync_lock_test_and_set(&t->slot, slot + 1);
	flight_take_prev(dev, i, slot, ident);
}

/* Whether the request under `ident` was counted in (and no longer is). */
static __always_inline bool flight_counted(__u64 ident)
{
	struct iow_flight_tag *t = flight_tag(ident);

	return t && t->ident == ident && __sync_lock_test_and_set(&t->slot, 0);
}

/*
 * Splits `total`, the request time entry i's requests spent on the device
 * over a span, by processor sharing: with `all` requests in flight, each
 * gets a 1/all share of the device; the rest of its time it waits behind
 * the others, each series in proportion to its requests in flight (its own
 * other requests: its own queue). `at`: dev << 16 | i.
 */
__noinline int flight_share(__u32 at, __u64 total, __u64 all)
{
	__u32 dev = at >> 16, i = at & 0xff, victim;
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);
	int charged = 0;
	__u64 w;

	if (!f || i >= IOW_FLIGHT_SERIES || !all)
		return 0;
	w = f->who[i];
	victim = (__u32)(w >> 32) - 1;
	if (!IOW_WHO_COUNT(w) || victim >= IOW_MAX_SLOTS)
		return 0;
	charge_culprit(victim, IOW_CULPRIT_NONE, IOW_STAGE_DEVICE, total / all);
#pragma unroll
	for (__u32 c = 0; c < IOW_FLIGHT_SERIES; c++) {
		__u64 wc = f->who[c], n = IOW_WHO_COUNT(wc);
		__u32 culprit = (__u32)(wc >> 32) - 1;

		if (c == i)
			n = n ? n - 1 : 0;
		if (n && culprit < IOW_MAX_SLOTS)
			charged += charge_culprit(victim, culprit, IOW_STAGE_DEVICE, total * n / all);
	}
	return charged;
}

/*
 * A request of series `slot`, under `ident`, completes now: the span since
 * the device's last completion is charged to every series in flight (its
 * requests times the span, less their debts), split by flight_share(); the
 * request leaves the table if it was counted in.
 */
__noinline int flight_complete(__u32 dev, __u32 slot, __u64 ident, __u64 now)
{
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);
	bool counted = flight_counted(ident);
	__u64 from, span, all = 0;
	int own = -1, charged = 0;

	if (!f)
		return 0;
	from = __sync_lock_test_and_set(&f->last_done_ns, now);
	if (!from || from > now)
		from = now; /* the first completion, or a later one already in */
	span = now - from;
#pragma unroll
	for (__u32 i = 0; i < IOW_FLIGHT_SERIES; i++)
		all += IOW_WHO_COUNT(f->who[i]);
#pragma unroll
	for (__u32 i = 0; i < IOW_FLIGHT_SERIES; i++) {
		__u64 w = f->who[i], n = IOW_WHO_COUNT(w), debt, total;

		if (!n)
			continue;
		if (own < 0 && (w >> 32) == IOW_WHO_TAG(slot))
			own = i;
		debt = __sync_lock_test_and_set(&f->debt[i], 0);
		total = n * span;
		total = total > debt ? total - debt : 0;
		charged += flight_share(dev << 16 | i, total, all);
	}
	if (counted && own >= 0 && own < IOW_FLIGHT_SERIES)
		__sync_fetch_and_add(&f->who[own], -1);
	return charged;
}

/* Takes out the request counted in under entry i if it is no longer in
 * flight (its completion went unseen). */
static long flight_sweep_one(__u64 i, void *unused)
{
	__u32 idx = i, stale;
	struct iow_flight_tag *t = bpf_map_lookup_elem(&flight_tags, &idx);

	if (!t || !t->slot || !flight_gone(t, true))
		return 0;
	stale = __sync_lock_test_and_set(&t->slot, 0);
	if (stale)
		flight_leave(t->ident >> 48, stale - 1);
	return 0;
}

/* Not attached: the loader runs it each poll with --culprits (BPF_PROG_RUN;
 * where the kernel has bpf_loop, 5.17+). */
SEC("syscall")
int flight_sweep(void *unused)
{
	bpf_loop(IOW_STAMP_SLOTS, flight_sweep_one, NULL, 0);
	return 0;
}

#endif /* IOWARDEN_CULPRITS_BPF_H */
