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

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8)  { v >>= 8;  r += 8; }
	if (v >> 4)  { v >>= 4;  r += 4; }
	if (v >> 2)  { v >>= 2;  r += 2; }
	if (v >> 1)  { r += 1; }
	return r;
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
