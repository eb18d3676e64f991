//! The `informer` binary as a user runs it: `decode` on real fixtures and on garbage, `flood`
//! end to end with its verification and JSON report.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_informer"))
}

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p)
}

#[test]
fn decode_prints_the_pod_metadata() {
    let out = bin()
        .arg("decode")
        .arg(fixture("k8s-testdata/HEAD/core.v1.Pod.pb"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("v1 Pod"), "{text}");
    assert!(text.contains("name:              nameValue"), "{text}");
    assert!(text.contains("namespace:         namespaceValue"), "{text}");
    assert!(
        text.contains("creationTimestamp: 2008-01-01T01:01:01Z"),
        "{text}"
    );
    assert!(
        text.contains("label:             labelsKey=labelsValue"),
        "{text}"
    );
}

#[test]
fn decode_json_output_covers_etcd_values_and_json() {
    let out = bin()
        .args(["decode", "--json"])
        .arg(fixture("real/auger-etcd-real-protobuf/storage__pod.bin"))
        .arg(fixture(
            "real/auger-etcd-real-protobuf/boltdb__page2item2.bin",
        ))
        .arg(fixture("real/auger-etcd-real-protobuf/json__job.json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let blocks = v.as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["kind"], "Pod");
    assert_eq!(blocks[0]["name"], "pi-dqtsw");
    assert_eq!(blocks[0]["uid"], "a4adc7ca-5b56-11e7-8d4b-42010a800002");
    assert_eq!(blocks[1]["kind"], "Job");
    assert_eq!(blocks[1]["apiVersion"], "batch/v1");
    assert_eq!(blocks[2]["name"], "pi");
}

#[test]
fn decode_reports_garbage_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("informer-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.pb");
    let mut pod = std::fs::read(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap();
    pod.truncate(pod.len() / 2);
    std::fs::write(&bad, &pod).unwrap();
    let out = bin().arg("decode").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("length") && err.contains("byte"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn flood_verifies_and_reports_json() {
    let out = bin()
        .args([
            "flood",
            "--objects",
            "500",
            "--events",
            "20000",
            "--handlers",
            "3",
            "--template",
            "etcd-pod",
            "--json",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true);
    assert_eq!(v["events"], 20000);
    assert_eq!(v["handlers"], 3);
    assert_eq!(v["per_handler"].as_array().unwrap().len(), 3);
    assert!(v["events_per_second"].as_f64().unwrap() > 0.0);
    assert!(v["latency_ns"]["p99"].as_u64().unwrap() >= v["latency_ns"]["p50"].as_u64().unwrap());
    // Every handler saw the initial list plus every event.
    for h in v["per_handler"].as_array().unwrap() {
        assert_eq!(h["notifications"].as_u64().unwrap(), 500 + 20000);
    }
}

#[test]
fn flood_with_compression_reports_the_compressed_cache() {
    let out = bin()
        .args([
            "flood",
            "--objects",
            "300",
            "--events",
            "3000",
            "--template",
            "etcd-pod",
        ])
        .args(["--compression", "zstd", "--vary", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["verified"], true, "{v}");
    let cache = &v["cache"];
    assert_eq!(cache["compressed_objects"], cache["objects"], "{v}");
    assert!(
        cache["cached_bytes_per_object"].as_f64().unwrap() < 600.0,
        "{v}"
    );
    assert!(cache["ratio"].as_f64().unwrap() < 0.4, "{v}");
}

#[test]
fn flood_json_template_verifies() {
    let out = bin()
        .args([
            "flood",
            "--objects",
            "50",
            "--events",
            "500",
            "--handlers",
            "2",
            "--template",
            "openshift-json",
            "--no-progress",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("verified:"), "{text}");
}

#[test]
fn decode_accepts_every_protobuf_fixture() {
    // Kinds without ObjectMeta (options, reviews, discovery) report their kind, not an error.
    for dir in ["HEAD", "v1.30.0", "v1.19.0"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(fixture(&format!("k8s-testdata/{dir}")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pb"))
            .collect();
        files.sort();
        let out = bin()
            .args(["decode", "--json"])
            .args(&files)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let blocks = v.as_array().unwrap();
        assert!(
            blocks.len() >= files.len(),
            "{dir}: {} blocks for {} files",
            blocks.len(),
            files.len()
        );
        let get_options = blocks
            .iter()
            .find(|b| b["kind"] == "GetOptions")
            .expect("GetOptions reported");
        assert_eq!(get_options["objectMeta"], false);
    }
}

#[test]
fn decode_compact_json_object_with_a_type_field_is_an_object() {
    // A Secret has a top-level "type": compact JSON of one object must not be taken for a
    // watch stream.
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixture("k8s-testdata/HEAD/core.v1.Secret.json")).unwrap(),
    )
    .unwrap();
    let path = std::env::temp_dir().join(format!("informer-secret-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = bin()
        .args(["decode", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["kind"], "Secret");
    assert_eq!(v[0]["name"], "nameValue");
}

/// The new knobs together, with `--record`; then `informer replay` of the file verifies the
/// same final state, and the JSON reports carry the new fields.
#[test]
fn flood_records_and_replay_verifies() {
    let dir = std::env::temp_dir().join(format!("informer-cli-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("flood.trace");
    let out = bin()
        .args([
            "flood",
            "--objects",
            "300",
            "--events",
            "20000",
            "--handlers",
            "3",
            "--slow-handlers",
            "1",
            "--slow-handler-delay",
            "5us",
            "--template",
            "mixed",
            "--format",
            "json",
            "--labels",
            "3",
            "--annotations",
            "2",
            "--mix",
            "20:60:20",
            "--fault-every",
            "1000",
            "--rate",
            "200000",
            "--json",
            "--record",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true);
    assert_eq!(v["events"], 20000);
    assert_eq!(v["format"], "Json");
    assert!(v["store_lag_max"].as_u64().is_some());
    assert!(v["relists"].as_u64().unwrap() >= 1);
    // A fault every 1 000 events: the flood waits for a fault to fire rather than run 1 000
    // events past it (plus at most one generator step of 256 events).
    let f = &v["faults"];
    let injected = f["injected"].as_u64().unwrap();
    assert!(injected >= 20000 / (1000 + 256), "{f}");
    // Where the time went: every injected fault's cycle is charged to its kind, and the
    // reflector's backoff waits are summed.
    let kinds = f["per_kind"].as_array().unwrap();
    assert_eq!(kinds.len(), 18);
    let cycles: u64 = kinds.iter().map(|k| k["cycles"].as_u64().unwrap()).sum();
    assert_eq!(cycles, injected, "{f}");
    assert!(v["backoffs"].as_u64().unwrap() >= 1);
    assert!(
        v["time"]["backoff_seconds"].as_f64().unwrap() > 0.0,
        "{}",
        v["time"]
    );
    assert!(f["fired"].as_u64().unwrap() >= f["injected"].as_u64().unwrap());
    assert_eq!(f["pending"], 0);
    let per = v["per_handler"].as_array().unwrap();
    assert_eq!(per.len(), 3);
    assert_eq!(per[2]["slow"], true);
    assert_eq!(per[0]["slow"], false);
    for h in per {
        assert!(h["delivered"].as_u64().unwrap() > 0);
        assert!(h["max_pending"].as_u64().is_some());
    }
    assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0);
    let objects = v["objects"].as_u64().unwrap();
    let rv = v["resource_version"].as_u64().unwrap();

    let out = bin()
        .args(["replay", "--handlers", "2", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verified"], true, "{r}");
    // The recording ends when the flood's informer reached the server's last change.
    assert_eq!(r["objects"].as_u64().unwrap(), objects);
    assert_eq!(r["resource_version"].as_u64().unwrap(), rv);
    assert_eq!(r["relists"], v["relists"]);
    // The replaying reflector asked for exactly what the recording one did.
    assert_eq!(r["records_skipped"], 0, "{}", r["records_skipped_by_kind"]);
    // Every list the flood's reflector completed is in the trace; the events between them
    // (those not absorbed by a relist) were replayed.
    assert_eq!(r["trace_lists"], v["lists"]);
    assert!(r["events"].as_u64().unwrap() > 0);

    // A truncated trace is a typed error (exit 2), not a panic.
    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let out = bin().arg("replay").arg(&cut).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated"), "{err}");
    let junk = dir.join("junk.trace");
    std::fs::write(&junk, b"this is not a trace").unwrap();
    let out = bin().arg("replay").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a trace file"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn flood_duration_runs_for_that_long() {
    let out = bin()
        .args([
            "flood",
            "--objects",
            "100",
            "--duration",
            "1.5",
            "--rate",
            "4000",
            "--template",
            "etcd-pod",
            "--handlers",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true);
    // 1.5 s at 4 000 events/s, in steps of 256: about 6 000 events.
    let events = v["events"].as_u64().unwrap();
    assert!((4_000..=7_000).contains(&events), "{events}");
    assert!(v["generate_seconds"].as_f64().unwrap() >= 1.5);
}

#[test]
fn flood_rejects_bad_knobs() {
    for args in [
        &["--slow-handler-delay", "10"][..],
        &["--mix", "1:2"],
        &["--mix", "0:0:0"],
        &["--events", "10", "--duration", "1"],
    ] {
        let out = bin().arg("flood").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = bin()
        .args(["flood", "--handlers", "2", "--slow-handlers", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Time flags in seconds refuse what no duration can hold (`inf`, `NaN`, negative, huge) with
/// a usage error (exit 2) instead of panicking later in `Duration::from_secs_f64`.
#[test]
fn seconds_flags_refuse_values_no_duration_holds() {
    for args in [
        &["serve", "--duration", "inf"][..],
        &["serve", "--status-every", "1e30"],
        &["serve", "--continue-ttl", "NaN"],
        &["serve", "--bookmark-interval=-1"],
        &["watch", "--interval", "inf"],
        &["watch", "--duration", "1e300"],
    ] {
        let out = bin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("seconds from 0 to"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
