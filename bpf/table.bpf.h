/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF-side helpers shared by the BPF objects (not read by Rust): hashing,
 * log2, and the open-addressing tables of u64 keys that series claim with
 * one compare-and-swap.
 */
#ifndef IOWARDEN_TABLE_BPF_H
#define IOWARDEN_TABLE_BPF_H

static __always_inline __u64 hash64(__u64 v)
{
	return v * 0x9E3779B97F4A7C15ULL;
}

/* floor(log2(v)) for 0 < v < 2^63 (0 for 0), without branches: each step
 * shifts by (v > mask) * width, the comparison taken from the sign of
 * mask - v. Branches here would multiply the verifier's states. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u64 r, s;

	r = ((0xffffffffULL - v) >> 63) << 5; v >>= r;
	s = ((0xffffULL - v) >> 63) << 4; v >>= s; r |= s;
	s = ((0xffULL - v) >> 63) << 3; v >>= s; r |= s;
	s = ((0xfULL - v) >> 63) << 2; v >>= s; r |= s;
	s = ((0x3ULL - v) >> 63) << 1; v >>= s; r |= s;
	return r | (v >> 1);
}

/*
 * Slot of key k (never 0) in keys[cap] (0 = free; cap a power of two, a
 * constant), looking at `probes` slots from k's hash and claiming the first
 * free one on first sight. `mask` narrows the table to the slots in use (a
 * load-time knob; cap - 1 for all). Returns cap when the window is full.
 * Two CPUs racing on a new key may claim two slots; user space merges them.
 */
static __always_inline __u32 claim_slot(__u64 *keys, __u32 cap, __u32 mask,
					__u32 probes, __u64 k)
{
	__u32 start = hash64(k) >> 32;
	__u32 free = cap;

	for (int i = 0; i < probes; i++) {
		__u32 idx = (start + i) & mask & (cap - 1);
		__u64 cur = keys[idx];

		if (cur == k)
			return idx;
		if (cur == 0 && free == cap)
			free = idx;
	}
	if (free < cap) {
		__u64 cur = __sync_val_compare_and_swap(&keys[free], 0, k);

		if (cur == 0 || cur == k)
			return free;
	}
	return cap;
}

#endif /* IOWARDEN_TABLE_BPF_H */
