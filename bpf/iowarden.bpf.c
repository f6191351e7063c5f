// SPDX-License-Identifier: GPL-2.0
/*
 * iowarden: per-cgroup block I/O accounting on the block_rq_* tracepoints.
 *
 * Every request is attributed to the cgroup of its bio (never the current
 * task: completions run in whatever context the interrupt hit, writeback in
 * kworkers). One program per request does the work, at completion: the
 * request already carries its allocation and issue times (start_time_ns,
 * and io_start_time_ns wherever the queue collects stats, which wbt and
 * iocost turn on), so counts, bytes, the three latency stages, the cost
 * charge and the hardware queue's occupancy (Little's law: the sum of
 * issue -> completion times over a window is the mean number in flight
 * times the window) are all known there, and so is the wait before the
 * request existed: the first bio's submission stamp (bi_issue, or
 * issue_time_ns from 6.18) is taken after blk-throttle (io.max) held it and
 * before iocost, io.latency and wbt make its submitter wait. blk-throttle's
 * hold is timed by a fexit program on its entry point, where the kernel
 * allows fexit (no tracepoint is there). The same stamps let user space
 * tell whom each request waited behind: the program logs the request's
 * series and times in its CPU's ring (block/culprits.h). block_rq_issue is
 * attached only where a queue does not stamp requests itself, or for
 * --hwq-events (with block_rq_insert).
 *
 * Counters live in arrays split in a few shards by CPU: memory is series x
 * shards, never series x CPUs. Where CPUs share a shard the adds are
 * atomic (see add()). User space reads them through mmap and keeps deltas.
 *
 * Every program comes twice (IOW_PROGRAM): as is, and as <name>_nocas for
 * kernels whose BPF has no compare-and-swap (before 5.12), which claim
 * table entries through the `claims` hash map instead (table.bpf.h). The
 * loader probes the kernel and loads one set.
 *
 * The *.bpf.h included first are BPF helpers other objects share; this
 * object's own parts are in block/, included mid-file where what they use
 * (switches, tables, add()) is defined.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iowarden.h"
#include "rq.bpf.h"
#include "table.bpf.h"
#include "task_cgroup.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Load-time switches (set by the loader before load). */
const volatile bool enable_latency = true;
/* Count the queue and device stages' histograms (their sums always): off
 * when only the total stage is exported, two buckets fewer per request. */
const volatile bool enable_stage_hists = true;
const volatile bool enable_hwq = true;
/* Count inserted/issued per hardware queue (needs block_rq_insert/issue). */
const volatile bool enable_hwq_events = false;
/* Count what the linear iocost model charges every read/write (pages,
 * pattern: block/cost.h); user space prices it. */
const volatile bool enable_cost = true;
/* Log each timed request for the culprit account (block/culprits.h). */
const volatile bool enable_culprits = true;
/* Trace only this dev_t (major << 20 | minor); 0 = every device. */
const volatile __u32 filter_devt = 0;
/* Number of series slots in use minus one (a power of two minus one). */
const volatile __u32 slot_mask = 511;
/* Number of counter shards minus one (a power of two minus one). */
const volatile __u32 shard_mask = 0;
/* Every possible CPU has a shard of its own (see add()). */
const volatile bool exclusive_shards = false;
/* Bit number of QUEUE_FLAG_STATS in request_queue->queue_flags (an anonymous
 * enum, so the loader reads it from kernel BTF); >= 64 = unknown, always stamp. */
const volatile __u32 queue_flag_stats_bit = 64;
/* Off: act as if no queue stamped io_start_time_ns (tests of the fallback). */
const volatile bool use_kernel_issue_stamps = true;
/* block_rq_insert, _issue, _merge and _requeue pass the request_queue before
 * the request (before 5.11, unless backported); the loader reads it from
 * the tracepoints' BTF. */
const volatile bool rq_after_queue_arg = false;

struct iow_tables tables;

/* Never read: referencing the layout enums puts them in the object's BTF, so
 * the Rust side gets their values from the skeleton instead of a copy. */
const volatile struct iow_enums iow_enums_btf;

