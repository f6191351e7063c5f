//! The loader's histogram layout, for the encoders' unit tests: 1 us
//! buckets below 4 us, then 4 per power of two, 88 in all.

pub(crate) fn bounds() -> Vec<f64> {
    (0..88usize)
        .map(|i| {
            if i < 4 {
                i as u64
            } else {
                (4 + (i % 4) as u64) << (i / 4 - 1)
            }
        })
        .map(|us| us as f64 / 1e6)
        .collect()
}
