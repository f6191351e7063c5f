//! Layout of the BPF latency histograms (log-linear in microseconds), taken
//! from the constants of bpf/iowarden.h via the skeleton.

use crate::skel::types::{iow_const, iow_stage};

pub const SUB_BITS: u32 = iow_const::IOW_HIST_SUB_BITS.0;
pub const NBUCKETS: usize = iow_const::IOW_HIST_BUCKETS.0 as usize;
pub const NSTAGES: usize = iow_const::IOW_NR_STAGES.0 as usize;
/// The total stage's index: counted whenever latency is.
pub const TOTAL_STAGE: usize = iow_stage::IOW_STAGE_TOTAL.0 as usize;
pub const THROTTLE_STAGE: usize = iow_stage::IOW_STAGE_THROTTLE.0 as usize;

/// Lower bound of bucket `i`, in microseconds.
pub fn lower_us(i: usize) -> u64 {
    let n = 1usize << SUB_BITS;
    if i < n {
        return i as u64;
    }
    let p = (i >> SUB_BITS) as u32 + SUB_BITS - 1;
    let sub = (i & (n - 1)) as u64;
    (n as u64 + sub) << (p - SUB_BITS)
}

/// Lower bounds of every bucket, in seconds.
pub fn lower_bounds_seconds() -> Vec<f64> {
    (0..NBUCKETS).map(|i| lower_us(i) as f64 / 1e6).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_strictly_increasing_and_log_linear() {
        let b: Vec<u64> = (0..NBUCKETS).map(lower_us).collect();
        assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        assert_eq!(&b[..9], &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
        // From 8 us on, four buckets per power of two.
        assert_eq!(&b[8..13], &[8, 10, 12, 14, 16]);
        // Every power of two from 4 us up is a bucket boundary.
        for p in 2..22 {
            assert!(b.contains(&(1u64 << p)), "2^{p} us");
        }
        // The last bucket starts above 7 s: "up to seconds".
        assert!(b[NBUCKETS - 1] >= 7_000_000);
        // Relative width of a bucket never exceeds 25% above 4 us.
        for w in b[4..].windows(2) {
            assert!((w[1] - w[0]) as f64 / w[0] as f64 <= 0.25 + 1e-9);
        }
    }
}
