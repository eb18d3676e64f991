//! Writes the seed corpora of every fuzz target from the real Kubernetes bytes in
//! `../shared/fixtures` (nothing here invents objects: envelopes, metadata, documents, lists and
//! watch streams are the fixtures as they are, or re-framed with this crate's own encoders).
//!
//! ```sh
//! cargo run --release --manifest-path fuzz/Cargo.toml --features gen --bin gen_seeds -- \
//!     [FIXTURES_DIR] [OUT_DIR]
//! ```
//! Defaults: `<repo>/../shared/fixtures` and `<repo>/fuzz/corpus`. One directory per target is
//! (re)filled; existing files are kept, so corpora grown by earlier runs stay.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use informer::object::{
    self, ApiStatus, DEFAULT_FRAME_LIMIT, Encoding, GroupVersionKind, MAGIC, Object, WatchEvent,
    encode_list_json, encode_list_protobuf, encode_object_meta, encode_watch_frame,
    encode_watch_line,
};
use informer_fuzz::StreamInput;

type Error = Box<dyn std::error::Error>;

/// Objects larger than this are left out of stream and list seeds (libFuzzer's default
/// `-max_len` follows the largest seed; huge seeds slow every execution).
const STREAM_OBJECT_MAX: usize = 3 * 1024;

fn main() -> Result<(), Error> {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = fuzz_dir.parent().unwrap_or(fuzz_dir);
    let mut args = std::env::args_os().skip(1);
    let fixtures = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/fixtures"));
    let out = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("fuzz/corpus"));

    let pb_files = protobuf_fixtures(&fixtures)?;
    let json_files = json_fixtures(&fixtures)?;
    let pb_objects: Vec<Object> = pb_files
        .iter()
        .filter_map(|b| object::decode(b.clone()).ok())
        .collect();
    let json_objects: Vec<Object> = json_files
        .iter()
        .filter_map(|b| object::decode(b.clone()).ok())
        .collect();
    if pb_objects.is_empty() || json_objects.is_empty() {
        return Err(format!("no fixtures decoded under {}", fixtures.display()).into());
    }

    let mut counts = BTreeMap::new();
    let mut write = |target: &str, seeds: Vec<Vec<u8>>| -> Result<(), Error> {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:04}")), s)?;
        }
        counts.insert(target.to_owned(), seeds.len());
        Ok(())
    };

    // envelope: the .pb files as they are (plus the etcd values, stray byte stripped).
    write("envelope", pb_files.iter().map(|b| b.to_vec()).collect())?;

    // metadata: each object's ObjectMeta body, as our encoder writes it (managed fields kept
    // verbatim).
    write(
        "metadata",
        pb_objects
            .iter()
            .map(|o| {
                let mut m = Vec::new();
                encode_object_meta(o.meta(), &mut m);
                m
            })
            .collect(),
    )?;

    // json_object: the JSON documents as they are.
    write(
        "json_object",
        json_files.iter().map(|b| b.to_vec()).collect(),
    )?;

    // Streams of small objects: ADDED, MODIFIED, DELETED, a bookmark, a 410 error.
    let small_pb: Vec<&Object> = pb_objects
        .iter()
        .filter(|o| o.raw_len() <= STREAM_OBJECT_MAX)
        .collect();
    let small_json: Vec<&Object> = json_objects
        .iter()
        .filter(|o| o.raw_len() <= STREAM_OBJECT_MAX)
        .collect();
    let frames = |events: &[WatchEvent]| {
        let mut out = Vec::new();
        for e in events {
            encode_watch_frame(e, &mut out).unwrap();
        }
        Bytes::from(out)
    };
    let lines = |events: &[WatchEvent]| -> Result<Bytes, Error> {
        let mut out = Vec::new();
        for e in events {
            encode_watch_line(e, &mut out)?;
        }
        Ok(Bytes::from(out))
    };
    let mut pb_streams = Vec::new();
    for group in small_pb.chunks(3) {
        pb_streams.push(frames(&script(group, Encoding::Protobuf)));
    }
    // A protobuf stream carrying JSON objects (watch events may embed either encoding).
    for group in small_json.chunks(3).take(8) {
        pb_streams.push(frames(&script(group, Encoding::Json)));
    }
    let mut json_streams = Vec::new();
    for group in small_json.chunks(3) {
        json_streams.push(lines(&script(group, Encoding::Json))?);
    }
    write("watch_protobuf", with_splits(&pb_streams))?;
    write("watch_json", with_splits(&json_streams))?;

    // Lists: the same kind from every fixture version, as one page.
    let mut by_kind: BTreeMap<String, Vec<&Object>> = BTreeMap::new();
    for o in pb_objects
        .iter()
        .filter(|o| o.raw_len() <= STREAM_OBJECT_MAX)
    {
        by_kind.entry(o.gvk().to_string()).or_default().push(o);
    }
    let list_gvk = |o: &Object| {
        let g = o.gvk();
        GroupVersionKind::new(&g.group, &g.version, &format!("{}List", g.kind))
    };
    write(
        "list_protobuf",
        by_kind
            .values()
            .enumerate()
            .map(|(i, items)| {
                let (cont, remaining) = page_meta(i);
                encode_list_protobuf(&list_gvk(items[0]), "12345", cont, remaining, items)
                    .unwrap()
                    .to_vec()
            })
            .collect(),
    )?;
    let mut json_lists = Vec::new();
    for (i, group) in small_json.chunks(2).enumerate() {
        let (cont, remaining) = page_meta(i);
        json_lists
            .push(encode_list_json(&list_gvk(group[0]), "12345", cont, remaining, group)?.to_vec());
    }
    // The recorded successive states of real Pods and Jobs: JSON arrays of full objects.
    for recording in pulumi_recordings(&fixtures)? {
        let items: Vec<Object> = recording
            .iter()
            .filter_map(|d| object::decode(d.clone()).ok())
            .collect();
        if let Some(first) = items.first() {
            let refs: Vec<&Object> = items.iter().collect();
            json_lists
                .push(encode_list_json(&list_gvk(first), "389616", "", None, &refs)?.to_vec());
        }
    }
    write("list_json", json_lists)?;

    for (target, n) in counts {
        println!("{target}: {n} seeds");
    }
    println!("written under {}", out.display());
    Ok(())
}

