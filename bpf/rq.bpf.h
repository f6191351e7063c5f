/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF-side helpers on struct request and struct bio shared by the BPF
 * objects (not read by Rust): their disk, dev_t and cgroup.
 */
#ifndef IOWARDEN_RQ_BPF_H
#define IOWARDEN_RQ_BPF_H

/* Kernels before 5.16 kept the disk in the request. */
struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *rq_disk(struct request *rq)
{
	if (bpf_core_field_exists(rq->q->disk))
		return rq->q->disk;
	/* A direct load, not BPF_CORE_READ: the verifier then knows the
	 * result is a gendisk pointer (a bpf_probe_read result is a plain
	 * number it refuses to dereference). */
	return ((struct request___old *)rq)->rq_disk;
}

/* Kernels before 5.12 kept the disk in the bio. */
struct bio___old_disk {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *bio_disk(struct bio *bio)
{
	if (bpf_core_field_exists(bio->bi_bdev))
		return bio->bi_bdev ? bio->bi_bdev->bd_disk : NULL;
	return ((struct bio___old_disk *)bio)->bi_disk;
}

/* The kernel's dev_t (MKDEV: major << 20 | minor). */
static __always_inline __u32 make_devt(__u32 major, __u32 minor)
{
	return (major << 20) | minor;
}

/* The kernel's dev_t of a whole disk; 0 without one. */
static __always_inline __u32 disk_devt(struct gendisk *disk)
{
	if (!disk)
		return 0;
	return make_devt(disk->major, disk->first_minor);
}

static __always_inline __u32 rq_devt(struct request *rq)
{
	return disk_devt(rq_disk(rq));
}

/* The cgroup a bio is charged to (never the current task); 0 without one. */
static __always_inline __u64 bio_cgroup_id(struct bio *bio)
{
	struct blkcg_gq *blkg;
	struct cgroup *cgrp;

	if (!bio)
		return 0;
	blkg = bio->bi_blkg;
	if (!blkg || !blkg->blkcg)
		return 0;
	cgrp = blkg->blkcg->css.cgroup;
	if (!cgrp || !cgrp->kn)
		return 0;
	return cgrp->kn->id;
}

/* The cgroup of the request's first bio; 0 without one. */
static __always_inline __u64 rq_cgroup_id(struct request *rq)
{
	return bio_cgroup_id(rq->bio);
}

#endif /* IOWARDEN_RQ_BPF_H */
