//! Parses durations such as "500ms", "2s", "1m", "1.5s".

use std::time::Duration;

const MAX_SECS: f64 = 365.0 * 86400.0;

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{s}': expected e.g. 500ms, 2s, 1m"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" | "" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit '{unit}' in '{s}': use ms, s, m or h"
            ))
        }
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("duration '{s}' must be positive"));
    }
    // Far beyond any run; also keeps Instant + duration from overflowing.
    if secs > MAX_SECS {
        return Err(format!(
            "duration '{s}' is too long (at most 365 days; leave the option out to run until stopped)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The shortest poll interval accepted: each poll reads every map and the
/// cgroup tree, so a shorter one is a busy loop, not finer data.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// A poll interval: a duration of at least MIN_INTERVAL.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "interval '{}' is shorter than the minimum of {} ms",
            s.trim(),
            MIN_INTERVAL.as_millis()
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_below_the_bound_are_refused_with_it() {
        assert_eq!(
            parse_interval("0.0000000001s").unwrap_err(),
            "interval '0.0000000001s' is shorter than the minimum of 10 ms"
        );
        assert!(parse_interval("9ms").is_err());
        assert_eq!(parse_interval("10ms").unwrap(), MIN_INTERVAL);
        assert!(parse_interval("0s").unwrap_err().contains("positive"));
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3 days").unwrap_err().contains("unit"));
        assert!(parse_duration("fast").is_err());
        assert_eq!(
            parse_duration("365d").unwrap_err(),
            "invalid duration unit 'd' in '365d': use ms, s, m or h"
        );
    }

    #[test]
    fn huge_values_are_an_error_not_a_panic() {
        for s in [
            "100000000000000000000s",
            "1e400",
            "8760.1h",
            "99999999999999999999999m",
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(
                e.contains("too long") || e.contains("invalid duration"),
                "{s}: {e}"
            );
        }
        assert!(parse_duration("100000000000000000000s")
            .unwrap_err()
            .contains("at most 365 days"));
        assert_eq!(
            parse_duration("8760h").unwrap(),
            Duration::from_secs(365 * 86400)
        );
    }
}
