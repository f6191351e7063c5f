//! Text helpers for the lines of per-device cgroup files (io.stat,
//! io.cost.qos, io.max, ...): `MAJ:MIN key=value ...`. Pure.

/// The line of a per-device cgroup file (io.cost.qos, io.stat, ...) for
/// MAJ:MIN, without the device prefix.
pub fn device_line<'a>(text: &'a str, majmin: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (dev, rest) = l.split_once(' ')?;
        (dev == majmin).then_some(rest.trim())
    })
}

/// Value of `key=value` in a knob line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_device_lines_and_fields() {
        let stat = "8:0 rbytes=1 wbytes=2\n259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=135.29 cost.usage=1735 cost.wait=0 cost.indebt=0 cost.indelay=0\n";
        let l = device_line(stat, "259:0").unwrap();
        assert_eq!(field(l, "cost.vrate"), Some("135.29"));
        assert_eq!(field(l, "cost.usage"), Some("1735"));
        assert_eq!(field(l, "cost.wait"), Some("0"));
        assert_eq!(field(l, "rbytes"), Some("4096"));
        assert_eq!(device_line(stat, "7:0"), None);
        assert_eq!(
            field("enable=1 ctrl=user min=50.00 max=150.00", "min"),
            Some("50.00")
        );
    }
}
