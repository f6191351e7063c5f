//! `iowarden model`: each device's linear cost model as text — the model
//! requests were charged with, the one refitted from their measured device
//! time (as an io.cost.model line), and both models' error per class.

use std::fmt::Write;

use iowarden_exporters::{DeviceCostModel, LinearModel};

fn params(p: &LinearModel) -> String {
    format!(
        "rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
        p.rbps, p.rseqiops, p.rrandiops, p.wbps, p.wseqiops, p.wrandiops
    )
}

fn size(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{}M", b >> 20)
    } else {
        format!("{}K", b >> 10)
    }
}

fn pct(e: Option<f64>) -> String {
    e.map(|e| format!("{:+.1}%", e * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// Devices with samples (only `device` when given).
pub fn render(models: &[DeviceCostModel], device: Option<&str>) -> String {
    let mut out = String::new();
    let shown: Vec<&DeviceCostModel> = models
        .iter()
        .filter(|m| device.is_none_or(|d| m.device.name == d))
        .filter(|m| !m.classes.is_empty())
        .collect();
    if shown.is_empty() {
        out.push_str("no reads or writes with measured device time\n");
        return out;
    }
    for m in shown {
        let _ = writeln!(out, "{} ({})", m.device.name, m.device.devt());
        let _ = writeln!(
            out,
            "  charged with ({}): {}",
            m.source,
            params(&m.configured)
        );
        if m.fitted_line.is_empty() {
            let _ = writeln!(out, "  fitted: too few samples per class");
        } else {
            let _ = writeln!(
                out,
                "  fitted (latency-based, 0 = not determined): {}",
                m.fitted_line
            );
        }
        let _ = writeln!(
            out,
            "  {:<5} {:<10} {:>5} {:>9} {:>12} {:>12} {:>10} {:>10}",
            "op", "pattern", "size", "ios", "device/io", "model/io", "error", "fit error"
        );
        for c in &m.classes {
            let per = |s: f64| format!("{:.1}us", s * 1e6 / c.ios.max(1) as f64);
            let _ = writeln!(
                out,
                "  {:<5} {:<10} {:>5} {:>9} {:>12} {:>12} {:>10} {:>10}",
                c.op.as_str(),
                c.pattern(),
                size(c.size_bytes),
                c.ios,
                per(c.device_seconds),
                per(c.model_seconds),
                pct(c.error),
                pct(c.fitted_error)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::{CostClass, DeviceRef, Op};

    #[test]
    fn renders_lines_and_classes() {
        let m = DeviceCostModel {
            device: DeviceRef {
                name: "loop3".into(),
                major: 7,
                minor: 3,
            },
            source: "flag".into(),
            fitted_line: "7:3 ctrl=user model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=0 wseqiops=0 wrandiops=0".into(),
            classes: vec![CostClass {
                op: Op::Read,
                random: true,
                size_bytes: 4096,
                ios: 100,
                bytes: 409600,
                device_seconds: 0.005,
                model_seconds: 0.01,
                error: Some(1.0),
                fitted_error: Some(-0.02),
            }],
            ..Default::default()
        };
        let t = render(std::slice::from_ref(&m), None);
        assert!(t.contains("loop3 (7:3)"), "{t}");
        assert!(t.contains(&m.fitted_line), "{t}");
        assert!(
            t.contains(
                "read  random        4K       100       50.0us      100.0us    +100.0%      -2.0%"
            ),
            "{t}"
        );
        assert_eq!(
            render(&[m], Some("vda")),
            "no reads or writes with measured device time\n"
        );
    }
}
