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

/// The vrate (%) iocost admits at on MAJ:MIN, from the root's io.cost.qos
/// and io.stat: infinite where iocost is off there (no line, or
/// enable=0), None where it is on and io.stat has no cost.vrate.
pub fn admitted_vrate(qos: &str, root_stat: &str, majmin: &str) -> Option<f64> {
    let on = device_line(qos, majmin).and_then(|l| field(l, "enable")) == Some("1");
    if !on {
        return Some(f64::INFINITY);
    }
    device_line(root_stat, majmin)
        .and_then(|l| field(l, "cost.vrate"))
        .and_then(|v| v.parse().ok())
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

    #[test]
    fn the_vrate_admitted_is_infinite_with_iocost_off_and_unknown_without_its_stat() {
        let stat = "259:0 rbytes=0 cost.vrate=61.20 cost.usage=0\n";
        let on = "259:0 enable=1 ctrl=auto rpct=95.00 rlat=25000 wpct=95.00 wlat=25000 min=50.00 max=150.00\n";
        assert_eq!(admitted_vrate(on, stat, "259:0"), Some(61.2));
        assert_eq!(admitted_vrate(on, "259:0 rbytes=0\n", "259:0"), None);
        let off = on.replace("enable=1", "enable=0");
        assert_eq!(admitted_vrate(&off, stat, "259:0"), Some(f64::INFINITY));
        assert_eq!(admitted_vrate("", "", "259:0"), Some(f64::INFINITY));
        assert_eq!(admitted_vrate(on, stat, "8:0"), Some(f64::INFINITY));
    }
}
