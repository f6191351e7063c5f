// SPDX-License-Identifier: GPL-2.0
/*
 * iowarden nvme: per NVMe queue (qid) and cgroup, commands, bytes and
 * in-flight; submission-queue occupancy; head-of-line interference.
 *
 * tp_btf on the nvme driver's tracepoints (nvme_core module BTF): loaded
 * only where the module is. HOL: a small request submitted while a large
 * request of another cgroup is in flight on the same queue is a candidate
 * victim of that cgroup (Daredevil); its submit->complete time is summed
 * apart from the cgroup's requests that shared no queue with large ones.
 *
 * The per-queue state is shared by the CPUs mapped to the queue, so it is
 * updated atomically; it is touched once per command of NVMe devices only.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "nvme.h"
#include "rq.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 small_bytes = 16 * 1024;
const volatile __u32 large_bytes = 128 * 1024;
/* Submission queue size for occupancy (tail - head mod size); 0 = unknown. */
const volatile __u32 sq_size = 0;

const volatile struct nvme_iow_enums nvme_iow_enums_btf;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NVME_IOW_MAX_ENTRIES);
	__type(key, struct nvme_iow_qcg_key);
	__type(value, struct nvme_iow_qcg_stats);
} qcg_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NVME_IOW_MAX_ENTRIES);
	__type(key, struct nvme_iow_hol_key);
	__type(value, struct nvme_iow_hol_stats);
} hol_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct nvme_iow_q_key);
	__type(value, struct nvme_iow_q_state);
} q_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NVME_IOW_CMD_SLOTS);
	__type(key, __u32);
	__type(value, struct nvme_iow_cmd);
} cmds SEC(".maps");

/* qid as the driver numbers it: I/O queues from 1, 0 = admin (no disk). */
static __always_inline __u32 rq_qid(struct request *rq)
{
	if (!rq->q->queuedata || !rq->mq_hctx)
		return 0;
	return rq->mq_hctx->queue_num + 1;
}

static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

static __always_inline struct nvme_iow_cmd *cmd_slot(__u64 ident)
{
	__u32 idx = ((ident * 0x9E3779B97F4A7C15ULL) >> 32) & (NVME_IOW_CMD_SLOTS - 1);

	return bpf_map_lookup_elem(&cmds, &idx);
}

static __always_inline __u64 cmd_ident(__u32 devt, __u32 qid, struct request *rq)
{
	return (((__u64)devt << 40) | ((__u64)(qid & 0xffff) << 24) | (rq->tag & 0xffffff)) + 1;
}

SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(nvme_setup_cmd, struct request *rq, void *cmd)
{
	struct nvme_iow_qcg_stats zs = {}, *s;
	struct nvme_iow_q_state zq = {}, *q;
	struct nvme_iow_qcg_key k = {};
	struct nvme_iow_q_key qk = {};
	struct nvme_iow_cmd *c;
	__u32 qid, bytes, flags = 0, large_idx = NVME_IOW_HOL_CULPRITS;
	__u64 culprit = 0;

	/* 6.12 marks this argument as possibly NULL (the verifier then
	 * refuses an unchecked dereference). */
	if (!rq)
		return 0;
	qid = rq_qid(rq);
	if (!qid)
		return 0;
	k.devt = rq_devt(rq);
	k.qid = qid;
	k.cgid = rq_cgroup_id(rq);
	bytes = rq->__data_len;
	if (bytes && bytes <= small_bytes)
		flags |= NVME_IOW_SMALL;
	if (bytes >= large_bytes)
		flags |= NVME_IOW_LARGE;

	s = lookup_or_init(&qcg_stats, &k, &zs);
	if (s) {
		__sync_fetch_and_add(&s->commands, 1);
		__sync_fetch_and_add(&s->bytes, bytes);
		__sync_fetch_and_add(&s->inflight, 1);
		if (flags & NVME_IOW_SMALL)
			__sync_fetch_and_add(&s->small, 1);
		if (flags & NVME_IOW_LARGE)
			__sync_fetch_and_add(&s->large, 1);
	}

	qk.devt = k.devt;
	qk.qid = qid;
	q = lookup_or_init(&q_state, &qk, &zq);
	if (q && (flags & NVME_IOW_LARGE)) {
		/* This cgroup's entry among the queue's large in-flight owners:
		 * its own, a free one, or one whose owner has none in flight
		 * (else the first few cgroups ever to send large requests would
		 * hold the entries for good). */
		for (int i = 0; i < NVME_IOW_HOL_CULPRITS; i++) {
			__u64 owner = q->large[i].cgid;

			if (owner == k.cgid + 1 ||
			    ((owner == 0 || q->large[i].inflight <= 0) &&
			     __sync_val_compare_and_swap(&q->large[i].cgid, owner, k.cgid + 1) == owner)) {
				__sync_fetch_and_add(&q->large[i].inflight, 1);
				large_idx = i;
				break;
			}
		}
	}
	if (q && (flags & NVME_IOW_SMALL)) {
		for (int i = 0; i < NVME_IOW_HOL_CULPRITS; i++) {
			__u64 owner = q->large[i].cgid;

			if (owner && owner != k.cgid + 1 && q->large[i].inflight > 0) {
				culprit = owner - 1;
				break;
			}
		}
	}

	c = cmd_slot(cmd_ident(k.devt, qid, rq));
	if (c) {
		c->ident = cmd_ident(k.devt, qid, rq);
		c->submit_ns = bpf_ktime_get_ns();
		c->cgid = k.cgid;
		c->culprit = culprit;
		c->flags = flags;
		c->large_idx = large_idx;
	}
	return 0;
}

