//! What the BPF side charges a request: the model's coefficients in vtime,
//! exactly as the kernel derives them, and the size classes.

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

/// Cost in vtime of one request as the BPF side charges it (the kernel's
/// calc_vtime_cost_builtin for a whole request).
pub fn request_cost(lcoefs: &[u64; 6], write: bool, random: bool, bytes: u64) -> u64 {
    let o = if write { 3 } else { 0 };
    let pages = (bytes / PAGE_SIZE).max(1);
    lcoefs[o + 1 + random as usize] + pages * lcoefs[o]
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
