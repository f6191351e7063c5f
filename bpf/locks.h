/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between locks.bpf.c and the Rust loader (through the skeleton):
 * kernel lock contention per (lock site = kernel stack, cgroup of the
 * waiting task, lock kind). Fixed-width types only.
 */
#ifndef IOWARDEN_LOCKS_H
#define IOWARDEN_LOCKS_H

enum lk_const {
	/* Series table: open addressing over (stack id, cgroup, kind) keys. */
	LK_MAX_SLOTS = 4096,
	LK_SLOT_PROBES = 8,
	/* Stack table entries; a stack id is below this (it fits the key's 15 bits). */
	LK_STACK_ENTRIES = 4096,
	LK_STACK_PROBES = 4,
	/* Frames kept per stack: bounds the one unwind per contention. */
	LK_STACK_DEPTH = 32,
	/* Frames the block-only filter looks at (innermost first). */
	LK_FILTER_DEPTH = 16,
	/* Kernel text ranges that count as block layer (sorted, disjoint). */
	LK_MAX_RANGES = 512,
	LK_RANGE_SEARCH_STEPS = 10, /* > log2(LK_MAX_RANGES) */
	/* Contention waits a task can have open at once: a spinning waiter
	 * interrupted by an IRQ that contends on another lock nests. */
	LK_NEST = 4,
	/* Wait histogram: bucket i holds [2^i, 2^(i+1)) ns (bucket 0 also 0 and 1 ns);
	 * the last bucket is open. */
	LK_HIST_BUCKETS = 32,
	/* Stack id recorded when no stack could be kept: time still counted. */
	LK_NO_STACK = 0x7fff,
};

/* Counters (per CPU) of what was not recorded, and why. */
enum lk_counter {
	LK_DROP_SLOT_FULL = 0,  /* series table full: wait not recorded */
	LK_DROP_STACK = 1,      /* no stack (unwind failed, table full): recorded under LK_NO_STACK */
	LK_DROP_NEST = 2,       /* LK_NEST open waits at a begin: stale ones (lost ends) discarded */
	LK_DROP_STORAGE = 3,    /* no task storage (allocation failed / busy) */
	LK_DROP_UNMATCHED = 4,  /* contention_end with no begin seen (attach mid-wait, skipped begin) */
	LK_FILTERED = 5,        /* not in the block layer (block-only): ignored by design */
	LK_NR_COUNTERS = 6,
};

/* Lock kinds, the flags of contention_begin (include/trace/events/lock.h). */
enum lk_flag {
	LK_F_SPIN = 1,
	LK_F_READ = 2,
	LK_F_WRITE = 4,
	LK_F_RT = 8,
	LK_F_PERCPU = 16,
	LK_F_MUTEX = 32,
	LK_F_MASK = 63,
};

/*
 * A series key packs (cgroup id, stack id, kind) into one u64 so that a slot
 * is claimed with a single compare-and-swap:
 *   key = cgid << 22 | stackid << 7 | kind << 1 | 1
 * Bit 0 is always set, so 0 means "free". Kernfs cgroup ids (inode number,
 * generation above bit 32) stay far below 2^42.
 */
#define LK_KEY_CGID_SHIFT 22
#define LK_KEY_STACK_SHIFT 7
#define LK_KEY_KIND_SHIFT 1

/* Per-CPU statistics of one series, indexed by slot. */
struct lk_stats {
	__u64 count;
	__u64 wait_ns;
	__u32 hist[LK_HIST_BUCKETS];
};

struct lk_counters {
	__u64 n[LK_NR_COUNTERS];
};

/* One open wait of a task: contention_begin seen, contention_end not yet. */
struct lk_wait {
	__u64 lock;
	__u64 start_ns;
	__s32 stackid; /* -1 = filtered out: popped without being recorded */
	__u32 flags;
};

/* Task local storage: the task's open waits, innermost last. */
struct lk_task {
	__u32 depth;
	__u32 pad;
	struct lk_wait w[LK_NEST];
};

/*
 * One kernel stack, innermost frame first, in a table indexed by stack id:
 * deduplicated by a hash of its frames in BPF (one unwind per contention
 * serves both the block filter and the site; bpf_get_stackid would unwind
 * again). hash 0 = free; n is written last, 0 = still being written.
 */
struct lk_stack {
	__u64 hash;
	__u32 n;
	__u32 pad;
	__u64 ips[LK_STACK_DEPTH];
};

/* Tables the BPF side fills and user space reads through the mmapped .bss. */
struct lk_tables {
	__u64 slot_key[LK_MAX_SLOTS]; /* 0 = free */
};

struct lk_enums {
	enum lk_const c;
	enum lk_counter counter;
	enum lk_flag flag;
};

#endif /* IOWARDEN_LOCKS_H */
