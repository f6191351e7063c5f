//! docs/contributing.md's "Adding a metric", followed for a counter that exists in tests
//! only (`KernelDiskStats::walkthrough`: the field and its line in
//! model/diskstats.rs's `metrics!`, nothing else), checked where a user
//! meets it: the JSON snapshot, a delta, the OpenMetrics text with its
//! HELP, and the protobuf exposition.

use std::sync::Arc;

use crate::model::{DeviceRef, KernelDiskStats, SelfMetrics, Snapshot};
use crate::openmetrics::test_text::text_with;
use crate::openmetrics::ExpositionOptions;
use crate::protobuf::{decode_protobuf, encode_protobuf};

fn at(seconds: f64, walkthrough: u64) -> Snapshot {
    Snapshot {
        taken_at_unix_seconds: seconds,
        kernel_diskstats: vec![KernelDiskStats {
            device: DeviceRef {
                name: "vdb".into(),
                major: 254,
                minor: 16,
            },
            walkthrough,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_counter_added_as_the_readme_says_reaches_every_encoding() {
    let (earlier, later) = (at(10.0, 5), at(12.0, 12));
    let json = crate::json::encode_json(&later);
    assert!(json.contains(r#""walkthrough":12"#), "{json}");
    assert_eq!(crate::json::decode_json(&json).unwrap(), later);
    let delta = later.delta_since(&earlier);
    assert_eq!(delta.kernel_diskstats[0].walkthrough, 7);

    let (snap, extra) = (Arc::new(later), Arc::new(SelfMetrics::default()));
    let opts = ExpositionOptions::default();
    let text = text_with((*snap).clone(), (*extra).clone(), &opts);
    assert!(
        text.contains(
            "# HELP iowarden_walkthrough The test-only counter of docs/contributing.md's Adding a metric"
        ) && text.contains("# TYPE iowarden_walkthrough counter")
            && text.contains(r#"iowarden_walkthrough_total{device="vdb",devt="254:16"} 12"#),
        "{text}"
    );
    let families = decode_protobuf(&encode_protobuf(&snap, &extra, &opts).unwrap()).unwrap();
    let family = families
        .iter()
        .find(|f| f.name() == "iowarden_walkthrough_total")
        .expect("a protobuf family");
    assert_eq!(family.metric[0].counter.as_ref().unwrap().value(), 12.0);
}
