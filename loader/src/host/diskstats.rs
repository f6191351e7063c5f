//! The kernel's own completion counts (/proc/diskstats) of the devices
//! iowarden traces: one read of the file per poll.

use std::collections::BTreeSet;

use iowarden_exporters::{DeviceRef, KernelDiskStats};

/// The lines of `devices` ((major, minor) -> name) in /proc/diskstats; a
/// device the file does not list (gone meanwhile) is left out.
pub fn read_diskstats(devices: &BTreeSet<DeviceRef>) -> Vec<KernelDiskStats> {
    if devices.is_empty() {
        return Vec::new();
    }
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    parse_diskstats(&text, devices)
}

/// Parses /proc/diskstats (Documentation/admin-guide/iostats.rst): after
/// major, minor and name, reads completed is field 1, sectors read 3,
/// writes completed 5, sectors written 7, milliseconds spent doing I/Os
/// (io_ticks) 10; discards (kernel 4.18 on) 12 and 14. Fields a kernel
/// does not have count 0.
pub fn parse_diskstats(text: &str, devices: &BTreeSet<DeviceRef>) -> Vec<KernelDiskStats> {
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            let major: u32 = w.first()?.parse().ok()?;
            let minor: u32 = w.get(1)?.parse().ok()?;
            let device = devices
                .iter()
                .find(|d| d.major == major && d.minor == minor)?;
            let field =
                |i: usize| -> u64 { w.get(3 + i).and_then(|v| v.parse().ok()).unwrap_or(0) };
            Some(KernelDiskStats {
                device: device.clone(),
                completed_requests: field(0) + field(4) + field(11),
                sectors: field(2) + field(6) + field(13),
                busy_ms: field(9),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_reads_writes_and_discards_and_reads_busy_time_of_traced_devices_only() {
        let text = "   7       0 loop0 100 5 800 10 50 2 400 20 0 29 30 3 0 24 1 7 1\n\
                    7       1 loop1 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
                    254     0 vda 9 0 72 0 1 0 8 0 0 5 6\n";
        let dev = |name: &str, major, minor| DeviceRef {
            name: name.into(),
            major,
            minor,
        };
        let traced = BTreeSet::from([dev("loop0", 7, 0), dev("vda", 254, 0)]);
        let got = parse_diskstats(text, &traced);
        assert_eq!(
            got,
            vec![
                KernelDiskStats {
                    device: dev("loop0", 7, 0),
                    completed_requests: 100 + 50 + 3,
                    sectors: 800 + 400 + 24,
                    busy_ms: 29,
                },
                // A kernel without the discard fields.
                KernelDiskStats {
                    device: dev("vda", 254, 0),
                    completed_requests: 10,
                    sectors: 80,
                    busy_ms: 5,
                },
            ]
        );
    }
}
