//! What iocost's model charges: the coefficients in vtime, exactly as the
//! kernel derives them, the price of what the BPF side counts (pages,
//! requests, random ones: bpf/block/cost.h), and the size classes.

use super::units::{PAGE_SIZE, SIZES, VTIME_PER_SEC};

/// DIV64_U64_ROUND_UP with the kernel's u64 wrap-around.
fn div_round_up(a: u64, b: u64) -> u64 {
    a.wrapping_add(b).wrapping_sub(1) / b
}

/// blk-iocost.c calc_lcoefs: (page, seqio, randio) in vtime.
pub fn calc_lcoefs(bps: u64, seqiops: u64, randiops: u64) -> (u64, u64, u64) {
    let mut page = 0;
    if bps != 0 {
        let bps_pages = div_round_up(bps, PAGE_SIZE);
        page = if bps_pages != 0 {
            div_round_up(VTIME_PER_SEC, bps_pages)
        } else {
            1
        };
    }
    let base = |iops: u64| {
        if iops == 0 {
            return 0;
        }
        let v = div_round_up(VTIME_PER_SEC, iops);
        v.saturating_sub(page)
    };
    (page, base(seqiops), base(randiops))
}

/// What the BPF side counts of the reads (or writes) the model charges:
/// the requests, the random ones among them, and their 4 KiB pages (at
/// least one each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charged {
    pub requests: u64,
    pub random: u64,
    pub pages: u64,
}

impl Charged {
    /// What was counted since `earlier` (the counts wrap).
    pub fn since(self, earlier: Charged) -> Charged {
        Charged {
            requests: self.requests.wrapping_sub(earlier.requests),
            random: self.random.wrapping_sub(earlier.random),
            pages: self.pages.wrapping_sub(earlier.pages),
        }
    }
}

/// Cost in vtime of what was counted: the kernel's
/// calc_vtime_cost_builtin summed over whole requests (a base cost per
/// request by pattern plus a cost per page), which is linear in the
/// counts, so pricing their sums is pricing each request.
pub fn price(lcoefs: &[u64; 6], write: bool, c: Charged) -> u64 {
    let o = if write { 3 } else { 0 };
    let sequential = c.requests.saturating_sub(c.random);
    c.pages
        .wrapping_mul(lcoefs[o])
        .wrapping_add(sequential.wrapping_mul(lcoefs[o + 1]))
        .wrapping_add(c.random.wrapping_mul(lcoefs[o + 2]))
}

/// Cost in vtime of one request of `bytes`.
pub fn request_cost(lcoefs: &[u64; 6], write: bool, random: bool, bytes: u64) -> u64 {
    let c = Charged {
        requests: 1,
        random: random as u64,
        pages: (bytes / PAGE_SIZE).max(1),
    };
    price(lcoefs, write, c)
}

/// Size class of a request of `bytes` (as the BPF side computes it).
pub fn size_class(bytes: u64) -> usize {
    let log2 = 63 - bytes.max(1).leading_zeros() as usize;
    log2.saturating_sub(12).min(SIZES - 1)
}

/// Lower bound of a size class in bytes (class 0 holds everything below 8 KiB).
pub fn size_class_bytes(class: usize) -> u64 {
    PAGE_SIZE << class
}
