// SPDX-License-Identifier: GPL-2.0
// The floor `make bench` measures under iowarden's programs: a tp_btf
// program that returns at once on each block tracepoint a per-request
// program attaches to (iowarden, biolatency). What one costs a run is the
// kernel's dispatch plus BPF stats' own clock reads; what iowarden's
// program costs above it is iowarden's body. No headers: nothing is read.
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

char LICENSE[] SEC("license") = "GPL";
