/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF-side helpers shared by the BPF objects (not read by Rust): hashing,
 * log2, and the open-addressing tables of u64 keys that series claim with
 * one compare-and-swap (or, before 5.12, one hash-map insert).
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
 * Takes a free (0) entry for k. With `cas` (a compile-time constant) by
 * compare-and-swap; without it, for kernels whose BPF has no
 * compare-and-swap (before 5.12: their verifier refuses the instruction
 * anywhere in a program, even in a branch a load-time switch makes dead),
 * by inserting k under `claim_id` into the hash map `claims` with
 * BPF_NOEXIST, which the kernel performs atomically under the bucket lock;
 * the winner then stores k in the entry. User space frees such an entry
 * by zeroing it first and deleting its claim second. True when the entry
 * is k's.
 */
#define take_entry(entry, k, claims, claim_id, cas)                                 \
	({                                                                           \
		bool __mine;                                                         \
		if (cas) {                                                           \
			__typeof__(*(entry)) __cur =                                 \
				__sync_val_compare_and_swap((entry), 0, (k));        \
			__mine = __cur == 0 || __cur == (k);                         \
		} else {                                                             \
			__mine = claim_by_insert((claims), (claim_id), (k));         \
			if (__mine)                                                  \
				*(entry) = (k);                                      \
		}                                                                    \
		__mine;                                                              \
	})

static __always_inline bool claim_by_insert(void *claims, __u32 claim_id, __u64 k)
{
	__u64 *owner;

	if (!claims)
		return false;
	if (bpf_map_update_elem(claims, &claim_id, &k, BPF_NOEXIST) == 0)
		return true;
	owner = bpf_map_lookup_elem(claims, &claim_id);
	return owner && *owner == k;
}

/*
 * Slot of key k (never 0) in keys[cap] (0 = free; cap a power of two, a
 * constant), looking at `probes` slots from k's hash and claiming the first
 * free one on first sight (take_entry: `claims`, the slot number as claim
 * id, and `cas` as there). `mask` narrows the table to the slots in use (a
 * load-time knob; cap - 1 for all). Returns cap when the window is full.
 * A CPU whose free slot another CPU just took for another new key looks
 * again (up to IOW_CLAIM_ROUNDS times): giving up there would drop the
 * event as if the table were full. Two CPUs racing on one new key may
 * still claim two slots; user space merges them.
 */
#define IOW_CLAIM_ROUNDS 4
static __always_inline __u32 claim_slot(__u64 *keys, __u32 cap, __u32 mask,
					__u32 probes, __u64 k, void *claims, const bool cas)
{
	__u32 start = hash64(k) >> 32;

	for (int round = 0; round < IOW_CLAIM_ROUNDS; round++) {
		__u32 free = cap;

		for (int i = 0; i < probes; i++) {
			__u32 idx = (start + i) & mask & (cap - 1);
			__u64 cur = keys[idx];

			if (cur == k)
				return idx;
			if (cur == 0 && free == cap)
				free = idx;
		}
		if (free == cap)
			return cap;
		if (take_entry(&keys[free], k, claims, free, cas))
			return free;
	}
	return cap;
}

#endif /* IOWARDEN_TABLE_BPF_H */
