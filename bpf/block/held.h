/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The throttle stage: how long a request's first bio waited from its
 * submission stamp to the request's allocation, and the part blk-throttle
 * (io.max) held it before that stamp (timed by throtl_held's fexit).
 * A part of iowarden.bpf.c, included there after the switches, tables
 * and add(): not a helper of other objects.
 */
#ifndef IOWARDEN_BLOCK_HELD_H
#define IOWARDEN_BLOCK_HELD_H

/* Bios blk-throttle holds, by address (see struct iow_held_bio). Sized to
 * one entry by the loader where fexit cannot attach. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, IOW_HELD_BIOS);
	__type(key, __u64);
	__type(value, struct iow_held_bio);
} held_bios SEC(".maps");

/* Kernels before 6.18 keep the bio's submission time in bi_issue, in the
 * low 51 bits (BIO_ISSUE_TIME_MASK) of ktime_get_ns(). */
struct bio_issue___old {
	__u64 value;
} __attribute__((preserve_access_index));

struct bio___old {
	struct bio_issue___old bi_issue;
} __attribute__((preserve_access_index));

#define BIO_ISSUE_TIME_MASK ((1ULL << 51) - 1)

/* The bio's submission stamp and the mask its clock wraps at; 0 without
 * one. */
static __always_inline __u64 bio_submitted(struct bio *bio, __u64 *mask)
{
	if (bpf_core_field_exists(bio->issue_time_ns)) {
		*mask = ~0ULL;
		return bio->issue_time_ns;
	}
	*mask = BIO_ISSUE_TIME_MASK;
	if (bpf_core_field_exists(((struct bio___old *)bio)->bi_issue))
		return ((struct bio___old *)bio)->bi_issue.value & BIO_ISSUE_TIME_MASK;
	return 0;
}

/* later - earlier on a clock wrapping at mask; 0 when earlier is in fact
 * later (a plug's cached time can precede the bio's stamp). */
static __always_inline __u64 elapsed(__u64 earlier, __u64 later, __u64 mask)
{
	__u64 d = (later - earlier) & mask;

	return d > (mask >> 1) ? 0 : d;
}

/*
 * How long blk-throttle held the bio before its submission stamp (0 when
 * it did not, or its program is not attached), forgetting the hold.
 */
static __always_inline __u64 io_max_hold(struct bio *bio, __u64 submitted, __u64 mask)
{
	__u64 k = (__u64)bio, hold = 0;
	struct iow_held_bio *h;

	if (!tables.held_bios_seen)
		return 0;
	h = bpf_map_lookup_elem(&held_bios, &k);
	if (!h)
		return 0;
	if (h->blkg == (__u64)bio->bi_blkg)
		hold = elapsed(h->since_ns & mask, submitted, mask);
	bpf_map_delete_elem(&held_bios, &k);
	return hold;
}

/*
 * How long the request's first bio waited from its submission until the
 * request was allocated at `start`, and in *io_max the part blk-throttle
 * held it (timed by throtl_held, which stamped it on entry). ~0 when the
 * bio carries no submission stamp.
 */
static __always_inline __u64 held_before(struct request *rq, __u64 start, __u64 *io_max)
{
	struct bio *bio = rq->bio;
	__u64 mask, submitted, held;

	*io_max = 0;
	if (!bio)
		return ~0ULL;
	submitted = bio_submitted(bio, &mask);
	if (!submitted)
		return ~0ULL;
	held = elapsed(submitted, start & mask, mask);
	*io_max = io_max_hold(bio, submitted, mask);
	return held + *io_max;
}

/*
 * blk-throttle's entry point returned: true when it queued the bio to
 * dispatch later (io.max). __blk_throtl_bio(bio) from 5.18 (called only
 * for cgroups with limits), blk_throtl_bio(bio) before (every bio): the
 * loader sets the target. fexit, not a tracepoint: there is none there;
 * loaded only where the kernel lets fexit attach.
 */
SEC("fexit/__blk_throtl_bio")
int BPF_PROG(throtl_held, struct bio *bio, bool queued)
{
	struct iow_held_bio h;
	__u64 k = (__u64)bio;

	if (!queued)
		return 0;
	h.since_ns = bpf_ktime_get_ns();
	h.blkg = (__u64)bio->bi_blkg;
	bpf_map_update_elem(&held_bios, &k, &h, BPF_ANY);
	if (!tables.held_bios_seen)
		tables.held_bios_seen = 1;
	return 0;
}

#endif /* IOWARDEN_BLOCK_HELD_H */