/* max_entries of the sharded arrays are set by the loader: capacity x shards. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct iow_series);
} series SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, IOW_MAX_DEVS * IOW_MAX_HWQ);
	__type(key, __u32);
	__type(value, struct iow_hwq_stats);
} hwq_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iow_drops);
} drops SEC(".maps");

/* Claims of table entries by the _nocas programs (table.bpf.h take_entry):
 * series slot s under id s, device entry d under IOW_MAX_SLOTS + d. Sized
 * by the loader (one entry where the kernel has compare-and-swap); entries
 * are allocated on claim, so memory follows the series in use. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, IOW_MAX_SLOTS + IOW_MAX_DEVS);
	__type(key, __u32);
	__type(value, __u64);
} claims SEC(".maps");

/*
 * Adds to a counter. Where every CPU has a shard of its own (no more CPUs
 * than shards), a plain add is exact: each counter is written by one
 * program only, and the kernel never runs a program nested inside itself
 * on one CPU (it counts a recursion miss instead). Otherwise CPUs share
 * shards and the add is atomic. The verifier drops the branch not taken.
 */
#define add(p, v)                                        \
	do {                                             \
		if (exclusive_shards)                    \
			*(p) += (v);                     \
		else                                     \
			__sync_fetch_and_add((p), (v));  \
	} while (0)

/* A count of one and a sum `v` in one packed word (IOW_PACK_COUNT_BITS). */
#define packed(v, counted) (((__u64)(v) << IOW_PACK_COUNT_BITS) | (counted))

static __always_inline void count_drop(__u32 what)
{
	__u32 zero = 0;
	struct iow_drops *d = bpf_map_lookup_elem(&drops, &zero);

	/* Atomic: several programs count drops. */
	if (d && what < IOW_NR_DROPS)
		__sync_fetch_and_add(&d->n[what], 1);
}

/* This CPU's counter shard. Taken once per program and passed down: before
 * 6.10 the CPU number is a helper call, not an inlined load. With one shard
 * (shard_mask 0, a load-time constant) the verifier drops the call. */
static __always_inline __u32 shard(void)
{
	return shard_mask ? bpf_get_smp_processor_id() & shard_mask : 0;
}

/*
 * Index of the device in tables.dev_devt, claiming a free entry the first
 * time a device is seen. Returns IOW_MAX_DEVS when the table is full.
 */
static __always_inline __u32 dev_index(__u32 devt, const bool cas)
{
	__u32 start = hash64(devt) >> (64 - IOW_DEV_BITS);

	for (int i = 0; i < IOW_DEV_PROBES; i++) {
		__u32 idx = (start + i) & (IOW_MAX_DEVS - 1);
		__u32 cur = tables.dev_devt[idx];

		if (cur == devt)
			return idx;
		if (cur == 0 && take_entry(&tables.dev_devt[idx], devt, &claims,
					   IOW_MAX_SLOTS + idx, cas))
			return idx;
	}
	return IOW_MAX_DEVS;
}

/* Global, for the verifier (see series_slot()); one per claim method. */
__noinline __u32 dev_index_cas(__u32 devt)
{
	return dev_index(devt, true);
}

__noinline __u32 dev_index_nocas(__u32 devt)
{
	return dev_index(devt, false);
}

/*
 * The kernel's op_stat_group(), as /sys/block/<dev>/stat, /proc/diskstats and
 * io.stat count: only REQ_OP_DISCARD is a discard; write-zeroes and secure
 * erase are writes (odd op: data direction out). Flushes apart. `opf` is a
 * request's cmd_flags or a bio's bi_opf.
 */
static __always_inline __u32 op_of(__u32 opf)
{
	switch (opf & 0xff) { /* REQ_OP_MASK */
	case REQ_OP_FLUSH:
		return IOW_OP_FLUSH;
	case REQ_OP_DISCARD:
		return IOW_OP_DISCARD;
	default:
		/* write-zeroes, secure erase, zone management: by data direction */
		return (opf & 1) ? IOW_OP_WRITE : IOW_OP_READ;
	}
}

static __always_inline __u32 rq_op(struct request *rq)
{
	return op_of(rq->cmd_flags);
}

/*
 * Slot of series key k, claimed on first sight; IOW_MAX_SLOTS when there is
 * no room. A global function: the verifier checks its probe loop once,
 * instead of the rest of each program once per state the loop can end in
 * (seconds of load time with inlining).
 */
__noinline __u32 series_slot_cas(__u64 k)
{
	return claim_slot(tables.slot_key, IOW_MAX_SLOTS, slot_mask, IOW_SLOT_PROBES, k, NULL, true);
}

__noinline __u32 series_slot_nocas(__u64 k)
{
	return claim_slot(tables.slot_key, IOW_MAX_SLOTS, slot_mask, IOW_SLOT_PROBES, k, &claims,
			  false);
}

static __always_inline __u64 series_key(__u64 cgid, __u32 dev_idx, __u32 op)
{
	return (cgid << IOW_KEY_CGID_SHIFT) | ((__u64)dev_idx << IOW_KEY_DEV_SHIFT) |
	       ((__u64)op << IOW_KEY_OP_SHIFT) | 1;
}

