//! A record's metrics declared once, beside its fields: [`metrics!`] lists
//! each counter (and each exported gauge) with the OpenMetrics family it
//! feeds. From that one list follow the record's [`Delta`] (counters
//! subtracted, everything else the later reading's) and its [`Families`],
//! which openmetrics/ writes with the labels of the record's domain. JSON
//! and protobuf follow from the field itself.
//!
//! [`Delta`]: super::core::Delta

/// How a family's samples are typed in OpenMetrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    Counter,
    Gauge,
}

/// A family's unit (its name's suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricUnit {
    Bytes,
    Seconds,
    Ratio,
    BytesPerSecond,
}

/// One OpenMetrics family fed by one value of each record of type `T`.
pub struct Family<T> {
    /// Name before the unit and `_total` suffixes.
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<MetricUnit>,
    pub kind: FamilyKind,
    /// The record's sample; None leaves the record out of this family.
    pub value: fn(&T) -> Option<f64>,
    /// The name a selection picks the family by (`--io-counters`'s
    /// "requests"), written `as "requests"` after the family's name; None
    /// where the family is always exported.
    pub select: Option<&'static str>,
}

/// The families a record feeds, in exposition order.
pub trait Families: Sized {
    fn families() -> Vec<Family<Self>>;
}

/// A field's value as a sample (None: not known, no sample).
pub trait Sample {
    fn sample(&self) -> Option<f64>;
}

macro_rules! sample_as_f64 {
    ($($t:ty),+) => {$(
        impl Sample for $t {
            fn sample(&self) -> Option<f64> {
                Some(*self as f64)
            }
        }
    )+};
}
sample_as_f64!(u64, u32, i64, i32, f64);

