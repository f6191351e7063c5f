//! Prometheus native (exponential-bucket) histograms from the BPF
//! log-linear buckets.
//!
//! The BPF layout has 1 us buckets below 4 us, then splits every power of two
//! linearly into 4 (bucket ratios hi/lo between 8/7 and 5/4). Native bucket
//! boundaries are powers of 2^(2^-schema), so linear sub-buckets cannot align
//! with them for any schema. Schema 3 (ratio 2^(1/8) ~ 1.0905) is the
//! coarsest one whose buckets are narrower than every BPF bucket: each BPF
//! bucket goes, whole, into the native bucket holding its geometric midpoint,
//! distinct BPF buckets land in distinct native buckets (no resolution lost),
//! and that native bucket lies inside the BPF bucket widened to its
//! neighbours (the error bound: one BPF bucket). The mapping is fixed, so
//! every native bucket count only grows, as Prometheus requires.
//! The [0, 1 us) bucket is the zero bucket (threshold 1 us).

use crate::model::Histogram;
use crate::proto;

/// Native histogram schema iowarden exports.
pub const NATIVE_SCHEMA: i32 = 3;

/// Index of the native bucket (lower exclusive, upper inclusive) holding `v` > 0.
pub fn native_index(v: f64) -> i32 {
    (v.log2() * f64::from(1u32 << NATIVE_SCHEMA)).ceil() as i32
}

/// Upper bound of native bucket `idx`.
pub fn native_upper_bound(idx: i32) -> f64 {
    (f64::from(idx) / f64::from(1u32 << NATIVE_SCHEMA)).exp2()
}

/// The value whose native bucket receives BPF bucket `i`'s count: its
/// geometric midpoint, or the lower bound of the open last bucket.
fn representative(lower_bounds: &[f64], i: usize) -> f64 {
    match lower_bounds.get(i + 1) {
        Some(&hi) => (lower_bounds[i] * hi).sqrt(),
        None => lower_bounds[i],
    }
}

/// (native index, count) of every non-empty BPF bucket above the zero
/// bucket, in increasing index order; equal indices merged.
fn native_counts(h: &Histogram, lower_bounds: &[f64]) -> Vec<(i32, u64)> {
    let mut out: Vec<(i32, u64)> = Vec::new();
    for (i, &c) in h.counts.iter().enumerate().skip(1) {
        if c == 0 || i >= lower_bounds.len() {
            continue;
        }
        let idx = native_index(representative(lower_bounds, i));
        match out.last_mut() {
            Some((last, n)) if *last == idx => *n += c,
            _ => out.push((idx, c)),
        }
    }
    out
}

/// Spans and count deltas, the native wire form of sparse buckets.
fn spans_and_deltas(counts: &[(i32, u64)]) -> (Vec<proto::BucketSpan>, Vec<i64>) {
    let mut spans: Vec<proto::BucketSpan> = Vec::new();
    let mut deltas = Vec::with_capacity(counts.len());
    let mut prev: Option<(i32, u64)> = None;
    for &(idx, c) in counts {
        match prev {
            Some((p, _)) if idx == p + 1 => {
                let last = spans.last_mut().expect("a span is open");
                last.length = Some(last.length() + 1);
            }
            Some((p, _)) => spans.push(span(idx - p - 1, 1)),
            None => spans.push(span(idx, 1)),
        }
        deltas.push(c as i64 - prev.map_or(0, |(_, n)| n as i64));
        prev = Some((idx, c));
    }
    if spans.is_empty() {
        // No observations: a no-op span still marks the histogram native.
        spans.push(span(0, 0));
    }
    (spans, deltas)
}

fn span(offset: i32, length: u32) -> proto::BucketSpan {
    proto::BucketSpan {
        offset: Some(offset),
        length: Some(length),
    }
}

