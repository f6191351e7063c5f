// SPDX-License-Identifier: GPL-2.0
/*
 * iowarden: per-cgroup block I/O accounting on the block_rq_* tracepoints.
 *
 * Every request is attributed to the cgroup of its bio (never the current
 * task: completions run in whatever context the interrupt hit, writeback in
 * kworkers). The hot path uses only the timestamps the request already
 * carries, array lookups (inlined by the verifier) and per-CPU counters: no
 * hash map keyed by request, no shared atomics per I/O.
 *
 * Per-CPU counters are updated with plain read-modify-writes. Tracing
 * programs may nest on one CPU across contexts (a hard-IRQ completion
 * interrupting a softirq one), and a nested update of the same counter would
 * be overwritten when the interrupted one resumes. So every program first
 * computes its whole update, then applies it under a per-CPU busy flag; an
 * update that finds the flag set goes to a ring buffer instead, which user
 * space adds to its totals.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iowarden.h"
#include "rq.bpf.h"
#include "table.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Load-time switches (set by the loader before load). */
const volatile bool enable_latency = true;
const volatile bool enable_hwq = true;
/* Charge every read/write the linear iocost model's cost (a few ns). */
const volatile bool enable_cost = true;
/* Trace only this dev_t (major << 20 | minor); 0 = every device. */
const volatile __u32 filter_devt = 0;
/* Number of series slots in use minus one (a power of two minus one). */
const volatile __u32 slot_mask = 511;
/* Bit number of QUEUE_FLAG_STATS in request_queue->queue_flags (an anonymous
 * enum, so the loader reads it from kernel BTF); >= 64 = unknown, always stamp. */
const volatile __u32 queue_flag_stats_bit = 64;

struct iow_tables tables;

/* Never read: referencing the layout enums puts them in the object's BTF, so
 * the Rust side gets their values from the skeleton instead of a copy. */
const volatile struct iow_enums iow_enums_btf;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 512); /* resized by the loader to slot_mask + 1 */
	__type(key, __u32);
	__type(value, struct iow_io_stats);
} io_stats SEC(".maps");

/* Cost model coefficients, written by the loader (see struct iow_cost_coefs). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_MAX_DEVS + 1);
	__type(key, __u32);
	__type(value, struct iow_cost_coefs);
} cost_coefs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOW_COST_CLASSES);
	__type(key, __u32);
	__type(value, struct iow_cost_class);
} cost_classes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOW_MAX_DEVS * IOW_MAX_HWQ);
	__type(key, __u32);
	__type(value, struct iow_hwq_stats);
} hwq_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iow_drops);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iow_cpu_state);
} cpu_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} nested_updates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_STAMP_SLOTS);
	__type(key, __u32);
	__type(value, struct iow_stamp);
} issue_stamps SEC(".maps");

static __always_inline void count_drop(__u32 what)
{
	__u32 zero = 0;
	struct iow_drops *d = bpf_map_lookup_elem(&drops, &zero);

	/* Atomic: drops are counted from nested programs too (rare path). */
	if (d && what < IOW_NR_DROPS)
		__sync_fetch_and_add(&d->n[what], 1);
}

/*
 * Index of the device in tables.dev_devt, claiming a free entry the first
 * time a device is seen. Returns IOW_MAX_DEVS when the table is full.
 */
static __always_inline __u32 dev_index(__u32 devt)
{
	__u32 start = hash64(devt) >> (64 - IOW_DEV_BITS);

	for (int i = 0; i < IOW_SLOT_PROBES; i++) {
		__u32 idx = (start + i) & (IOW_MAX_DEVS - 1);
		__u32 cur = tables.dev_devt[idx];

		if (cur == devt)
			return idx;
		if (cur == 0) {
			cur = __sync_val_compare_and_swap(&tables.dev_devt[idx], 0, devt);
			if (cur == 0 || cur == devt)
				return idx;
		}
	}
	return IOW_MAX_DEVS;
}

static __always_inline __u32 rq_op(struct request *rq)
{
	switch (rq->cmd_flags & 0xff) { /* REQ_OP_MASK */
	case REQ_OP_READ:
		return IOW_OP_READ;
	case REQ_OP_FLUSH:
		return IOW_OP_FLUSH;
	case REQ_OP_DISCARD:
	case REQ_OP_SECURE_ERASE:
	case REQ_OP_WRITE_ZEROES:
		return IOW_OP_DISCARD;
	case REQ_OP_WRITE:
		return IOW_OP_WRITE;
	default:
		/* zone management and driver-private ops: by data direction */
		return (rq->cmd_flags & 1) ? IOW_OP_WRITE : IOW_OP_READ;
	}
}