/*
 * This CPU's shard of the (cgroup, device, op) series, claiming a slot on
 * first sight; NULL (and a counted drop) when the table has no room. *key
 * and *slot receive the series key and slot.
 */
static __always_inline struct iow_series *series_at(__u64 cgid, __u32 dev_idx, __u32 op,
						    __u32 sh, __u64 *key, __u32 *slot,
						    const bool cas)
{
	__u64 k = series_key(cgid, dev_idx, op);
	__u32 idx;

	*key = k;
	*slot = cas ? series_slot_cas(k) : series_slot_nocas(k);
	if (*slot >= IOW_MAX_SLOTS) {
		count_drop(IOW_DROP_SLOT_FULL);
		return NULL;
	}
	idx = *slot * (shard_mask + 1) + sh;
	return bpf_map_lookup_elem(&series, &idx);
}

/* The request's series (its first bio's cgroup). */
static __always_inline struct iow_series *series_of(struct request *rq, __u32 dev_idx, __u32 sh,
						     __u64 *key, __u32 *slot, const bool cas)
{
	return series_at(rq_cgroup_id(rq), dev_idx, rq_op(rq), sh, key, slot, cas);
}

/* Microseconds in a nanosecond count. Below 2^32 ns (4.3 s) without a
 * division: (ns / 8) / 125 as a multiply by ceil(2^35 / 125) = 274877907,
 * exact for (ns / 8) < 2^35 / 7 (the rounding error 7 / 2^35 per unit
 * stays below one 125th). The division is tens of cycles on x86. */
static __always_inline __u64 ns_to_us(__u64 ns)
{
	if (ns < (1ULL << 32))
		return ((ns >> 3) * 274877907ULL) >> 35;
	return ns / 1000;
}

/* Log-linear bucket of a latency; see enum iow_const for the layout. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u64 us = ns_to_us(ns);
	__u32 p, idx;

	if (us < (1 << IOW_HIST_SUB_BITS))
		return us;
	p = log2_u64(us);
	idx = ((p - IOW_HIST_SUB_BITS + 1) << IOW_HIST_SUB_BITS) +
	      ((us >> (p - IOW_HIST_SUB_BITS)) & ((1 << IOW_HIST_SUB_BITS) - 1));
	return idx < IOW_HIST_BUCKETS ? idx : IOW_HIST_BUCKETS - 1;
}

static __always_inline void count_bucket(struct iow_series *s, __u32 stage, __u64 ns)
{
	__u32 b = hist_bucket(ns);

	if (stage < IOW_NR_STAGES && b < IOW_HIST_BUCKETS)
		add(&s->hist[stage * IOW_HIST_BUCKETS + b], 1);
}

/* This CPU's shard of the request's hardware queue. */
static __always_inline struct iow_hwq_stats *hwq_of(struct request *rq, __u32 dev_idx, __u32 sh)
{
	__u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;
	__u32 idx;

	if (q >= IOW_MAX_HWQ)
		q = IOW_MAX_HWQ - 1;
	idx = (dev_idx * IOW_MAX_HWQ + q) * (shard_mask + 1) + sh;
	return bpf_map_lookup_elem(&hwq_stats, &idx);
}

/* The request argument of block_rq_insert, _issue, _merge and _requeue.
 * Two loads in two branches: the verifier rejects a read of an argument
 * the tracepoint does not have, and prunes the branch not taken. */
static __always_inline struct request *rq_arg(__u64 *ctx)
{
	if (rq_after_queue_arg)
		return (struct request *)ctx[1];
	return (struct request *)ctx[0];
}

/* The device index of a traced disk, or IOW_MAX_DEVS to skip it. */
static __always_inline __u32 traced_devt(__u32 devt, const bool cas)
{
	__u32 idx;

	if (!devt || (filter_devt && devt != filter_devt))
		return IOW_MAX_DEVS;
	idx = cas ? dev_index_cas(devt) : dev_index_nocas(devt);
	if (idx >= IOW_MAX_DEVS)
		count_drop(IOW_DROP_DEV_FULL);
	return idx;
}

static __always_inline __u32 traced_dev(struct request *rq, const bool cas)
{
	return traced_devt(rq_devt(rq), cas);
}

/* The object's parts (block/). */
#include "block/stamps.h"
#include "block/cost.h"
#include "block/held.h"
#include "block/culprits.h"

