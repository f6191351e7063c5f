/* SPDX-License-Identifier: GPL-2.0 */
/*
 * When a request was issued: the kernel's io_start_time_ns where the queue
 * collects stats, else a stamp of iowarden's own taken at block_rq_issue
 * (attached only then), kept in a small table by (device, hardware queue,
 * driver tag).
 * A part of iowarden.bpf.c, included there after the switches, tables
 * and add(): not a helper of other objects.
 */
#ifndef IOWARDEN_BLOCK_STAMPS_H
#define IOWARDEN_BLOCK_STAMPS_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOW_STAMP_SLOTS);
	__type(key, __u32);
	__type(value, struct iow_stamp);
} issue_stamps SEC(".maps");

/* (device, hardware queue, tag) packed in one word. */
static __always_inline __u64 ident_of(struct request *rq, __u32 dev_idx, __u32 tag)
{
	__u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;

	return ((__u64)dev_idx << 48) | ((__u64)(q & 0xffff) << 32) | tag;
}

/* A request in flight is identified by (device, hardware queue, driver tag). */
static __always_inline __u64 rq_ident(struct request *rq, __u32 dev_idx)
{
	return ident_of(rq, dev_idx, rq->tag);
}

/* The entry of an identity in a direct-mapped table of IOW_STAMP_SLOTS
 * (issue_stamps). */
static __always_inline __u32 ident_index(__u64 ident)
{
	return (hash64(ident) >> 32) & (IOW_STAMP_SLOTS - 1);
}

static __always_inline struct iow_stamp *stamp_slot(__u64 ident)
{
	__u32 idx = ident_index(ident);

	return bpf_map_lookup_elem(&issue_stamps, &idx);
}

/*
 * Does the request's queue collect stats, so that blk_mq_start_request()
 * stamps io_start_time_ns on every request it issues? 1 yes, 0 no, -1
 * unknown: before 6.11 QUEUE_FLAG_STATS is a macro, absent from BTF.
 */
static __always_inline int queue_stamps(struct request *rq)
{
	if (queue_flag_stats_bit >= 64)
		return -1;
	return (rq->q->queue_flags & (1ULL << (queue_flag_stats_bit & 63))) != 0;
}

/*
 * Should block_rq_issue stamp this request? Only where the kernel will
 * not (it stamps right after that tracepoint): every request when the
 * queue's stats flag is unknown.
 */
static __always_inline bool needs_own_stamp_at_issue(struct request *rq)
{
	return !use_kernel_issue_stamps || queue_stamps(rq) != 1;
}

/*
 * Can a request the kernel did not stamp be timed by a stamp of our own?
 * Not the flush machinery's or passthrough requests (the kernel times
 * neither), nor one on a queue known to stamp (it bypassed the stats).
 */
static __always_inline bool own_stamp_can_time(struct request *rq)
{
	__u32 op = rq->cmd_flags & 0xff; /* REQ_OP_MASK */

	if (!use_kernel_issue_stamps)
		return true;
	/* REQ_OP_SCSI_IN (32, until 5.18) and REQ_OP_DRV_IN/OUT (34, 35) */
	if (op == REQ_OP_FLUSH || op >= 32)
		return false;
	return queue_stamps(rq) != 1;
}

/* When was this request issued to the driver? 0 if unknown. */
static __always_inline __u64 issue_time(struct request *rq, __u32 dev_idx)
{
	/* blk_mq_rq_ctx_init() zeroes it; blk_mq_start_request() stamps it
	 * where the queue collects stats (iocost, wbt, ...). */
	__u64 kts = rq->io_start_time_ns;

	/* Keep the kernel stamp's load apart from the map value's below:
	 * the verifier refuses one instruction reading two kinds of pointer. */
	barrier_var(kts);
	if (use_kernel_issue_stamps && kts)
		return kts;
	if (!own_stamp_can_time(rq))
		return 0;
	if (!tables.need_issue_stamps)
		tables.need_issue_stamps = 1;

	__u64 ident = rq_ident(rq, dev_idx);
	struct iow_stamp *st = stamp_slot(ident);

	if (st && st->ident == ident) {
		__u64 t = st->issue_ns;

		barrier_var(t);
		return t;
	}
	return 0;
}

#endif /* IOWARDEN_BLOCK_STAMPS_H */
