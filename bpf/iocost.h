/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between iocost.bpf.c and the Rust loader (through the skeleton):
 * the iocost controller's state as its tracepoints report it, per device
 * and per (device, cgroup). Fixed-width types only.
 */
#ifndef IOWARDEN_IOCOST_H
#define IOWARDEN_IOCOST_H

enum iocost_iow_const {
	IOCOST_IOW_MAX_CGROUPS = 4096,
	IOCOST_IOW_MAX_DEVS = 64,
};

/* Device-wide state, keyed by dev_t. vrate is in the kernel's unit
 * (VTIME_PER_USEC = 100%): the base rate io.stat prints as cost.vrate. */
struct iocost_iow_dev {
	__u64 vrate;          /* ioc->vtime_base_rate */
	__u64 vrate_effective; /* ioc->vtime_rate: base + error compensation */
	__u64 vrate_adjusts;  /* iocost_ioc_vrate_adj events */
	__u64 updated_ns;
	__u32 missed_ppm[2];  /* read, write */
	__s32 busy_level;
	__u32 rq_wait_pct;
	__s32 nr_lagging;
	__s32 nr_shortages;
};

struct iocost_iow_cg_key {
	__u32 devt;
	__u32 pad;
	__u64 cgid;
};

/* Last reported state of one cgroup on one device, and event counts.
 * hweights are in WEIGHT_ONE (1 << 16) units; vtimes in the kernel's. */
struct iocost_iow_cg {
	__u32 weight;
	__u32 inuse;
	__u32 hweight_active;
	__u32 hweight_inuse;
	__s64 vtime_budget; /* vnow - vtime at the last event: > 0 = budget left */
	__u64 abs_vdebt;
	__u64 delay_ns;
	__u64 activations;
	__u64 idles;
	__u64 shortages;   /* inuse_shortage: asked donors for budget */
	__u64 transfers;   /* inuse_transfer: gave budget away */
	__u64 adjusts;     /* inuse_adjust */
	__u64 forgives;    /* iocg_forgive_debt */
	__u64 updated_ns;
};

struct iocost_iow_enums {
	enum iocost_iow_const c;
};

#endif /* IOWARDEN_IOCOST_H */