/* Whether rq went through an I/O scheduler: it has a scheduler tag. */
static __always_inline bool in_scheduler(struct request *rq)
{
	return rq->internal_tag >= 0;
}

/* Attached with --hwq-events. */
static __always_inline int on_insert(__u64 *ctx, const bool cas)
{
	struct request *rq = rq_arg(ctx);
	__u32 dev = traced_dev(rq, cas);
	struct iow_hwq_stats *h;

	if (dev >= IOW_MAX_DEVS || !enable_hwq_events)
		return 0;
	h = hwq_of(rq, dev, shard());
	if (h)
		add(&h->inserted, 1);
	return 0;
}

/* Attached once a completed request lacked the kernel's issue stamp (see
 * issue_time()), or with --hwq-events. */
static __always_inline int on_issue(__u64 *ctx, const bool cas)
{
	struct request *rq = rq_arg(ctx);
	__u32 dev = traced_dev(rq, cas);

	if (dev >= IOW_MAX_DEVS)
		return 0;
	if (enable_hwq_events) {
		struct iow_hwq_stats *h = hwq_of(rq, dev, shard());

		if (h)
			add(&h->issued, 1);
	}
	if (needs_own_stamp_at_issue(rq)) {
		__u64 ident = rq_ident(rq, dev);
		struct iow_stamp *st = stamp_slot(ident);

		if (st) {
			st->ident = ident;
			st->issue_ns = bpf_ktime_get_ns();
		}
	}
	return 0;
}

/* A completion on its hardware queue's shard: busy time when timed. */
static __always_inline void count_hwq_completion(struct iow_hwq_stats *h, __u64 issued, __u64 now)
{
	if (!h)
		return;
	add(&h->busy_completed, packed(issued ? now - issued : 0, 1));
}

/* A timed request's stages: allocated at start, issued, completed now;
 * held before allocation (~0: unknown). */
static __always_inline void count_latency(struct iow_series *s, __u64 start, __u64 issued,
					  __u64 now, __u64 held, __u64 io_max)
{
	add(&s->lat_sum_ns[0], issued - start);
	add(&s->lat_sum_ns[1], now - issued);
	if (enable_stage_hists) {
		count_bucket(s, IOW_STAGE_QUEUE, issued - start);
		count_bucket(s, IOW_STAGE_DEVICE, now - issued);
	}
	if (held == ~0ULL) {
		count_bucket(s, IOW_STAGE_TOTAL, now - start);
		return;
	}
	add(&s->held_timed, packed(held, 1));
	if (io_max)
		add(&s->held_io_max_ns, io_max);
	if (enable_stage_hists)
		count_bucket(s, IOW_STAGE_THROTTLE, held);
	count_bucket(s, IOW_STAGE_TOTAL, now - start + held);
}

/* block_rq_complete(rq, error, nr_bytes), the same on every kernel. */
static __always_inline int on_complete(__u64 *ctx, const bool cas)
{
	struct request *rq = (struct request *)ctx[0];
	__u32 nr_bytes = (__u32)ctx[2];
	__u32 dev = traced_dev(rq, cas), class = IOW_COST_CLASSES, rand = 0, cpu, sh, slot;
	struct iow_series *s;
	__u64 key, pages = 0, now, issued, start, held, io_max;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	/* The CPU once for the shard and the log: a helper call before 6.10. */
	cpu = shard_mask || enable_culprits ? bpf_get_smp_processor_id() : 0;
	sh = cpu & shard_mask;
	s = series_of(rq, dev, sh, &key, &slot, cas);
	if (!s)
		return 0;
	/* A request may complete in parts; it is one I/O when the last part
	 * completes (the remaining length is what this completion covers). */
	if (nr_bytes < rq->__data_len) {
		add(&s->bytes_rand, packed(nr_bytes, 0));
		return 0;
	}
	if (enable_cost)
		class = count_charge(rq, s, key, dev, nr_bytes, &pages, &rand);
	add(&s->bytes_rand, packed(nr_bytes, rand));
	now = bpf_ktime_get_ns();
	issued = issue_time(rq, dev);
	if (issued > now)
		issued = 0;
	start = rq->start_time_ns;
	/* The requests whose device time the latency stages count: the
	 * account splits the same time. */
	if (enable_culprits && issued && start && start <= issued)
		flight_log_request(cpu, slot, issued, now, in_scheduler(rq) ? start : 0);
	if (enable_hwq)
		count_hwq_completion(hwq_of(rq, dev, sh), issued, now);
	if (class < IOW_COST_CLASSES && issued)
		sample_cost_class(class, sh, pages, nr_bytes, now - issued);
	if (!enable_latency) {
		add(&s->unmeasured, 1);
		return 0;
	}
	if (!issued || !start || start > issued) {
		add(&s->unmeasured, 1);
		count_drop(issued ? IOW_DROP_NO_START_STAMP : IOW_DROP_NO_ISSUE_STAMP);
		return 0;
	}
	held = held_before(rq, start, &io_max);
	count_latency(s, start, issued, now, held, io_max);
	return 0;
}

