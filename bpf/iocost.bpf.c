// SPDX-License-Identifier: GPL-2.0
/*
 * iowarden iocost: the blk-iocost controller's state from its own
 * tracepoints (tp_btf: the iocg pointer, not the formatted path string).
 * Events fire on state changes only, so user space also polls io.stat.
 * Note the kernel formats the cgroup path under a global lock whenever an
 * iocost event is enabled: these programs are optional (--no-iocost).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iocost.h"

char LICENSE[] SEC("license") = "GPL";

const volatile struct iocost_iow_enums iocost_iow_enums_btf;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOCOST_IOW_MAX_DEVS);
	__type(key, __u32);
	__type(value, struct iocost_iow_dev);
} devs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOCOST_IOW_MAX_CGROUPS);
	__type(key, struct iocost_iow_cg_key);
	__type(value, struct iocost_iow_cg);
} cgs SEC(".maps");

/* Before 6.3 an rq_qos pointed at its queue, not its disk. */
struct rq_qos___old {
	struct request_queue *q;
} __attribute__((preserve_access_index));

/* Kernels before 6.8 embed a kobject in the queue. */
struct request_queue___kobj {
	struct kobject kobj;
} __attribute__((preserve_access_index));

/*
 * dev_t of a queue before request_queue->disk (5.15): the queue's kobject
 * is a child of its disk's device (blk_register_queue), whose dev_t is
 * the kernel's MKDEV(major, minor) = major << 20 | minor.
 */
static __always_inline __u32 queue_devt_from_kobject(struct request_queue *q)
{
	struct kobject *parent = BPF_CORE_READ((struct request_queue___kobj *)q, kobj.parent);
	struct device *dev;

	if (!parent)
		return 0;
	dev = (void *)parent - bpf_core_field_offset(struct device, kobj);
	return BPF_CORE_READ(dev, devt);
}

static __always_inline __u32 ioc_devt(struct ioc *ioc)
{
	struct request_queue *q;
	struct gendisk *disk;

	if (bpf_core_field_exists(ioc->rqos.disk)) {
		disk = BPF_CORE_READ(ioc, rqos.disk);
	} else {
		q = BPF_CORE_READ((struct rq_qos___old *)&ioc->rqos, q);
		if (!q)
			return 0;
		if (!bpf_core_field_exists(q->disk))
			return queue_devt_from_kobject(q);
		disk = BPF_CORE_READ(q, disk);
	}
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
}

static __always_inline __u64 iocg_cgid(struct ioc_gq *iocg)
{
	return BPF_CORE_READ(iocg, pd.blkg, blkcg, css.cgroup, kn, id);
}

static __always_inline struct iocost_iow_dev *dev_state(struct ioc *ioc, __u32 devt)
{
	struct iocost_iow_dev zero = {}, *d;

	d = bpf_map_lookup_elem(&devs, &devt);
	if (!d) {
		bpf_map_update_elem(&devs, &devt, &zero, BPF_NOEXIST);
		d = bpf_map_lookup_elem(&devs, &devt);
	}
	if (d) {
		d->vrate = BPF_CORE_READ(ioc, vtime_base_rate);
		d->vrate_effective = BPF_CORE_READ(ioc, vtime_rate.counter);
		d->busy_level = BPF_CORE_READ(ioc, busy_level);
		d->updated_ns = bpf_ktime_get_ns();
	}
	return d;
}

/* Refreshes the cgroup's state from its iocg; returns it for the counters. */
static __always_inline struct iocost_iow_cg *cg_state(struct ioc_gq *iocg, struct ioc_now *now)
{
	struct iocost_iow_cg zero = {}, *c;
	struct iocost_iow_cg_key k = {};
	struct ioc *ioc = BPF_CORE_READ(iocg, ioc);

	k.devt = ioc_devt(ioc);
	k.cgid = iocg_cgid(iocg);
	dev_state(ioc, k.devt);
	c = bpf_map_lookup_elem(&cgs, &k);
	if (!c) {
		bpf_map_update_elem(&cgs, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&cgs, &k);
	}
	if (!c)
		return NULL;
	c->weight = BPF_CORE_READ(iocg, weight);
	c->inuse = BPF_CORE_READ(iocg, inuse);
	c->hweight_active = BPF_CORE_READ(iocg, hweight_active);
	c->hweight_inuse = BPF_CORE_READ(iocg, hweight_inuse);
	c->vtime_budget = (__s64)(BPF_CORE_READ(now, vnow) - BPF_CORE_READ(iocg, vtime.counter));
	c->abs_vdebt = BPF_CORE_READ(iocg, abs_vdebt);
	c->delay_ns = BPF_CORE_READ(iocg, delay);
	c->updated_ns = bpf_ktime_get_ns();
	return c;
}

SEC("tp_btf/iocost_iocg_activate")
int BPF_PROG(iocost_iocg_activate, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->activations, 1);
	return 0;
}

SEC("tp_btf/iocost_iocg_idle")
int BPF_PROG(iocost_iocg_idle, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->idles, 1);
	return 0;
}

SEC("tp_btf/iocost_inuse_shortage")
int BPF_PROG(iocost_inuse_shortage, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->shortages, 1);
	return 0;
}

SEC("tp_btf/iocost_inuse_transfer")
int BPF_PROG(iocost_inuse_transfer, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->transfers, 1);
	return 0;
}

SEC("tp_btf/iocost_inuse_adjust")
int BPF_PROG(iocost_inuse_adjust, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->adjusts, 1);
	return 0;
}

SEC("tp_btf/iocost_iocg_forgive_debt")
int BPF_PROG(iocost_iocg_forgive_debt, struct ioc_gq *iocg, const char *path, struct ioc_now *now)
{
	struct iocost_iow_cg *c = cg_state(iocg, now);

	if (c)
		__sync_fetch_and_add(&c->forgives, 1);
	return 0;
}

/* (ioc, new_vrate, missed_ppm, rq_wait_pct, nr_lagging, nr_shortages) */
SEC("tp_btf/iocost_ioc_vrate_adj")
int iocost_ioc_vrate_adj(__u64 *ctx)
{
	struct ioc *ioc = (struct ioc *)ctx[0];
	__u64 new_vrate = ctx[1], missed_ppm = 0;
	__u32 rq_wait_pct = ctx[3];
	int nr_lagging = ctx[4], nr_shortages = ctx[5];
	__u32 devt = ioc_devt(ioc);
	struct iocost_iow_dev *d = dev_state(ioc, devt);

	if (!d)
		return 0;
	/*
	 * ioc_adjust_base_vrate() fires this right before storing new_vrate as
	 * the base rate, except when it leaves the rate alone (not busy, or
	 * under-busy with lagging cgroups): there, kernels before 6.3 pass the
	 * effective rate (base + vtime error compensation), so keep the base
	 * dev_state() just read.
	 */
	if (!(d->busy_level == 0 || (d->busy_level < 0 && nr_lagging)))
		d->vrate = new_vrate;
	/* The u32 * argument is copied out of the context, not loaded: before
	 * 5.16 the verifier refuses loads of pointer-to-int arguments. */
	bpf_probe_read_kernel(&missed_ppm, sizeof(missed_ppm), &ctx[2]);
	bpf_probe_read_kernel(d->missed_ppm, sizeof(d->missed_ppm), (void *)missed_ppm);
	d->rq_wait_pct = rq_wait_pct;
	d->nr_lagging = nr_lagging;
	d->nr_shortages = nr_shortages;
	__sync_fetch_and_add(&d->vrate_adjusts, 1);
	return 0;
}