SEC("tp_btf/nvme_complete_rq")
int BPF_PROG(nvme_complete_rq, struct request *rq)
{
	struct nvme_iow_qcg_stats zs = {}, *s;
	struct nvme_iow_hol_stats zh = {}, *h;
	struct nvme_iow_qcg_key k = {};
	struct nvme_iow_hol_key hk = {};
	struct nvme_iow_q_key qk = {};
	struct nvme_iow_q_state *q;
	struct nvme_iow_cmd *c;
	__u32 qid, flags, large_idx;
	__u64 ident, submit, now;

	if (!rq)
		return 0;
	qid = rq_qid(rq);
	if (!qid)
		return 0;
	k.devt = rq_devt(rq);
	k.qid = qid;
	ident = cmd_ident(k.devt, qid, rq);
	c = cmd_slot(ident);
	if (!c || c->ident != ident) {
		/* Set up before we attached: count the completion only. */
		k.cgid = rq_cgroup_id(rq);
		s = lookup_or_init(&qcg_stats, &k, &zs);
		if (s)
			__sync_fetch_and_add(&s->completions, 1);
		return 0;
	}
	k.cgid = c->cgid;
	flags = c->flags;
	large_idx = c->large_idx;
	submit = c->submit_ns;
	hk.culprit = c->culprit;
	c->ident = 0;

	s = lookup_or_init(&qcg_stats, &k, &zs);
	if (s) {
		__sync_fetch_and_add(&s->completions, 1);
		__sync_fetch_and_add(&s->inflight, -1);
	}
	if ((flags & NVME_IOW_LARGE) && large_idx < NVME_IOW_HOL_CULPRITS) {
		qk.devt = k.devt;
		qk.qid = qid;
		q = bpf_map_lookup_elem(&q_state, &qk);
		if (q)
			__sync_fetch_and_add(&q->large[large_idx].inflight, -1);
	}
	if (flags & NVME_IOW_SMALL) {
		now = bpf_ktime_get_ns();
		hk.devt = k.devt;
		hk.qid = qid;
		hk.victim = k.cgid;
		h = lookup_or_init(&hol_stats, &hk, &zh);
		if (h && now > submit) {
			__sync_fetch_and_add(&h->count, 1);
			__sync_fetch_and_add(&h->lat_sum_ns, now - submit);
		}
	}
	return 0;
}

SEC("tp_btf/nvme_sq")
int BPF_PROG(nvme_sq, struct request *rq, __le16 sq_head, int sq_tail)
{
	struct nvme_iow_q_key qk = {};
	struct nvme_iow_q_state *q;
	__u32 qid, occ;
	__s32 d;

	/* Unknown size (no namespace at start, said in the status): no
	 * occupancy rather than a wrong one after the tail wraps. */
	if (!rq || !sq_size)
		return 0;
	qid = rq_qid(rq);
	if (!qid)
		return 0;
	qk.devt = rq_devt(rq);
	qk.qid = qid;
	q = bpf_map_lookup_elem(&q_state, &qk);
	if (!q)
		return 0;
	d = sq_tail - (__s32)sq_head;
	if (d < 0)
		d += sq_size;
	occ = d < 0 ? 0 : d;
	__sync_fetch_and_add(&q->sq_samples, 1);
	__sync_fetch_and_add(&q->sq_occupancy_sum, occ);
	q->sq_occupancy_last = occ;
	if (occ > q->sq_occupancy_max)
		q->sq_occupancy_max = occ;
	return 0;
}
