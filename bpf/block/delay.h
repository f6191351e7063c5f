/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The delay io.latency and iocost (a cgroup in debt) put on a task on its
 * way back to user space: blkcg_maybe_throttle_current() sleeps there
 * when a blkg of the task's cgroup has use_delay set, after the task's bio
 * completed and before its next one exists, so outside every latency
 * stage. Timed by fentry/fexit on that function (no tracepoint is there),
 * where the kernel allows them, and summed per (cgroup, device) when the
 * task slept there (a marked task whose blkg asks for no delay, as the
 * memory controller's swap throttling marks every swapper, is let go). The
 * function runs on every return to user space with work pending (rseq
 * preemptions among them): both programs return at once for a task no
 * blkg marked. A part of iowarden.bpf.c, included there after its
 * switches; sized to one entry by the loader where it does not attach.
 */
#ifndef IOWARDEN_BLOCK_DELAY_H
#define IOWARDEN_BLOCK_DELAY_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOW_DELAY_TASKS);
	__type(key, __u32);
	__type(value, struct iow_delay_since);
} delay_since SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOW_DELAY_SERIES);
	__type(key, struct iow_delay_key);
	__type(value, struct iow_delay);
} task_delays SEC(".maps");

/* The disk that marked the task: task->throttle_disk from 6.3, the
 * queue's disk (5.15+) of task->throttle_queue before. */
struct task_struct___throttle_disk {
	struct gendisk *throttle_disk;
} __attribute__((preserve_access_index));

struct task_struct___throttle_queue {
	struct request_queue *throttle_queue;
} __attribute__((preserve_access_index));

struct request_queue___disk {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

/* NULL for a task no blkg marked (nearly every call). */
static __always_inline struct gendisk *delaying_disk(struct task_struct *t)
{
	struct task_struct___throttle_disk *td = (void *)t;
	struct task_struct___throttle_queue *tq = (void *)t;
	struct request_queue___disk *q;

	if (bpf_core_field_exists(td->throttle_disk))
		return BPF_CORE_READ(td, throttle_disk);
	if (!bpf_core_field_exists(tq->throttle_queue))
		return NULL;
	q = (void *)BPF_CORE_READ(tq, throttle_queue);
	if (!q || !bpf_core_field_exists(q->disk))
		return NULL;
	return BPF_CORE_READ(q, disk);
}

SEC("fentry/blkcg_maybe_throttle_current")
int BPF_PROG(task_delay_begin)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct gendisk *disk = delaying_disk(t);
	struct iow_delay_since s = {};
	__u32 tid;

	if (!disk)
		return 0;
	/* Read through probes: disk is no typed pointer here. */
	s.devt = make_devt(BPF_CORE_READ(disk, major), BPF_CORE_READ(disk, first_minor));
	if (filter_devt && s.devt != filter_devt)
		return 0;
	s.cgroup_id = task_io_cgroup(t);
	s.nvcsw = BPF_CORE_READ(t, nvcsw);
	tid = (__u32)bpf_get_current_pid_tgid();
	s.since_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&delay_since, &tid, &s, BPF_ANY);
	return 0;
}

SEC("fexit/blkcg_maybe_throttle_current")
int BPF_PROG(task_delay_end)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iow_delay_since *s = bpf_map_lookup_elem(&delay_since, &tid);
	struct iow_delay_key k = {};
	struct iow_delay *d, zero = {};
	bool slept;
	__u64 ns;

	if (!s)
		return 0;
	ns = bpf_ktime_get_ns() - s->since_ns;
	k.cgroup_id = s->cgroup_id;
	k.devt = s->devt;
	slept = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), nvcsw) != s->nvcsw;
	bpf_map_delete_elem(&delay_since, &tid);
	/* Checked and let go (no blkg of the cgroup asked for a delay). */
	if (!slept)
		return 0;
	d = bpf_map_lookup_elem(&task_delays, &k);
	if (!d) {
		bpf_map_update_elem(&task_delays, &k, &zero, BPF_NOEXIST);
		d = bpf_map_lookup_elem(&task_delays, &k);
		if (!d)
			return 0;
	}
	__sync_fetch_and_add(&d->count, 1);
	__sync_fetch_and_add(&d->ns, ns);
	return 0;
}

#endif /* IOWARDEN_BLOCK_DELAY_H */