/*
 * Slot of the request's (cgroup, device, op) series in the series table,
 * claiming one on first sight; IOW_NO_SLOT (and a counted drop) when the
 * table has no room. *key receives the series key.
 */
static __always_inline __u32 series_slot(struct request *rq, __u32 dev_idx, __u64 *key)
{
	__u64 k = (rq_cgroup_id(rq) << IOW_KEY_CGID_SHIFT) |
		  ((__u64)dev_idx << IOW_KEY_DEV_SHIFT) |
		  ((__u64)rq_op(rq) << IOW_KEY_OP_SHIFT) | 1;
	__u32 slot;

	*key = k;
	slot = claim_slot(tables.slot_key, IOW_MAX_SLOTS, slot_mask, IOW_SLOT_PROBES, k);
	if (slot < IOW_MAX_SLOTS)
		return slot;
	count_drop(IOW_DROP_SLOT_FULL);
	return IOW_NO_SLOT;
}

/* Log-linear bucket of a latency; see enum iow_const for the layout. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u64 us = ns / 1000;
	__u32 p, idx;

	if (us < (1 << IOW_HIST_SUB_BITS))
		return us;
	p = log2_u64(us);
	idx = ((p - IOW_HIST_SUB_BITS + 1) << IOW_HIST_SUB_BITS) +
	      ((us >> (p - IOW_HIST_SUB_BITS)) & ((1 << IOW_HIST_SUB_BITS) - 1));
	return idx < IOW_HIST_BUCKETS ? idx : IOW_HIST_BUCKETS - 1;
}

static __always_inline void record(struct iow_update *u, __u32 stage, __u64 ns)
{
	if (stage >= IOW_NR_STAGES)
		return;
	u->lat_ns[stage] = ns;
	u->bucket[stage] = hist_bucket(ns);
}

static __always_inline void update_init(struct iow_update *u)
{
	__builtin_memset(u, 0, sizeof(*u));
	u->slot = IOW_NO_SLOT;
	u->hwq = IOW_NO_SLOT;
	u->cost_class = IOW_NO_SLOT;
	for (int i = 0; i < IOW_NR_STAGES; i++)
		u->bucket[i] = IOW_NO_BUCKET;
}

static __always_inline void apply_series(struct iow_update *u)
{
	__u32 slot = u->slot;
	struct iow_io_stats *s = bpf_map_lookup_elem(&io_stats, &slot);

	if (!s)
		return;
	s->ios += u->ios;
	s->bytes += u->bytes;
	s->merged += u->merged;
	s->requeued += u->requeued;
	s->cost += u->cost;
	s->rand_ios += u->rand_ios;
	for (int i = 0; i < IOW_NR_STAGES; i++) {
		__u32 b = u->bucket[i];

		if (b < IOW_HIST_BUCKETS) {
			s->lat_sum_ns[i] += u->lat_ns[i];
			s->hist[i * IOW_HIST_BUCKETS + b]++;
		}
	}
}

static __always_inline void apply_hwq(struct iow_update *u)
{
	__u32 idx = u->hwq;
	struct iow_hwq_stats *h = bpf_map_lookup_elem(&hwq_stats, &idx);

	if (!h)
		return;
	h->inserted += u->hwq_inserted;
	h->issued += u->hwq_issued;
	h->completed += u->hwq_completed;
	h->requeued += u->hwq_requeued;
	h->busy_ns += u->busy_ns;
}

static __always_inline void apply_cost_class(struct iow_update *u)
{
	__u32 idx = u->cost_class;
	struct iow_cost_class *c = bpf_map_lookup_elem(&cost_classes, &idx);

	if (!c)
		return;
	c->ios += 1;
	c->bytes += u->bytes;
	c->device_ns += u->lat_ns[IOW_STAGE_DEVICE];
	c->cost += u->cost;
}

/* Applies an update to this CPU's counters, or hands it to user space when
 * it interrupted another program's update (see the top of this file). */
