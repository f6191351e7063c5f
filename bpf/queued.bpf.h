/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --culprits in the queue stage: whom each request waited behind in its
 * device's I/O scheduler (see struct iow_queued). block_rq_insert counts
 * the request in its device's table of series queued; block_rq_issue
 * charges the span since the device's last issue to every series queued,
 * as a wait behind the series whose requests held the device meanwhile
 * (those in flight, by processor sharing; with none in flight, the series
 * issued at the span's start, which the scheduler kept the device for),
 * and takes the issued request out; block_rq_merge takes out a request merged into
 * another. Only requests of a device with an I/O scheduler are counted
 * (the others wait for a tag at most, unsplit): no table work for them.
 * A part of iowarden.bpf.c, included there after culprits.bpf.h.
 */
#ifndef IOWARDEN_QUEUED_BPF_H
#define IOWARDEN_QUEUED_BPF_H

/* Sized to one entry by the loader without --culprits. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_MAX_DEVS);
	__type(key, __u32);
	__type(value, struct iow_queued);
} queued SEC(".maps");

/* Whether rq went through an I/O scheduler: it has a scheduler tag. */
static __always_inline bool in_scheduler(struct request *rq)
{
	return rq->internal_tag >= 0;
}

/* Takes the request counted in under `t` out of its device's queue table:
 * once, whoever clears it (its issue, its merge, its tag's next insert). */
static __always_inline void queued_leave(struct iow_flight_tag *t)
{
	__u32 slot = __sync_lock_test_and_set(&t->queued, 0), dev = t->queued_dev;
	struct iow_queued *q;

	if (!slot)
		return;
	q = bpf_map_lookup_elem(&queued, &dev);
	if (q)
		series_leave(q->who, slot - 1);
}

/* A request of series `slot` is inserted under `ident` (flight_ident()):
 * counted in on the device's queue table. Global, as the functions below:
 * the verifier checks each loop once, apart from the programs. */
__noinline int queued_insert(__u32 dev, __u32 slot, __u64 ident)
{
	struct iow_queued *q = bpf_map_lookup_elem(&queued, &dev);
	struct iow_flight_tag *t = flight_tag(ident);
	__u64 now, last;

	if (!q || !t || slot >= IOW_MAX_SLOTS)
		return 0;
	/* Its tag's previous request still counted: its issue went unseen. */
	queued_leave(t);
	now = bpf_ktime_get_ns();
	last = q->last_issue_ns;
	if (series_enter(q->who, q->debt, slot, now > last ? now - last : 0) < 0) {
		count_drop(IOW_DROP_CULPRIT_UNTOLD);
		return 0;
	}
	t->queued_dev = dev;
	__sync_lock_test_and_set(&t->queued, slot + 1);
	return 0;
}

/*
 * Splits `total`, the time entry i's queued requests waited over a span,
 * among the series in flight on the device at its end, each in proportion
 * to its requests in flight (its own: behind its own requests); with none
 * in flight, behind `ahead`, the series issued at the span's start, which
 * the scheduler kept the device for (BFQ idles for a queue's next request).
 * With none in flight and `ahead` its own, it waited behind no one: the
 * scheduler's own time, left in the queue stage unsplit. `at`: dev << 16 | i.
 */
__noinline int queued_share(__u32 at, __u32 ahead, __u64 total)
{
	__u32 dev = at >> 16, i = at & 0xff, victim;
	struct iow_queued *q = bpf_map_lookup_elem(&queued, &dev);
	struct iow_flight *f = bpf_map_lookup_elem(&flight, &dev);
	__u64 all = 0;
	int charged = 0;

	if (!q || !f || i >= IOW_FLIGHT_SERIES)
		return 0;
	victim = (__u32)(q->who[i] >> 32) - 1;
	if (victim >= IOW_MAX_SLOTS)
		return 0;
#pragma unroll
	for (__u32 c = 0; c < IOW_FLIGHT_SERIES; c++)
		all += IOW_WHO_COUNT(f->who[c]);
	if (!all)
		return ahead < IOW_MAX_SLOTS && ahead != victim
			       ? charge_culprit(victim, ahead, IOW_STAGE_QUEUE, total)
			       : 0;
#pragma unroll
	for (__u32 c = 0; c < IOW_FLIGHT_SERIES; c++) {
		__u64 wc = f->who[c], n = IOW_WHO_COUNT(wc);
		__u32 culprit = (__u32)(wc >> 32) - 1;

		if (n && culprit < IOW_MAX_SLOTS)
			charged += charge_culprit(victim, culprit, IOW_STAGE_QUEUE, total * n / all);
	}
	return charged;
}

/* A request of series `slot` is issued under `ident`: the span since the
 * device's last issue is charged to every series queued (its requests
 * times the span, less their debts), split by queued_share(); then the
 * request leaves. Runs before the request is counted in flight. */
__noinline int queued_issue(__u32 dev, __u32 slot, __u64 ident)
{
	struct iow_queued *q = bpf_map_lookup_elem(&queued, &dev);
	struct iow_flight_tag *t = flight_tag(ident);
	__u64 now = bpf_ktime_get_ns(), from, ahead;
	int charged = 0;

	if (!q || slot >= IOW_MAX_SLOTS)
		return 0;
	from = __sync_lock_test_and_set(&q->last_issue_ns, now);
	ahead = __sync_lock_test_and_set(&q->last_slot, slot + 1);
	if (!from || from > now || !ahead || ahead > IOW_MAX_SLOTS)
		from = now; /* the first issue, or a later one already in */
#pragma unroll
	for (__u32 i = 0; i < IOW_FLIGHT_SERIES; i++) {
		__u64 n = IOW_WHO_COUNT(q->who[i]), debt, total;

		if (!n)
			continue;
		debt = __sync_lock_test_and_set(&q->debt[i], 0);
		total = n * (now - from);
		if (total > debt)
			charged += queued_share(dev << 16 | i, ahead - 1, total - debt);
	}
	if (t && t->queued_dev == dev)
		queued_leave(t);
	return charged;
}

/* A request merged into another under `ident`: it leaves the queue. */
static __always_inline void queued_merge(__u64 ident)
{
	struct iow_flight_tag *t = flight_tag(ident);

	if (t)
		queued_leave(t);
}

#endif /* IOWARDEN_QUEUED_BPF_H */
