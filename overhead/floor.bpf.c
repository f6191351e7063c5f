// SPDX-License-Identifier: GPL-2.0
// The floor `make bench` measures under iowarden's programs: a tp_btf
// program that returns at once on each block tracepoint iowarden or
// biolatency attaches to. What one costs a run is the kernel's dispatch
// plus BPF stats' own clock reads; what a tool's program costs above it is
// its body. No headers: nothing is read.
#define SEC(name) __attribute__((section(name), used))

SEC("tp_btf/block_rq_insert")
int block_rq_insert(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_issue")
int block_rq_issue(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_complete")
int block_rq_complete(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int block_rq_requeue(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_merge")
int block_rq_merge(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