static __always_inline void commit(struct iow_update *u)
{
	__u32 zero = 0;
	struct iow_cpu_state *c = bpf_map_lookup_elem(&cpu_state, &zero);

	if (!c)
		return;
	if (c->busy) {
		count_drop(IOW_DROP_NESTED);
		if (bpf_ringbuf_output(&nested_updates, u, sizeof(*u), 0))
			count_drop(IOW_DROP_NESTED_LOST);
		return;
	}
	/* Interrupted between this load and store, the nested program saw
	 * busy == 0, applied its update fully and cleared busy again before we
	 * resume: nothing of ours was in flight yet. */
	c->busy = 1;
	barrier();
	if (u->slot != IOW_NO_SLOT)
		apply_series(u);
	if (u->hwq != IOW_NO_SLOT)
		apply_hwq(u);
	/* Classes take only requests whose device time is known, so that the
	 * model's error compares like with like. */
	if (u->cost_class != IOW_NO_SLOT && u->bucket[IOW_STAGE_DEVICE] != IOW_NO_BUCKET)
		apply_cost_class(u);
	barrier();
	c->busy = 0;
}

/* Index of the request's hardware queue in hwq_stats. */
static __always_inline __u32 hwq_index(struct request *rq, __u32 dev_idx)
{
	__u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;

	if (q >= IOW_MAX_HWQ)
		q = IOW_MAX_HWQ - 1;
	return dev_idx * IOW_MAX_HWQ + q;
}

/* A request in flight is identified by (device, hardware queue, driver tag). */
static __always_inline __u64 rq_ident(struct request *rq, __u32 dev_idx)
{
	__u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;

	return ((__u64)dev_idx << 48) | ((__u64)(q & 0xffff) << 32) | (__u32)rq->tag;
}

static __always_inline struct iow_stamp *stamp_slot(__u64 ident)
{
	__u32 idx = (hash64(ident) >> 32) & (IOW_STAMP_SLOTS - 1);

	return bpf_map_lookup_elem(&issue_stamps, &idx);
}

/* The device index of a traced request, or IOW_MAX_DEVS to skip it. */
static __always_inline __u32 traced_dev(struct request *rq)
{
	__u32 devt = rq_devt(rq);
	__u32 idx;

	if (!devt || (filter_devt && devt != filter_devt))
		return IOW_MAX_DEVS;
	idx = dev_index(devt);
	if (idx >= IOW_MAX_DEVS)
		count_drop(IOW_DROP_DEV_FULL);
	return idx;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	__u32 dev = traced_dev(rq);
	struct iow_update u;

	if (dev >= IOW_MAX_DEVS || !enable_hwq)
		return 0;
	update_init(&u);
	u.hwq = hwq_index(rq, dev);
	u.hwq_inserted = 1;
	commit(&u);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u32 dev = traced_dev(rq);
	struct iow_update u;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	if (enable_hwq) {
		update_init(&u);
		u.hwq = hwq_index(rq, dev);
		u.hwq_issued = 1;
		commit(&u);
	}
	/* blk_mq_start_request() stamps io_start_time_ns right after this
	 * tracepoint when the queue collects stats (iocost, wbt, ...). Only
	 * when it will not do we keep a stamp of our own. */
	if (queue_flag_stats_bit >= 64 ||
	    !(rq->q->queue_flags & (1ULL << (queue_flag_stats_bit & 63)))) {
		__u64 ident = rq_ident(rq, dev);
		struct iow_stamp *st = stamp_slot(ident);

		if (st) {
			st->ident = ident;
			st->issue_ns = bpf_ktime_get_ns();
		}
	}
	return 0;
}

/* When was this request issued to the driver? 0 if unknown. */
static __always_inline __u64 issue_time(struct request *rq, __u32 dev_idx)
{
	__u64 kts = rq->io_start_time_ns;
	__u32 stats_flag = 0;

	/* Keep the kernel stamp's load apart from the map value's below:
	 * the verifier refuses one instruction reading two kinds of pointer. */
	barrier_var(kts);
	if (bpf_core_enum_value_exists(enum rqf_flags, __RQF_STATS))
		stats_flag = 1U << bpf_core_enum_value(enum rqf_flags, __RQF_STATS);
	if ((rq->rq_flags & stats_flag) && kts)
		return kts;

	__u64 ident = rq_ident(rq, dev_idx);
	struct iow_stamp *st = stamp_slot(ident);

	if (st && st->ident == ident) {
		__u64 t = st->issue_ns;

		barrier_var(t);
		return t;
	}
	return 0;
}

/*
 * The linear iocost model's cost of a completed read or write, as
 * blk-iocost.c calc_vtime_cost_builtin charges a bio: a base cost by
 * read/write and pattern plus a cost per 4 KiB page (at least one). The
 * request is random when it starts more than IOW_COST_RANDIO_PAGES pages
 * from where the series' previous one ended, sequential otherwise (and when
 * there is no previous one). The kernel charges bios at submission; this
 * charges whole requests at completion (a merged bio pays no base cost in
 * the kernel either); one completed in parts is charged on its last part.
 */
