/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The culprit account's log: the completion program writes each request
 * whose device time it measured into its CPU's ring (struct
 * iow_flight_rec), and user space replays every device's requests in time
 * order to split each one's time by whom it waited behind
 * (loader/src/culprits/). The request already carries its allocation and
 * issue stamps, so nothing runs at issue, and nothing here is written by
 * more than one CPU: a record and its CPU's count, on lines of their own.
 * A part of iowarden.bpf.c, included there after the switches and tables:
 * not a helper of other objects.
 */
#ifndef IOWARDEN_BLOCK_CULPRITS_H
#define IOWARDEN_BLOCK_CULPRITS_H

/* Records per CPU: 1 << flight_ring_bits (set by the loader). */
const volatile __u32 flight_ring_bits = IOW_FLIGHT_RING_MIN_BITS;

/* CPU c's ring at [c << flight_ring_bits, (c + 1) << flight_ring_bits).
 * Sized by the loader (possible CPUs x ring), one entry when off. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iow_flight_rec);
} flight_log SEC(".maps");

/* One per possible CPU (set by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iow_flight_head);
} flight_heads SEC(".maps");

static __always_inline __u64 sat32(__u64 v)
{
	return v < 0xffffffffULL ? v : 0xffffffffULL;
}

/*
 * Logs, on CPU `cpu` (this one), a request of series `slot` issued at
 * `issued`, completed at `now`;
 * `queued` its allocation where it went through an I/O scheduler (0: it
 * did not). The kernel never runs this program nested in itself on one
 * CPU, so the CPU's ring and count have one writer, and plain stores do:
 * the record is tagged with its lap, so user space, which reads the count
 * before the records, can tell a record whose stores do not show yet.
 */
static __always_inline void flight_log_request(__u32 cpu, __u32 slot, __u64 issued, __u64 now,
					       __u64 queued)
{
	struct iow_flight_head *h = bpf_map_lookup_elem(&flight_heads, &cpu);
	struct iow_flight_rec *r;
	__u64 n, lap;
	__u32 idx;

	if (!h)
		return;
	n = h->logged;
	idx = (cpu << flight_ring_bits) | (__u32)(n & ((1ULL << flight_ring_bits) - 1));
	r = bpf_map_lookup_elem(&flight_log, &idx);
	if (!r)
		return;
	/* From 1: a ring's untouched entries (zeros) are no lap's. */
	lap = ((n >> flight_ring_bits) + 1) & 3;
	r->done_slot = (now & ((1ULL << IOW_FLIGHT_DONE_BITS) - 1)) |
		       ((__u64)slot << IOW_FLIGHT_DONE_BITS) |
		       (lap << (IOW_FLIGHT_DONE_BITS + IOW_FLIGHT_SLOT_BITS));
	r->device_queue_ns =
		sat32(now - issued) | (queued && queued <= issued ? sat32(issued - queued) << 32 : 0);
	/* The record's stores before the count's, in the compiled program. */
	barrier();
	h->logged = n + 1;
}

#endif /* IOWARDEN_BLOCK_CULPRITS_H */
