/* SPDX-License-Identifier: GPL-2.0 */
/* A task's cgroup on the io controller's hierarchy (v1 blkio or v2), for
 * what the kernel charges to the task rather than to a bio: lock waits,
 * the delays io.latency and iocost put on a task. */
#ifndef IOWARDEN_TASK_CGROUP_BPF_H
#define IOWARDEN_TASK_CGROUP_BPF_H

static __always_inline __u64 task_io_cgroup(struct task_struct *task)
{
	int io = bpf_core_enum_value(enum cgroup_subsys_id, io_cgrp_id);
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cs = BPF_CORE_READ(task, cgroups);
	__u64 off = bpf_core_field_offset(struct css_set, subsys) + io * sizeof(void *);

	if (!cs || io < 0)
		return 0;
	bpf_probe_read_kernel(&css, sizeof(css), (void *)cs + off);
	if (!css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

#endif /* IOWARDEN_TASK_CGROUP_BPF_H */