static __always_inline void charge_cost(struct request *rq, struct iow_update *u,
					__u32 dev, __u32 nr_bytes)
{
	__u32 op = (u->key >> IOW_KEY_OP_SHIFT) & 3;
	__u32 slot = u->slot, idx = dev;
	struct iow_cost_coefs *c;
	struct iow_io_stats *s;
	__u64 sector, prev, seek = 0, pages;
	__u32 rand, size;

	if (op > IOW_OP_WRITE || slot == IOW_NO_SLOT || !nr_bytes)
		return;
	c = bpf_map_lookup_elem(&cost_coefs, &idx);
	if (!c || !c->valid) {
		idx = IOW_COST_DEFAULT;
		c = bpf_map_lookup_elem(&cost_coefs, &idx);
		if (!c || !c->valid)
			return;
	}
	/* The cursor lives in the series' per-CPU stats, on the cache line
	 * commit() updates next. A plain store: a nested program moving it
	 * in between only misjudges one request's pattern. */
	s = bpf_map_lookup_elem(&io_stats, &slot);
	if (!s)
		return;
	sector = rq->__sector;
	prev = s->cursor;
	if (prev)
		seek = (sector > prev ? sector - prev : prev - sector) >> 3;
	rand = seek > IOW_COST_RANDIO_PAGES;
	s->cursor = sector + (nr_bytes >> 9);
	pages = nr_bytes >> 12;
	if (!pages)
		pages = 1;
	u->cost = c->lcoef[op * 3 + 1 + rand] + pages * c->lcoef[op * 3];
	u->rand_ios = rand;
	size = log2_u64(nr_bytes);
	size = size > 12 ? size - 12 : 0;
	if (size >= IOW_COST_SIZES)
		size = IOW_COST_SIZES - 1;
	u->cost_class = ((dev * 2 + op) * 2 + rand) * IOW_COST_SIZES + size;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u32 dev = traced_dev(rq);
	struct iow_update u;
	__u64 now, issued, start;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	update_init(&u);
	u.slot = series_slot(rq, dev, &u.key);
	u.bytes = nr_bytes;
	/* A request may complete in parts; it is one I/O when the last part
	 * completes (the remaining length is what this completion covers). */
	if (nr_bytes < rq->__data_len)
		goto out;
	u.ios = 1;
	if (enable_cost)
		charge_cost(rq, &u, dev, nr_bytes);
	now = bpf_ktime_get_ns();
	issued = issue_time(rq, dev);
	start = rq->start_time_ns;
	if (enable_hwq) {
		u.hwq = hwq_index(rq, dev);
		u.hwq_completed = 1;
		if (issued && issued <= now)
			u.busy_ns = now - issued;
	}
	if (!enable_latency)
		goto out;
	if (issued && issued <= now)
		record(&u, IOW_STAGE_DEVICE, now - issued);
	else
		count_drop(IOW_DROP_NO_ISSUE_STAMP);
	if (start && start <= now) {
		record(&u, IOW_STAGE_TOTAL, now - start);
		if (issued >= start)
			record(&u, IOW_STAGE_QUEUE, issued - start);
	} else {
		count_drop(IOW_DROP_NO_START_STAMP);
	}
out:
	commit(&u);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(block_rq_requeue, struct request *rq)
{
	__u32 dev = traced_dev(rq);
	struct iow_update u;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	update_init(&u);
	u.slot = series_slot(rq, dev, &u.key);
	u.requeued = 1;
	if (enable_hwq) {
		u.hwq = hwq_index(rq, dev);
		u.hwq_requeued = 1;
	}
	commit(&u);
	return 0;
}

/* rq is merged into another request and freed without completing: its bytes
 * complete with the surviving request. */
SEC("tp_btf/block_rq_merge")
int BPF_PROG(block_rq_merge, struct request *rq)
{
	__u32 dev = traced_dev(rq);
	struct iow_update u;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	update_init(&u);
	u.slot = series_slot(rq, dev, &u.key);
	u.merged = 1;
	commit(&u);
	return 0;
}

/* Not attached: run on demand (BPF_PROG_RUN) by the tests. */
SEC("syscall")
int hist_bucket_selftest(struct iow_bucket_probe *p)
{
	/* Unrolled: the context may only be accessed at constant offsets. */
#pragma unroll
	for (int i = 0; i < IOW_SELFTEST_N; i++)
		p->bucket[i] = hist_bucket(p->ns[i]);
	return 0;
}