static __always_inline int on_requeue(__u64 *ctx, const bool cas)
{
	struct request *rq = rq_arg(ctx);
	__u32 dev = traced_dev(rq, cas), sh, slot;
	struct iow_series *s;
	__u64 key;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	sh = shard();
	s = series_of(rq, dev, sh, &key, &slot, cas);
	if (s)
		add(&s->requeued, 1);
	if (enable_hwq) {
		struct iow_hwq_stats *h = hwq_of(rq, dev, sh);

		if (h)
			add(&h->requeued, 1);
	}
	return 0;
}

/* rq is merged into another request and freed without completing: its bytes
 * complete with the surviving request. */
static __always_inline int on_merge(__u64 *ctx, const bool cas)
{
	struct request *rq = rq_arg(ctx);
	__u32 dev = traced_dev(rq, cas), slot;
	struct iow_series *s;
	__u64 key;

	if (dev >= IOW_MAX_DEVS)
		return 0;
	s = series_of(rq, dev, shard(), &key, &slot, cas);
	if (s)
		add(&s->merged, 1);
	return 0;
}

/*
 * block_bio_complete(q, bio): a bio completes on a bio-based device
 * (device-mapper, md), whose bios never become requests of its own. Fires
 * for every bio of every device: attached only while the host has a
 * bio-based disk, and a request-based queue's bio returns at once (its
 * request is counted at block_rq_complete). Counts, bytes, and the bio's
 * time from its submission stamp as the device stage (the volume and what
 * is below it), io.max's hold as the throttle stage.
 */
static __always_inline int on_bio_complete(__u64 *ctx, const bool cas)
{
	struct request_queue *q = (struct request_queue *)ctx[0];
	struct bio *bio = (struct bio *)ctx[1];
	__u64 key, mask, submitted, now, svc, io_max;
	struct iow_series *s;
	__u32 dev, slot;

	if (!q || q->mq_ops || !bio)
		return 0;
	dev = traced_devt(disk_devt(bio_disk(bio)), cas);
	if (dev >= IOW_MAX_DEVS)
		return 0;
	s = series_at(bio_cgroup_id(bio), dev, op_of(bio->bi_opf), shard(), &key, &slot, cas);
	if (!s)
		return 0;
	add(&s->bytes_rand, packed(bio->bi_iter.bi_size, 0));
	submitted = bio_submitted(bio, &mask);
	if (!enable_latency || !submitted) {
		add(&s->unmeasured, 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	svc = elapsed(submitted, now & mask, mask);
	io_max = io_max_hold(bio, submitted, mask);
	add(&s->lat_sum_ns[1], svc);
	add(&s->held_timed, packed(io_max, 1));
	if (io_max)
		add(&s->held_io_max_ns, io_max);
	if (enable_stage_hists) {
		count_bucket(s, IOW_STAGE_DEVICE, svc);
		count_bucket(s, IOW_STAGE_THROTTLE, io_max);
	}
	count_bucket(s, IOW_STAGE_TOTAL, svc + io_max);
	return 0;
}

/* Each program as is and as <name>_nocas (see the top of this file). */
#define IOW_PROGRAM(tp, body)                                              \
	SEC("tp_btf/" #tp)                                                 \
	int tp(__u64 *ctx)                                                 \
	{                                                                  \
		return body(ctx, true);                                    \
	}                                                                  \
	SEC("tp_btf/" #tp)                                                 \
	int tp##_nocas(__u64 *ctx)                                         \
	{                                                                  \
		return body(ctx, false);                                   \
	}

IOW_PROGRAM(block_rq_complete, on_complete)
IOW_PROGRAM(block_rq_requeue, on_requeue)
IOW_PROGRAM(block_rq_merge, on_merge)
IOW_PROGRAM(block_rq_insert, on_insert)
IOW_PROGRAM(block_rq_issue, on_issue)
IOW_PROGRAM(block_bio_complete, on_bio_complete)

/* The delays io.latency and iocost put on tasks (fentry/fexit). */
#include "block/delay.h"

/* Programs never attached, run on demand (BPF_PROG_RUN). */
#include "block/run_on_demand.h"
