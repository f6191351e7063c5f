use super::*;
use crate::model::*;
use crate::openmetrics::test_text::text_with;
use crate::openmetrics::ExpositionOptions;
use crate::proto::MetricType;

/// What Prometheus 2.42 sends with --enable-feature=native-histograms, and without.
const PROMETHEUS_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
const PROMETHEUS_CLASSIC: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

#[test]
fn negotiates_protobuf_only_when_asked_and_preferred() {
    assert_eq!(negotiate(Some(PROMETHEUS_NATIVE)), Exposition::Protobuf);
    assert_eq!(negotiate(Some(PROMETHEUS_CLASSIC)), Exposition::OpenMetrics);
    assert_eq!(negotiate(None), Exposition::OpenMetrics);
    for unservable in [
        "",
        "*/*",
        "garbage;;;,=",
        "application/json",
        // Another protobuf message, or not delimited: not ours to serve.
        "application/vnd.google.protobuf;proto=io.prometheus.write.WriteRequest;encoding=delimited",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
        // Text preferred over protobuf.
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.2,text/plain;q=0.9",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0",
        // A wildcard preferred over protobuf admits text.
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5, */*;q=1",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5, text/*;q=0.6",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5, application/*",
    ] {
        assert_eq!(
            negotiate(Some(unservable)),
            Exposition::OpenMetrics,
            "{unservable}"
        );
    }
    // Spaces and quoted parameters as other clients write them.
    assert_eq!(
        negotiate(Some(
            "application/vnd.google.protobuf; proto=\"io.prometheus.client.MetricFamily\"; encoding=delimited; q=0.9, text/plain; q=0.5"
        )),
        Exposition::Protobuf
    );
}

use crate::test_layout::bounds;

fn snapshot() -> Snapshot {
    let mut counts = vec![0u64; 88];
    counts[9] = 3;
    counts[30] = 1;
    let io = IoSeries {
        cgroup: CgroupRef {
            id: 9,
            path: "/a \"q\" \\b".into(),
        },
        device: DeviceRef {
            name: "loop0".into(),
            major: 7,
            minor: 0,
        },
        op: Op::Read,
        ios: 4,
        bytes: 16384,
        latency: StageHistograms {
            total: Histogram {
                counts,
                sum_seconds: 3e-5,
            },
            ..Default::default()
        },
        ..Default::default()
    };
    Snapshot {
        hist_lower_bounds_seconds: bounds(),
        io: vec![io],
        ..Default::default()
    }
}

#[test]
fn protobuf_carries_every_text_family_and_native_latency() {
    let snap = std::sync::Arc::new(snapshot());
    let opts = ExpositionOptions::default();
    let extra = std::sync::Arc::new(SelfMetrics::default());
    let bytes = encode_protobuf(&snap, &extra, &opts).unwrap();
    let fams = decode_protobuf(&bytes).unwrap();
    let text = text_with((*snap).clone(), (*extra).clone(), &opts);
    // Every text sample name is a protobuf family, histogram parts aside.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let want = name
            .strip_suffix("_bucket")
            .or(name.strip_suffix("_sum"))
            .or(name.strip_suffix("_count"))
            .filter(|n| n.starts_with("iowarden_io_latency"))
            .unwrap_or(name);
        assert!(fams.iter().any(|f| f.name() == want), "{want} missing");
    }
    let req = fams
        .iter()
        .find(|f| f.name() == "iowarden_io_requests_total")
        .unwrap();
    assert_eq!(req.r#type, Some(MetricType::Counter as i32));
    assert_eq!(req.help(), "Completed block requests");
    let m = &req.metric[0];
    assert_eq!(m.counter.as_ref().unwrap().value(), 4.0);
    let cg = m.label.iter().find(|l| l.name() == "cgroup").unwrap();
    assert_eq!(cg.value(), "/a \"q\" \\b", "label unescaped");

    let lat = fams
        .iter()
        .find(|f| f.name() == "iowarden_io_latency_seconds")
        .unwrap();
    assert_eq!(lat.r#type, Some(MetricType::Histogram as i32));
    assert_eq!(lat.metric.len(), 1, "total stage only by default");
    let h = lat.metric[0].histogram.as_ref().unwrap();
    assert_eq!(h.sample_count(), 4);
    assert_eq!(h.schema(), 3);
    assert!(h.bucket.is_empty(), "native only");
    assert_eq!(h.positive_delta.iter().sum::<i64>(), 1, "3 then 1");
}

#[test]
fn stage_selection_sets_histograms_per_series() {
    let snap = std::sync::Arc::new(snapshot());
    let all = ExpositionOptions {
        counters: crate::openmetrics::IoCounter::all(),
        stages: Stage::ALL.to_vec(),
        classic: crate::openmetrics::ClassicBuckets::PowersOfTwo,
    };
    let fams =
        decode_protobuf(&encode_protobuf(&snap, &Default::default(), &all).unwrap()).unwrap();
    let lat = fams
        .iter()
        .find(|f| f.name() == "iowarden_io_latency_seconds")
        .unwrap();
    assert_eq!(lat.metric.len(), Stage::ALL.len(), "one per stage");
    let none = ExpositionOptions {
        stages: vec![],
        ..all
    };
    let text = text_with((*snap).clone(), SelfMetrics::default(), &none);
    assert!(!text.contains("iowarden_io_latency"));
}

#[test]
fn transcoder_refuses_what_it_cannot_map() {
    assert!(transcode_openmetrics("# TYPE x histogram\nx_bucket{le=\"1\"} 1\n# EOF\n").is_err());
    assert!(transcode_openmetrics("x 1\n").is_err(), "no TYPE");
    assert!(transcode_openmetrics("# TYPE x gauge\nx{a=\"1} 1\n").is_err());
    let f = transcode_openmetrics(
        "# HELP g a \\\\ b\\nc\n# TYPE g gauge\ng{a=\"x\\ny\",b=\"\"} +Inf\ng 2.5\n# EOF\n",
    )
    .unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].help(), "a \\ b\nc");
    assert_eq!(f[0].metric[0].label[0].value(), "x\ny");
    assert_eq!(
        f[0].metric[0].gauge.as_ref().unwrap().value(),
        f64::INFINITY
    );
    assert_eq!(f[0].metric[1].gauge.as_ref().unwrap().value(), 2.5);
}
