// SPDX-License-Identifier: GPL-2.0
/*
 * iowarden locks: time tasks wait on contended kernel locks, per (lock
 * site, cgroup of the waiting task, lock kind).
 *
 * tp_btf on lock:contention_begin / contention_end. The site is the kernel
 * stack at contention_begin (one bpf_get_stack of bounded depth, kept in a
 * bounded table deduplicated by hash), symbolized in user space. The
 * unwind is most of the cost of an event (~1.6 us for ~20 frames with ORC
 * on the development VM), so there is exactly one. The open wait lives in task local storage, a
 * small stack per task: sleeping locks (mutex, rwsem) may migrate the
 * waiter between begin and end, and an IRQ that contends on a spinlock
 * while its task spins on another nests a second wait inside the first.
 *
 * block_only (the default): a contention is recorded only when one of the
 * innermost LK_FILTER_DEPTH frames lies in the kernel text ranges user
 * space computed as block layer (block/, schedulers, blk-mq drivers): the
 * lock traffic of the rest of the kernel takes no table entry.
 *
 * The series table and per-CPU counters follow iowarden.bpf.c. Per-CPU
 * counters are written only by contention_end, which the kernel never runs
 * nested on one CPU (a nested run is skipped and counted as a recursion
 * miss of the program), so plain read-modify-writes are safe.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "locks.h"
#include "table.bpf.h"
#include "task_cgroup.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Record only contentions whose stack passes through block_start/end. */
const volatile bool block_only = true;
const volatile __u32 nr_block_ranges = 0;
/* Sorted, disjoint [start, end) kernel text ranges (filled by the loader). */
const volatile __u64 block_start[LK_MAX_RANGES];
const volatile __u64 block_end[LK_MAX_RANGES];
/* Frames unwound per contention (<= LK_STACK_DEPTH): the unwind's cost
 * grows with it. */
const volatile __u32 stack_depth = LK_STACK_DEPTH;

struct lk_tables tables;

/* Never read: puts the layout enums in the object's BTF (see iowarden.bpf.c). */
const volatile struct lk_enums lk_enums_btf;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LK_STACK_ENTRIES);
	__type(key, __u32);
	__type(value, struct lk_stack);
} stacks SEC(".maps");

/* The unwound stack of the current contention_begin (never nests on a CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lk_stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LK_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct lk_stats);
} lock_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lk_counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lk_task);
} waits SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u32 zero = 0;
	struct lk_counters *c = bpf_map_lookup_elem(&counters, &zero);

	/* Atomic: begin and end both count, and may interrupt each other. */
	if (c && what < LK_NR_COUNTERS)
		__sync_fetch_and_add(&c->n[what], 1);
}

/* Whether ip lies in one of the block-layer ranges (binary search). A
 * global function: verified once, not once per frame and path. */
