/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between iowarden.bpf.c and the Rust loader (which gets these types
 * from the generated skeleton): the single source of truth for map layouts.
 * Fixed-width types only.
 */
#ifndef IOWARDEN_H
#define IOWARDEN_H

/*
 * Layout constants. An enum (not #define) so that they are in the object's
 * BTF and reach Rust through the skeleton.
 */
enum iow_const {
	/* Latency histograms are log-linear in microseconds: values below 4 us get
	 * a bucket each, then every power of two is split in 4 sub-buckets. */
	IOW_HIST_SUB_BITS = 2,
	IOW_HIST_BUCKETS = 88, /* up to [7 << 20 us, inf): ~7.3 s and above */
	IOW_NR_OPS = 4,
	IOW_NR_STAGES = 4,
	/* Series table: open addressing over (cgroup, device, op) keys. */
	IOW_MAX_SLOTS = 16384, /* compile-time capacity; the loader uses a power of two <= this */
	IOW_SLOT_PROBES = 32,  /* a new series looks this far from its hash for a free slot */
	IOW_DEV_PROBES = 8,
	IOW_DEV_BITS = 6,
	IOW_MAX_DEVS = 64,
	IOW_MAX_HWQ = 64,
	/* Counters are shared between CPUs and updated with atomic adds. They
	 * are split in shards (a power of two <= this, chosen by the loader),
	 * CPU c writing shard c % shards, so that CPUs completing I/O of one
	 * series at once contend on fewer cache lines. Memory grows with
	 * shards, never with the number of CPUs. */
	IOW_MAX_SHARDS = 64,
	/* Fallback issue stamps when the kernel does not stamp io_start_time_ns. */
	IOW_STAMP_SLOTS = 16384,
	/* Cost model classes: request sizes by power of two, <= 4 KiB .. >= 1 MiB. */
	IOW_COST_SIZES = 9,
	/* (device, read/write, sequential/random, size) */
	IOW_COST_CLASSES = IOW_MAX_DEVS * 2 * 2 * IOW_COST_SIZES,
	/* blk-iocost.c LCOEF_RANDIO_PAGES: a request starting further than this
	 * many 4 KiB pages from the previous one's end is random. */
	IOW_COST_RANDIO_PAGES = 4096,
	/* A count and a sum packed in one word, so that a shared shard pays one
	 * atomic add for both: the count in the low IOW_PACK_COUNT_BITS bits,
	 * the sum above (adding (v << bits) | 1). User space reads the change
	 * between two polls, exact while a poll sees fewer than 2^22 counted
	 * and a sum below 2^42 per shard (4 TiB, 73 minutes of busy time). */
	IOW_PACK_COUNT_BITS = 22,
	/* Bios blk-throttle (io.max) holds at once whose hold is timed: an
	 * LRU table, so an entry whose bio never completes on a request (a
	 * bio-based device) is evicted in time, never leaked. */
	IOW_HELD_BIOS = 8192,
	/* Tasks being delayed at once on their way back to user space
	 * (task_delay_begin -> _end, by thread id) and (cgroup, device) pairs
	 * whose delays are summed: a pair is released with its cgroup. */
	IOW_DELAY_TASKS = 4096,
	IOW_DELAY_SERIES = 4096,
	/* The culprit account's log (block/culprits.h): one ring of records per
	 * possible CPU, a power of two of records each, sized by the loader
	 * within these bounds. */
	IOW_FLIGHT_RING_MIN_BITS = 8,
	IOW_FLIGHT_RING_MAX_BITS = 16,
	/* A record's completion time keeps its low bits (78 hours' worth):
	 * user space, which drains the rings within seconds, restores the rest
	 * from its clock. Above them the series slot, then the lap. */
	IOW_FLIGHT_DONE_BITS = 48,
	IOW_FLIGHT_SLOT_BITS = 14,
};

enum iow_op {
	IOW_OP_READ = 0,
	IOW_OP_WRITE = 1,
	IOW_OP_DISCARD = 2,
	IOW_OP_FLUSH = 3,
};

/*
 * A request's life from its first bio's submission: held (by blk-throttle,
 * then by the rq-qos policies iocost, io.latency and wbt, before a request
 * exists), queued, on the device. Where the bio carries no submission stamp
 * (no bio, or a kernel that stamps none) the request has no throttle
 * sample and its total starts at allocation.
 */