/// A continue token and remaining count for every other list page, so both shapes are seeded.
fn page_meta(i: usize) -> (&'static str, Option<i64>) {
    if i.is_multiple_of(2) {
        ("", None)
    } else {
        ("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDV9", Some(42))
    }
}

/// The events of one seed stream over `objects` (1 to 3 of them).
fn script(objects: &[&Object], encoding: Encoding) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        events.push(match i {
            0 => WatchEvent::Added((*o).clone()),
            1 => WatchEvent::Modified((*o).clone()),
            _ => WatchEvent::Deleted((*o).clone()),
        });
    }
    let gvk = Arc::new(objects[0].gvk().clone());
    events.push(WatchEvent::bookmark(gvk, "12345", true, encoding));
    events.push(WatchEvent::Error(ApiStatus {
        code: 410,
        status: "Failure".into(),
        reason: "Expired".into(),
        message: "too old resource version: 1 (12345)".into(),
        cause_reasons: Vec::new(),
        retry_after_seconds: None,
    }));
    events
}

/// Each stream under a few split plans: byte at a time, a mix of cut lengths (empty pushes
/// included) with compaction, and a small limit that the longest event exceeds.
fn with_splits(streams: &[Bytes]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let plan = |compaction, limit, cuts: Vec<usize>| StreamInput {
            compaction,
            limit,
            cuts,
            stream: s.clone(),
        };
        out.push(plan(0, DEFAULT_FRAME_LIMIT, vec![]).encode());
        out.push(plan(4, DEFAULT_FRAME_LIMIT, vec![7, 0, 300, 1, 1024, 3]).encode());
        if i % 4 == 0 {
            out.push(plan(2, 512, vec![64, 5]).encode());
        }
    }
    out
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    v.sort();
    Ok(v)
}

fn has_ext(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|e| e == ext)
}

/// Every protobuf envelope among the fixtures.
fn protobuf_fixtures(fixtures: &Path) -> Result<Vec<Bytes>, Error> {
    let mut out = Vec::new();
    for version in ["HEAD", "v1.30.0", "v1.19.0"] {
        for p in read_dir_sorted(&fixtures.join("k8s-testdata").join(version))? {
            if has_ext(&p, "pb") {
                out.push(Bytes::from(std::fs::read(&p)?));
            }
        }
    }
    for p in read_dir_sorted(&fixtures.join("real/auger-etcd-real-protobuf"))? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("storage__") {
            let mut b = std::fs::read(&p)?;
            // One stray trailing 0x0A after the envelope (see the fixtures' README).
            if b.starts_with(&MAGIC) && b.last() == Some(&0x0a) {
                b.pop();
            }
            out.push(Bytes::from(b));
        }
    }
    Ok(out)
}

/// Every JSON object document among the fixtures.
fn json_fixtures(fixtures: &Path) -> Result<Vec<Bytes>, Error> {
    let mut out = Vec::new();
    for version in ["HEAD", "v1.30.0", "v1.19.0"] {
        for p in read_dir_sorted(&fixtures.join("k8s-testdata").join(version))? {
            if has_ext(&p, "json") {
                out.push(Bytes::from(std::fs::read(&p)?));
            }
        }
    }
    for dir in [
        "real/auger-etcd-real-protobuf",
        "real/openshift-insights-real-objects/pods",
        "real/openshift-insights-real-objects/nodes",
        "real/scheduler_perf-templates",
    ] {
        let dir = fixtures.join(dir);
        if !dir.is_dir() {
            continue;
        }
        for p in read_dir_sorted(&dir)? {
            if has_ext(&p, "json") {
                out.push(Bytes::from(std::fs::read(&p)?));
            }
        }
    }
    Ok(out)
}

/// The pulumi watch recordings: one JSON array of successive object states per file.
fn pulumi_recordings(fixtures: &Path) -> Result<Vec<Vec<Bytes>>, Error> {
    let mut out = Vec::new();
    for kind in ["pod", "job"] {
        for p in read_dir_sorted(&fixtures.join("real/pulumi-watch-recordings").join(kind))? {
            if !has_ext(&p, "json") {
                continue;
            }
            let states: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&p)?)?;
            out.push(
                states
                    .iter()
                    .map(|s| serde_json::to_vec(s).map(Bytes::from))
                    .collect::<Result<_, _>>()?,
            );
        }
    }
    Ok(out)
}
