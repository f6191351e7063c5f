//! How far back the replay must wait: a request is logged only when it
//! completes, so a span can be replayed once every request that was in
//! flight or queued in it has completed. No request is known until then,
//! so the wait follows the longest lives (allocation or issue to
//! completion) seen lately: the horizon trails the drain by four times the
//! longest life of the last two seconds and 50 ms more, within [MIN_LAG,
//! MAX_LAG], which covers lives growing fourfold at once (a burst beside a
//! victim). A request that outlives the horizon is logged too late for
//! its earliest part to be split (the replay counts it untold).

/// The least and the most the horizon trails the drain by.
pub const MIN_LAG_NS: u64 = 100_000_000;
pub const MAX_LAG_NS: u64 = 1_000_000_000;
/// The span lives are remembered over, in buckets.
const BUCKET_NS: u64 = 250_000_000;
const BUCKETS: usize = 8;

/// The longest lives seen lately, by time bucket.
#[derive(Debug, Default, Clone)]
pub struct Horizon {
    /// (bucket number, longest life in it).
    longest: [(u64, u64); BUCKETS],
}

impl Horizon {
    /// A request that lived `life_ns` was seen at `now`.
    pub fn saw(&mut self, now: u64, life_ns: u64) {
        let b = now / BUCKET_NS;
        let slot = &mut self.longest[(b % BUCKETS as u64) as usize];
        if slot.0 != b {
            *slot = (b, 0);
        }
        slot.1 = slot.1.max(life_ns);
    }

    /// How far behind `now` the replay may run.
    pub fn lag(&self, now: u64) -> u64 {
        let b = now / BUCKET_NS;
        let longest = self
            .longest
            .iter()
            .filter(|(at, _)| b.saturating_sub(*at) < BUCKETS as u64)
            .map(|&(_, l)| l)
            .max()
            .unwrap_or(0);
        (4 * longest + 50_000_000).clamp(MIN_LAG_NS, MAX_LAG_NS)
    }

    /// The instant up to which the replay may run at `now`.
    pub fn at(&self, now: u64) -> u64 {
        now.saturating_sub(self.lag(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn trails_by_the_longest_recent_life_within_bounds() {
        let mut h = Horizon::default();
        let t = 100 * BUCKET_NS;
        assert_eq!(h.lag(t), MIN_LAG_NS, "nothing seen");
        h.saw(t, 100_000);
        assert_eq!(h.lag(t), MIN_LAG_NS, "short lives: the least lag");
        h.saw(t + 1, 40 * MS);
        assert_eq!(h.lag(t + 1), 210 * MS);
        assert_eq!(h.at(t + 1), t + 1 - 210 * MS);
        h.saw(t + 2, 5_000 * MS);
        assert_eq!(h.lag(t + 2), MAX_LAG_NS);
    }

    #[test]
    fn forgets_lives_older_than_two_seconds() {
        let mut h = Horizon::default();
        let t = 100 * BUCKET_NS;
        h.saw(t, 200 * MS);
        assert_eq!(
            h.lag(t + 7 * BUCKET_NS),
            850 * MS,
            "still within the buckets"
        );
        h.saw(t + 8 * BUCKET_NS, MS);
        assert_eq!(
            h.lag(t + 8 * BUCKET_NS),
            MIN_LAG_NS,
            "its bucket was taken over"
        );
        let mut h = Horizon::default();
        h.saw(t, 400 * MS);
        assert_eq!(h.lag(t + 9 * BUCKET_NS), MIN_LAG_NS, "aged out unseen");
    }
}
