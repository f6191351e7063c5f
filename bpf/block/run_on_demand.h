/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The programs of iowarden.bpf.c that are never attached: BPF_PROG_RUN runs
 * them on demand, with the object's own maps and helpers (this file is
 * included at its end). `iowarden bench-shards` runs the benches, the tests
 * the selftest.
 */
#ifndef IOWARDEN_BLOCK_RUN_ON_DEMAND_H
#define IOWARDEN_BLOCK_RUN_ON_DEMAND_H

/*
 * Not attached: `iowarden bench-shards` runs it (BPF_PROG_RUN; XDP for its
 * repeat count) on several CPUs at once. The counter updates of one timed
 * 4 KiB random read, with on_complete's helpers, on series slot 0, device
 * 0's hardware queue 0 and one cost class: CPUs that share a shard add to
 * the same cache lines, as CPUs completing one cgroup's I/O on one device
 * do. The request's own reads (cgroup, device, stamps) are not in it.
 */
SEC("xdp")
int completion_adds_bench(struct xdp_md *x)
{
	__u32 idx = shard(), class = IOW_COST_SIZES; /* dev 0 read random 4 KiB */
	struct iow_series *s = bpf_map_lookup_elem(&series, &idx);
	__u64 now = bpf_ktime_get_ns();

	if (!s)
		return XDP_PASS;
	add(&s->bytes_rand, packed(4096, 1));
	add(&s->charged, packed(1, 1));
	s->cursor = now;
	count_hwq_completion(bpf_map_lookup_elem(&hwq_stats, &idx), now - 80000, now);
	sample_cost_class(class, idx, 1, 4096, 80000);
	/* Held 5 us before allocation by an rq-qos policy, not by io.max. */
	count_latency(s, now - 100000, now - 80000, now, 5000, 0);
	return XDP_PASS;
}

/*
 * Not attached: `iowarden bench-shards` runs it as completion_adds_bench.
 * The culprit account's part of one timed request: its record in this
 * CPU's ring (series slot 0, issued 80 us ago, 20 us in a scheduler).
 */
SEC("xdp")
int flight_log_bench(struct xdp_md *x)
{
	__u64 now = bpf_ktime_get_ns();

	flight_log_request(bpf_get_smp_processor_id(), 0, now - 80000, now, now - 100000);
	return XDP_PASS;
}

/* The floor of completion_adds_bench: BPF_PROG_RUN's own loop. */
SEC("xdp")
int empty_bench(struct xdp_md *x)
{
	return XDP_PASS;
}

/* Not attached: run on demand (BPF_PROG_RUN) by the tests. */
SEC("syscall")
int hist_bucket_selftest(struct iow_bucket_probe *p)
{
	/* Unrolled: the context may only be accessed at constant offsets. */
#pragma unroll
	for (int i = 0; i < IOW_SELFTEST_N; i++)
		p->bucket[i] = hist_bucket(p->ns[i]);
	return 0;
}

#endif /* IOWARDEN_BLOCK_RUN_ON_DEMAND_H */
