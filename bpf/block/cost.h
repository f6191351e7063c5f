/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What iocost's linear model charges each completed read and write, as
 * facts user space prices with the device's model (pages, requests, and
 * whether each is random: loader/src/costmodel/charge.rs), and the cost
 * classes its refit reads (struct iow_cost_class). The model itself is
 * not here: the price is linear in these sums, so applying it at each
 * poll charges what applying it per request would, for less per request.
 * A part of iowarden.bpf.c, included there after the switches, tables
 * and add(): not a helper of other objects.
 */
#ifndef IOWARDEN_BLOCK_COST_H
#define IOWARDEN_BLOCK_COST_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, IOW_COST_CLASSES);
	__type(key, __u32);
	__type(value, struct iow_cost_class);
} cost_classes SEC(".maps");

/* Cost class size of a request: log2 of its bytes above 4 KiB (0 for
 * <= 4 KiB). */
static __always_inline __u32 size_class(__u32 nr_bytes)
{
	__u32 p = log2_u64(nr_bytes);

	return p > 12 ? p - 12 : 0;
}

/*
 * Counts what iocost's linear model charges a completed read or write, as
 * blk-iocost.c calc_vtime_cost_builtin charges a bio: a base cost by
 * read/write and pattern plus a cost per 4 KiB page (at least one). The
 * request is random when it starts more than IOW_COST_RANDIO_PAGES pages
 * from where the series' previous one ended, sequential otherwise (and when
 * there is no previous one). The kernel charges bios at submission; this
 * counts whole requests at completion (a merged bio pays no base cost in
 * the kernel either). Returns the cost class of the request in
 * cost_classes (before sharding), or IOW_COST_CLASSES when not charged;
 * *pages_out receives its pages and *rand_out whether it is random
 * (counted with the bytes, in one add).
 */
static __always_inline __u32 count_charge(struct request *rq, struct iow_series *s, __u64 key,
					  __u32 dev, __u32 nr_bytes, __u64 *pages_out,
					  __u32 *rand_out)
{
	__u32 op = (key >> IOW_KEY_OP_SHIFT) & 3;
	__u64 sector, prev, seek = 0, pages;
	__u32 rand, size;

	/* iocost charges reads and writes only: not write-zeroes or secure
	 * erase, which rq_op() files under writes. */
	__u32 req_op = rq->cmd_flags & 0xff; /* REQ_OP_MASK */

	if (op > IOW_OP_WRITE || !nr_bytes || (req_op != REQ_OP_READ && req_op != REQ_OP_WRITE))
		return IOW_COST_CLASSES;
	/* A plain store: two CPUs of one shard racing on it only misjudge
	 * one request's pattern, as two bios racing in the kernel would. */
	sector = rq->__sector;
	prev = s->cursor;
	if (prev)
		seek = (sector > prev ? sector - prev : prev - sector) >> 3;
	rand = seek > IOW_COST_RANDIO_PAGES;
	s->cursor = sector + (nr_bytes >> 9);
	pages = nr_bytes >> 12;
	if (!pages)
		pages = 1;
	*pages_out = pages;
	*rand_out = rand;
	add(&s->charged, packed(pages, 1));
	size = size_class(nr_bytes);
	if (size >= IOW_COST_SIZES)
		size = IOW_COST_SIZES - 1;
	return ((dev * 2 + op) * 2 + rand) * IOW_COST_SIZES + size;
}

/* Adds one measured request to its cost class (what the refit reads). */
static __always_inline void sample_cost_class(__u32 class, __u32 sh, __u64 pages, __u32 nr_bytes,
					      __u64 device_ns)
{
	__u32 idx = class * (shard_mask + 1) + sh;
	struct iow_cost_class *c = bpf_map_lookup_elem(&cost_classes, &idx);

	if (!c)
		return;
	add(&c->bytes_ios, packed(nr_bytes, 1));
	add(&c->device_ns, device_ns);
	add(&c->pages, pages);
}

#endif /* IOWARDEN_BLOCK_COST_H */