/// 1 for true.
impl Sample for bool {
    fn sample(&self) -> Option<f64> {
        Some(if *self { 1.0 } else { 0.0 })
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample(&self) -> Option<f64> {
        self.as_ref()?.sample()
    }
}

/// Declares a record's counters and exported gauges once:
///
/// ```ignore
/// metrics!(NvmeQueueCgroup {
///     counter commands => "iowarden_nvme_commands", "NVMe commands set up ...";
///     counter bytes => "iowarden_nvme_command" [Bytes], "Bytes of ...";
///     gauge inflight => "iowarden_nvme_inflight", "NVMe commands in flight ...";
///     counter small_commands;
/// });
/// ```
///
/// `counter F` is subtracted in a delta; a `gauge F` is the later reading's,
/// like every field not listed. `=> name [Unit], help` gives the field a
/// family; a closure after the help computes the sample from the record
/// instead of the field. Attributes (`#[cfg(test)]`) go before the kind.
/// A counter left out stays cumulative in a delta: model/delta_tests.rs
/// fails for it. `metrics!(T, families only { … })` declares only the
/// families, for a record whose [`Delta`] is written by hand or that has
/// none.
///
/// [`Delta`]: super::core::Delta
macro_rules! metrics {
    // `derived { ... }`: families computed from fields the first list
    // already has (a field is subtracted once, whatever it feeds).
    ($t:ty { $(
        $(#[$attr:meta])*
        $kind:ident $field:ident $(=> $name:literal $([$unit:ident])? $(as $sel:literal)?, $help:literal $(, $value:expr)?)?;
    )+ } $(derived { $(
        $dkind:ident $dfield:ident => $dname:literal $([$dunit:ident])? $(as $dsel:literal)?, $dhelp:literal, $dvalue:expr;
    )+ })?) => {
        impl $crate::model::core::Delta for $t {
            // Every field may be listed: then the update is empty.
            #[allow(clippy::needless_update)]
            fn delta(&self, earlier: &Self) -> Self {
                Self {
                    $($(#[$attr])* $field: $crate::model::metric::metrics!(
                        @subtract $kind, &self.$field, &earlier.$field),)+
                    ..self.clone()
                }
            }
        }
        $crate::model::metric::metrics!($t, families only { $(
            $(#[$attr])* $kind $field $(=> $name $([$unit])? $(as $sel)?, $help $(, $value)?)?;
        )+ $($(
            $dkind $dfield => $dname $([$dunit])? $(as $dsel)?, $dhelp, $dvalue;
        )+)? });
    };
    // A record whose Delta is written by hand (a mean recomputed over the
    // window) or that has none: only its families.
    ($t:ty, families only { $(
        $(#[$attr:meta])*
        $kind:ident $field:ident $(=> $name:literal $([$unit:ident])? $(as $sel:literal)?, $help:literal $(, $value:expr)?)?;
    )+ }) => {
        impl $crate::model::metric::Families for $t {
            // Pushed one by one: a family may carry #[cfg]; none for
            // records whose counters feed no family of their own.
            #[allow(unused_mut, clippy::vec_init_then_push)]
            fn families() -> Vec<$crate::model::metric::Family<Self>> {
                let mut families = Vec::new();
                $($crate::model::metric::metrics!(@family families, $t, [$(#[$attr])*] $kind $field
                    $(=> $name $([$unit])? $(as $sel)?, $help $(, $value)?)?);)+
                families
            }
        }
    };
    (@subtract counter, $now:expr, $earlier:expr) => {
        $crate::model::core::Delta::delta($now, $earlier)
    };
    (@subtract gauge, $now:expr, $earlier:expr) => {
        ::std::clone::Clone::clone($now)
    };
    (@family $v:ident, $t:ty, [$(#[$attr:meta])*] $kind:ident $field:ident) => {};
    (@family $v:ident, $t:ty, [$(#[$attr:meta])*] $kind:ident $field:ident
        => $name:literal $([$unit:ident])? $(as $sel:literal)?, $help:literal $(, $value:expr)?) => {
        $(#[$attr])*
        $v.push($crate::model::metric::Family {
            name: $name,
            help: $help,
            unit: $crate::model::metric::metrics!(@unit $($unit)?),
            kind: $crate::model::metric::metrics!(@kind $kind),
            value: $crate::model::metric::metrics!(@value $t, $field $(, $value)?),
            select: $crate::model::metric::metrics!(@select $($sel)?),
        });
    };
    (@select) => { None };
    (@select $sel:literal) => { Some($sel) };
    (@kind counter) => { $crate::model::metric::FamilyKind::Counter };
    (@kind gauge) => { $crate::model::metric::FamilyKind::Gauge };
    (@unit) => { None };
    (@unit $unit:ident) => { Some($crate::model::metric::MetricUnit::$unit) };
    (@value $t:ty, $field:ident) => {
        |r: &$t| $crate::model::metric::Sample::sample(&r.$field)
    };
    (@value $t:ty, $field:ident, $value:expr) => { $value };
}
pub(crate) use metrics;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::core::Delta;

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Rec {
        label: u32,
        done: u64,
        level: i64,
        maybe: Option<f64>,
        quiet: u64,
    }

    metrics!(Rec {
        counter done => "t_done" as "done", "Done";
        gauge level => "t_level" [Seconds], "Level";
        counter maybe => "t_maybe_doubled", "Doubled", |r: &Rec| r.maybe.map(|m| m * 2.0);
        counter quiet;
    });

    #[test]
    fn one_list_gives_the_delta_and_the_families() {
        let at = |done, level, maybe, quiet| Rec {
            label: 7,
            done,
            level,
            maybe,
            quiet,
        };
        let d = at(10, -3, Some(4.0), 9).delta(&at(4, 5, Some(1.5), 2));
        assert_eq!(
            d,
            at(6, -3, Some(2.5), 7),
            "counters subtracted, gauges kept"
        );
        let families = Rec::families();
        let names: Vec<_> = families.iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            ["t_done", "t_level", "t_maybe_doubled"],
            "quiet has none"
        );
        let r = at(3, -2, None, 1);
        let values: Vec<_> = families.iter().map(|f| (f.value)(&r)).collect();
        assert_eq!(values, [Some(3.0), Some(-2.0), None]);
        assert_eq!(families[1].unit, Some(MetricUnit::Seconds));
        assert_eq!(families[1].kind, FamilyKind::Gauge);
        let select: Vec<_> = families.iter().map(|f| f.select).collect();
        assert_eq!(select, [Some("done"), None, None]);
    }
}