/// One BPF histogram as a native protobuf histogram (no classic buckets).
pub fn native_histogram(h: &Histogram, lower_bounds: &[f64]) -> proto::Histogram {
    let (positive_span, positive_delta) = spans_and_deltas(&native_counts(h, lower_bounds));
    proto::Histogram {
        sample_count: Some(h.count()),
        sample_sum: Some(h.sum_seconds),
        schema: Some(NATIVE_SCHEMA),
        // The BPF [0, 1 us) bucket.
        zero_threshold: Some(lower_bounds.get(1).copied().unwrap_or(1e-6)),
        zero_count: Some(h.counts.first().copied().unwrap_or(0)),
        positive_span,
        positive_delta,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_layout::bounds;

    #[test]
    fn every_bpf_bucket_has_its_own_native_bucket_within_its_neighbours() {
        let b = bounds();
        let mut last = i32::MIN;
        for i in 1..b.len() {
            let idx = native_index(representative(&b, i));
            assert!(
                idx > last,
                "BPF buckets {} and {i} share native {idx}",
                i - 1
            );
            last = idx;
            let (lo, hi) = (native_upper_bound(idx - 1), native_upper_bound(idx));
            // Within the BPF bucket widened to its neighbours.
            let below = b[i - 1];
            let above = b.get(i + 2).copied().unwrap_or(f64::INFINITY);
            assert!(
                lo >= below && hi <= above,
                "bucket {i}: native ({lo}, {hi}]"
            );
            // And it overlaps the BPF bucket itself.
            let bpf_hi = b.get(i + 1).copied().unwrap_or(f64::INFINITY);
            assert!(lo < bpf_hi && hi > b[i], "bucket {i}: native ({lo}, {hi}]");
        }
    }

    #[test]
    fn schema_2_would_merge_bpf_buckets() {
        // Why not a coarser schema: at 2^(1/4) two BPF buckets share one.
        let b = bounds();
        let idx2 = |v: f64| (v.log2() * 4.0).ceil() as i32;
        let merged = (1..b.len() - 1)
            .any(|i| idx2(representative(&b, i)) == idx2(representative(&b, i + 1)));
        assert!(merged);
    }

    #[test]
    fn counts_spans_and_deltas_round_trip() {
        let b = bounds();
        let mut counts = vec![0u64; 88];
        counts[0] = 2; // zero bucket
        counts[9] = 5; // [10, 12) us
        counts[10] = 3; // [12, 14) us: adjacent native bucket?
        counts[40] = 7;
        counts[87] = 1; // open last bucket
        let h = Histogram {
            counts,
            sum_seconds: 1.5,
        };
        let n = native_histogram(&h, &b);
        assert_eq!(n.sample_count(), 18);
        assert_eq!(n.zero_count(), 2);
        assert_eq!(n.zero_threshold(), 1e-6);
        assert_eq!(n.schema(), 3);
        // Expand spans and deltas back to (index, count).
        let mut got = Vec::new();
        let (mut idx, mut count) = (0i32, 0i64);
        let mut deltas = n.positive_delta.iter();
        for (k, s) in n.positive_span.iter().enumerate() {
            idx = if k == 0 {
                s.offset()
            } else {
                idx + 1 + s.offset()
            };
            for j in 0..s.length() {
                if j > 0 {
                    idx += 1;
                }
                count += deltas.next().unwrap();
                got.push((idx, count as u64));
            }
        }
        let want: Vec<(i32, u64)> = [9usize, 10, 40, 87]
            .iter()
            .map(|&i| (native_index(representative(&b, i)), h.counts[i]))
            .collect();
        assert_eq!(got, want);
        // 10..12 us holds 11 us: native bucket (2^(27/8), 2^(28/8)] us scaled to seconds.
        assert!(
            native_upper_bound(want[0].0 - 1) < 11e-6 && 11e-6 <= native_upper_bound(want[0].0)
        );
    }

    #[test]
    fn empty_histogram_is_still_native() {
        let n = native_histogram(&Histogram::default(), &bounds());
        assert_eq!(n.sample_count(), 0);
        assert_eq!(n.positive_span.len(), 1);
        assert_eq!(n.positive_span[0].length(), 0);
        assert!(n.zero_threshold() > 0.0);
    }
}