enum iow_stage {
	IOW_STAGE_QUEUE = 0,    /* allocation -> issue */
	IOW_STAGE_DEVICE = 1,   /* issue -> completion */
	IOW_STAGE_TOTAL = 2,    /* submission -> completion */
	IOW_STAGE_THROTTLE = 3, /* submission -> allocation */
};

enum iow_drop {
	IOW_DROP_SLOT_FULL = 0,
	IOW_DROP_DEV_FULL = 1,
	IOW_DROP_NO_ISSUE_STAMP = 2,
	IOW_DROP_NO_START_STAMP = 3,
	IOW_NR_DROPS = 4,
};

/*
 * A series key packs (cgroup id, device index, op) into one u64 so that a
 * slot can be claimed with a single compare-and-swap:
 *   key = cgid << 9 | dev_idx << 3 | op << 1 | 1
 * Bit 0 is always set, so 0 means "free". Cgroup ids are kernfs ids, far
 * below 2^55.
 */
enum iow_key_layout {
	IOW_KEY_CGID_SHIFT = 9,
	IOW_KEY_DEV_SHIFT = 3,
	IOW_KEY_OP_SHIFT = 1,
};

/*
 * One shard of one series' counters, in the mmapped `series` array at
 * slot * shards + shard. Every field only grows (wrapping) except cursor:
 * user space reads deltas. A completed request whose latency was measured
 * is counted in the total-stage histogram, any other in `unmeasured`, so
 * requests = sum(hist[TOTAL]) + unmeasured; the total stage's latency sum
 * is throttle + queue + device (queue and device are measured together or
 * not at all; throttle only for requests counted in held_timed).
 */
/*
 * The per-shard records are cache-line aligned: shards of one record lie
 * side by side, and without it CPUs of different shards write the same
 * line (false sharing; `iowarden bench-shards`, two CPUs with a shard
 * each: 48 ns per request unaligned against 40 on one CPU; aligned, the
 * same on both).
 */
#define IOW_CACHELINE __attribute__((aligned(64)))

struct iow_series {
	/* packed (IOW_PACK_COUNT_BITS): completed bytes (partial completions
	 * included) above, the requests the model classified random below */
	__u64 bytes_rand;
	/* packed (IOW_PACK_COUNT_BITS): the 4 KiB pages (at least one each)
	 * of the completed reads and writes iocost's model charges above,
	 * those requests below; user space prices them with the device's
	 * model (loader/src/costmodel/charge.rs) */
	__u64 charged;
	__u64 unmeasured; /* completed requests without a latency sample */
	__u64 merged;     /* requests merged into another one */
	__u64 requeued;   /* requests handed back by the driver */
	/* End sector of the previous request completed in this shard (the
	 * model's cursor; 0 = none). State, not a counter: iocost keeps one
	 * per cgroup and device too. */
	__u64 cursor;
	__u64 lat_sum_ns[2]; /* queue, device */
	/* packed (IOW_PACK_COUNT_BITS): the throttle stage's sum above, the
	 * requests timed from their bio's submission below (the others, e.g.
	 * flushes, have no bio or no stamp: no throttle sample) */
	__u64 held_timed;
	/* The part of the throttle stage blk-throttle (io.max) held the first
	 * bio (only where its fexit program attaches); the rest is rq-qos. */
	__u64 held_io_max_ns;
	/* u32 buckets: user space reads deltas with wrapping subtraction every
	 * poll, far more often than a bucket can wrap. Flat [stage *
	 * IOW_HIST_BUCKETS + bucket]: the skeleton generator cannot derive
	 * Default for nested arrays. */
	__u32 hist[IOW_NR_STAGES * IOW_HIST_BUCKETS];
} IOW_CACHELINE;

/* One shard of one hardware queue, at (dev_idx * IOW_MAX_HWQ + hctx) * shards + shard. */
struct iow_hwq_stats {
	/* packed (IOW_PACK_COUNT_BITS): the sum of issue -> completion times
	 * (mean occupancy by Little's law) above, completions below */
	__u64 busy_completed;
	__u64 requeued;
	__u64 inserted;  /* into the I/O scheduler (only with --hwq-events and a scheduler) */
	__u64 issued;    /* only with --hwq-events */
} IOW_CACHELINE;