__noinline int in_block(__u64 ip)
{
	__u32 lo = 0, hi = nr_block_ranges;

	if (hi > LK_MAX_RANGES)
		hi = LK_MAX_RANGES;
	for (int i = 0; i < LK_RANGE_SEARCH_STEPS && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;

		if (mid >= LK_MAX_RANGES)
			return 0;
		if (ip < block_start[mid])
			hi = mid;
		else if (ip >= block_end[mid])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

static __always_inline bool stack_in_block(struct lk_stack *st)
{
	for (int i = 0; i < LK_FILTER_DEPTH; i++) {
		if (i >= st->n)
			break;
		if (in_block(st->ips[i]))
			return true;
	}
	return false;
}

/* Id of the stack in the stack table, adding it on first sight;
 * LK_NO_STACK when its probe window is taken by other stacks. Global: see
 * in_block. */
__noinline int stack_id(struct lk_stack *st)
{
	__u64 h = 0xcbf29ce484222325ULL;
	__u32 n;

	if (!st)
		return LK_NO_STACK;
	n = st->n;

	for (int i = 0; i < LK_STACK_DEPTH; i++) {
		if (i >= n)
			break;
		h = (h ^ st->ips[i]) * 0x100000001b3ULL;
	}
	h |= 1;
	for (__u32 p = 0; p < LK_STACK_PROBES; p++) {
		__u32 idx = ((h >> 32) + p) & (LK_STACK_ENTRIES - 1);
		struct lk_stack *e = bpf_map_lookup_elem(&stacks, &idx);
		__u64 cur;

		if (!e)
			return LK_NO_STACK;
		cur = e->hash;
		if (cur == h)
			return idx;
		if (cur)
			continue;
		cur = __sync_val_compare_and_swap(&e->hash, 0, h);
		if (cur == h)
			return idx;
		if (cur)
			continue;
		for (int i = 0; i < LK_STACK_DEPTH; i++)
			e->ips[i] = i < n ? st->ips[i] : 0;
		/* Last: user space reads a stack only once n is set. */
		__sync_fetch_and_add(&e->n, n);
		return idx;
	}
	return LK_NO_STACK;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(contention_begin, void *lock, unsigned int flags)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct lk_stack *st;
	struct lk_task *t;
	struct lk_wait *w;
	__u32 d, depth, zero = 0;
	__s32 id = -1;
	long n;

	t = bpf_task_storage_get(&waits, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		count(LK_DROP_STORAGE);
		return 0;
	}
	d = t->depth;
	if (d >= LK_NEST) {
		/* Real nesting stays below LK_NEST: these are waits whose end was
		 * never seen (the end program skipped as a recursion). Start over. */
		count(LK_DROP_NEST);
		d = 0;
	}
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	depth = stack_depth;
	if (depth > LK_STACK_DEPTH || depth == 0)
		depth = LK_STACK_DEPTH;
	n = bpf_get_stack(ctx, st->ips, depth * sizeof(__u64), 0);
	st->n = n > 0 ? n / sizeof(__u64) : 0;
	if (!block_only || stack_in_block(st)) {
		id = st->n ? stack_id(st) : LK_NO_STACK;
		if (id == LK_NO_STACK)
			count(LK_DROP_STACK);
	} else {
		count(LK_FILTERED);
	}
	w = &t->w[d & (LK_NEST - 1)];
	w->lock = (__u64)lock;
	w->stackid = id;
	w->flags = flags & LK_F_MASK;
	/* Last: the wait starts once its bookkeeping is done. */
	w->start_ns = bpf_ktime_get_ns();
	t->depth = d + 1;
	return 0;
}

/* Slot of the key, claiming one on first sight; LK_MAX_SLOTS when full. */
static __always_inline __u32 series_slot(__u64 k)
{
	/* contention_begin arrived in 5.19, after BPF compare-and-swap (5.12) */
	return claim_slot(tables.slot_key, LK_MAX_SLOTS, LK_MAX_SLOTS - 1, LK_SLOT_PROBES, k, NULL, true);
}

SEC("tp_btf/contention_end")
int BPF_PROG(contention_end, void *lock, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct lk_stats *s;
	struct lk_task *t;
	struct lk_wait *w;
	__u64 now, delta, k, cg, start;
	__u32 d, slot, b, flags;
	__s32 id;

	t = bpf_task_storage_get(&waits, task, 0, 0);
	if (!t || t->depth == 0) {
		count(LK_DROP_UNMATCHED);
		return 0;
	}
	/* Innermost open wait on this lock; any above it lost their end. */
	d = t->depth;
	w = NULL;
	for (int i = LK_NEST - 1; i >= 0; i--) {
		if (i < d && t->w[i].lock == (__u64)lock) {
			w = &t->w[i];
			t->depth = i;
			break;
		}
	}
	if (!w) {
		/* Its begin was skipped (recursion) or happened before attach. */
		count(LK_DROP_UNMATCHED);
		return 0;
	}
	id = w->stackid;
	if (id < 0)
		return 0; /* filtered at begin */
	now = bpf_ktime_get_ns();
	start = w->start_ns;
	flags = w->flags;
	delta = now > start ? now - start : 0;

	cg = task_io_cgroup(task);
	k = (cg << LK_KEY_CGID_SHIFT) | ((__u64)(id & LK_NO_STACK) << LK_KEY_STACK_SHIFT) |
	    ((__u64)(flags & LK_F_MASK) << LK_KEY_KIND_SHIFT) | 1;
	slot = series_slot(k);
	if (slot >= LK_MAX_SLOTS) {
		count(LK_DROP_SLOT_FULL);
		return 0;
	}
	s = bpf_map_lookup_elem(&lock_stats, &slot);
	if (!s)
		return 0;
	b = delta ? log2_u64(delta) : 0;
	if (b >= LK_HIST_BUCKETS)
		b = LK_HIST_BUCKETS - 1;
	s->count++;
	s->wait_ns += delta;
	s->hist[b]++;
	return 0;
}
