/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between nvme.bpf.c and the Rust loader (through the skeleton):
 * per NVMe queue and cgroup command accounting, submission-queue occupancy
 * and head-of-line interference. Fixed-width types only.
 */
#ifndef IOWARDEN_NVME_H
#define IOWARDEN_NVME_H

enum nvme_iow_const {
	/* Large in-flight requests tracked per queue: one entry per cgroup. */
	NVME_IOW_HOL_CULPRITS = 8,
	/* Per-command state, direct-mapped by (device, qid, tag). */
	NVME_IOW_CMD_SLOTS = 16384,
	NVME_IOW_MAX_ENTRIES = 16384,
};

/* (device, NVMe queue id, cgroup). qid 0 is the admin queue (not traced). */
struct nvme_iow_qcg_key {
	__u32 devt;
	__u32 qid;
	__u64 cgid;
};

struct nvme_iow_qcg_stats {
	__u64 commands;    /* nvme_setup_cmd */
	__u64 completions; /* nvme_complete_rq */
	__u64 bytes;       /* of the commands set up */
	__s64 inflight;    /* set up and not completed (only commands seen at setup) */
	__u64 small;       /* commands <= small_bytes */
	__u64 large;       /* commands >= large_bytes */
};

/* (device, qid, victim cgroup, culprit cgroup); culprit 0 = "no large
 * request of another cgroup was in flight on the queue at submission". */
struct nvme_iow_hol_key {
	__u32 devt;
	__u32 qid;
	__u64 victim;
	__u64 culprit;
};

struct nvme_iow_hol_stats {
	__u64 count;
	__u64 lat_sum_ns; /* submission (nvme_setup_cmd) -> nvme_complete_rq */
};

/* (device, qid) */
struct nvme_iow_q_key {
	__u32 devt;
	__u32 qid;
};

struct nvme_iow_large {
	__u64 cgid;
	__s64 inflight;
};

struct nvme_iow_q_state {
	struct nvme_iow_large large[NVME_IOW_HOL_CULPRITS];
	/* From nvme_sq at each completion: what the controller had not yet
	 * fetched from the submission queue. */
	__u64 sq_samples;
	__u64 sq_occupancy_sum;
	__u32 sq_occupancy_last;
	__u32 sq_occupancy_max;
};

struct nvme_iow_cmd {
	__u64 ident; /* devt << 40 | qid << 24 | tag, +1 so 0 = free */
	__u64 submit_ns;
	__u64 cgid;
	__u64 culprit;
	__u32 flags; /* NVME_IOW_SMALL | NVME_IOW_LARGE */
	__u32 large_idx;
};

#define NVME_IOW_SMALL 1
#define NVME_IOW_LARGE 2

struct nvme_iow_enums {
	enum nvme_iow_const c;
};

#endif /* IOWARDEN_NVME_H */