/* One shard of the samples of one cost class (only requests whose device
 * time was measured), at class * shards + shard: what the online refit and
 * the model error are computed from. */
struct iow_cost_class {
	__u64 bytes_ios; /* packed (IOW_PACK_COUNT_BITS): bytes above, requests below */
	__u64 device_ns; /* sum of issue -> completion times */
	__u64 pages;     /* sum of the requests' 4 KiB pages (at least one each) */
} IOW_CACHELINE;

struct iow_drops {
	__u64 n[IOW_NR_DROPS];
};

/* Fallback issue stamp, direct-mapped by (device, hardware queue, tag). */
struct iow_stamp {
	__u64 ident;
	__u64 issue_ns;
};

/* Tables the BPF side fills and user space reads through the mmapped .bss. */
struct iow_tables {
	__u64 slot_key[IOW_MAX_SLOTS];  /* 0 = free */
	__u32 dev_devt[IOW_MAX_DEVS];   /* kernel dev_t (major << 20 | minor), 0 = free */
	/* Set by the completion program when a request carries no issue stamp
	 * of the kernel's (its queue does not collect stats): the loader then
	 * attaches block_rq_issue to stamp requests itself. */
	__u32 need_issue_stamps;
	/* Set by the blk-throttle program once it timed a held bio: from then
	 * on completions look their first bio up in held_bios. */
	__u32 held_bios_seen;
};

/* A bio blk-throttle held: since when, and its blkg (a recycled bio of
 * another cgroup or device never takes a stale entry). */
struct iow_held_bio {
	__u64 since_ns;
	__u64 blkg;
};

/* A task io.latency or iocost (use_delay) is delaying on its way back to
 * user space: since when, its cgroup on the io hierarchy and the disk. */
struct iow_delay_since {
	__u64 since_ns;
	__u64 cgroup_id;
	/* The task's voluntary context switches then: a call in which it did
	 * not sleep delayed nothing. */
	__u64 nvcsw;
	__u32 devt;
	__u32 pad;
};

struct iow_delay_key {
	__u64 cgroup_id;
	__u32 devt;
	__u32 pad;
};

/* Delays of one (cgroup, device) since load: how many, how long. */
struct iow_delay {
	__u64 count;
	__u64 ns;
};

/*
 * The culprit account (block/culprits.h): a completed request whose device
 * time was measured, as the completion program logs it in its CPU's ring.
 * User space replays every device's requests in time order and splits
 * each one's time by processor sharing (loader/src/culprits/).
 */
struct iow_flight_rec {
	/* Completion time (bpf_ktime_get_ns) in the low IOW_FLIGHT_DONE_BITS
	 * bits, the series slot in the IOW_FLIGHT_SLOT_BITS above, and in the
	 * top 2 bits the ring's lap it was written in (its index's bits above
	 * the ring's, plus one): a record read before its stores show (possible on CPUs
	 * that reorder stores, as the count is a plain store) is from an
	 * earlier lap, and is read again at the next drain. */
	__u64 done_slot;
	/* Issue -> completion in the low 32 bits, allocation -> issue of a
	 * request that went through an I/O scheduler in the high 32 (0:
	 * none), in nanoseconds, each saturated at 2^32 - 1. */
	__u64 device_queue_ns;
};

/* The records a CPU has logged since load (the next one's index). On a
 * line of its own: only its CPU writes it, with a plain store. */
struct iow_flight_head {
	__u64 logged;
	__u64 pad[7];
} IOW_CACHELINE;

struct iow_enums {
	enum iow_const c;
	enum iow_op op;
	enum iow_stage stage;
	enum iow_drop drop;
	enum iow_key_layout key;
};

/* Context of the hist_bucket_selftest program: user space fills ns[], the
 * kernel writes the bucket of each, so tests check the real bucketing code. */
#define IOW_SELFTEST_N 64
struct iow_bucket_probe {
	__u64 ns[IOW_SELFTEST_N];
	__u32 bucket[IOW_SELFTEST_N];
};

#endif /* IOWARDEN_H */
