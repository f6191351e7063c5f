//! Writing one metric family: the counter and gauge helpers every domain's
//! encoder uses, and the classic buckets of latency histograms.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::model::{Families, Family, FamilyKind, Histogram, MetricUnit};

/// Label (name, value) pairs of one sample.
pub(crate) type Labels = Vec<(String, String)>;

/// Rows of a family: each sample's labels and value.
pub(crate) type Rows = Vec<(Labels, f64)>;

/// Labels from (name, value) pairs.
pub(crate) fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A counter family; nothing when there are no rows.
pub(crate) fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    rows: &[(Labels, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
    for (l, v) in rows {
        d.encode_family(l)?
            .encode_counter::<Labels, f64, f64>(v, None)?;
    }
    Ok(())
}

/// A gauge family; nothing when there are no rows.
pub(crate) fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    rows: &[(Labels, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
    for (l, v) in rows {
        d.encode_family(l)?.encode_gauge(v)?;
    }
    Ok(())
}

/// The families the model declares for `T` (model/metric.rs), one sample
/// per record that has a value, each with its labels.
pub(crate) fn encode_families<T: Families>(
    enc: &mut DescriptorEncoder,
    records: &[(Labels, &T)],
) -> std::fmt::Result {
    for f in &T::families() {
        encode_family(enc, f, records)?;
    }
    Ok(())
}

/// One declared family of `T`; nothing when no record has a value.
pub(crate) fn encode_family<T>(
    enc: &mut DescriptorEncoder,
    f: &Family<T>,
    records: &[(Labels, &T)],
) -> std::fmt::Result {
    let rows: Vec<(&Labels, f64)> = records
        .iter()
        .filter_map(|(l, r)| Some((l, (f.value)(r)?)))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let kind = match f.kind {
        FamilyKind::Counter => MetricType::Counter,
        FamilyKind::Gauge => MetricType::Gauge,
    };
    let unit = f.unit.map(unit_of);
    let mut d = enc.encode_descriptor(f.name, f.help, unit.as_ref(), kind)?;
    for (l, v) in rows {
        let mut sample = d.encode_family(l)?;
        match f.kind {
            FamilyKind::Counter => sample.encode_counter::<Labels, f64, f64>(&v, None)?,
            FamilyKind::Gauge => sample.encode_gauge(&v)?,
        }
    }
    Ok(())
}

/// The unit as OpenMetrics spells it.
pub(crate) fn unit_of(u: MetricUnit) -> Unit {
    match u {
        MetricUnit::Bytes => Unit::Bytes,
        MetricUnit::Seconds => Unit::Seconds,
        MetricUnit::Ratio => Unit::Other("ratio".into()),
        MetricUnit::BytesPerSecond => Unit::Other("bytes_per_second".into()),
    }
}

/// Upper bounds of the classic histogram buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicBuckets {
    /// Every power of two of the BPF layout, 1 us to 4 s (24 buckets with +Inf).
    PowersOfTwo,
    /// Powers of four from 4 us to 1.05 s (11 buckets with +Inf).
    PowersOfFour,
}

impl ClassicBuckets {
    /// Whether a bucket boundary (in seconds) closes a classic bucket.
    fn is_bound(self, seconds: f64) -> bool {
        let us = (seconds * 1e6).round() as u64;
        match self {
            ClassicBuckets::PowersOfTwo => us > 0 && us.is_power_of_two(),
            ClassicBuckets::PowersOfFour => {
                us.is_power_of_two()
                    && us.trailing_zeros().is_multiple_of(2)
                    && (4..=1 << 20).contains(&us)
            }
        }
    }
}

/// Collapses the fine log-linear buckets to the classic boundaries, keeping
/// Prometheus cardinality sane. Returns (upper bound, count in bucket) pairs,
/// non-cumulative, ending with +Inf.
pub fn collapse_buckets(
    h: &Histogram,
    lower_bounds: &[f64],
    classic: ClassicBuckets,
) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut acc = 0u64;
    for (i, &c) in h.counts.iter().enumerate() {
        // Bucket i ends where bucket i+1 starts; close a group there if that is a classic bound.
        match lower_bounds.get(i + 1) {
            Some(&next) if classic.is_bound(next) => {
                out.push((next, acc + c));
                acc = 0;
            }
            _ => acc += c,
        }
    }
    out.push((f64::INFINITY, acc));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_layout::bounds;

    #[test]
    fn collapses_to_power_of_two_bounds() {
        let b = bounds();
        let mut counts = vec![0u64; 88];
        counts[0] = 1; // [0,1us)
        counts[9] = 5; // [10,12us) -> le 16us
        counts[87] = 2; // open last bucket -> +Inf
        let h = Histogram {
            counts,
            sum_seconds: 1.0,
        };
        let c = collapse_buckets(&h, &b, ClassicBuckets::PowersOfTwo);
        assert_eq!(c.iter().map(|x| x.1).sum::<u64>(), 8);
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0), "bounds increase");
        assert_eq!(c.last().unwrap(), &(f64::INFINITY, 2));
        assert!(
            c.iter()
                .any(|&(le, n)| (le - 16e-6).abs() < 1e-12 && n == 5),
            "{c:?}"
        );
        assert!(c
            .iter()
            .all(|&(le, _)| le.is_infinite() || ((le * 1e6).round() as u64).is_power_of_two()));
    }
}
