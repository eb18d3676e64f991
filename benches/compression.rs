//! How far per-object zstd with a trained dictionary compresses cached objects, on the
//! simulator's plain templates (one fixture re-keyed: every object shares its bytes outside
//! `metadata`) and on the varied corpus (`SimConfig::vary`: every Pod its own spec and status),
//! side by side: the figures a compressed store would be designed from, and the measure of how
//! much the plain templates flatter a dictionary.
//!
//! For each template and corpus: `COMPRESSION_N` objects (default 3 000) as the simulator serves
//! them, a dictionary of [`DICT_BYTES`] trained on [`TRAIN`] of them, then every object
//! compressed on its own: bytes per object and the ratio to the wire bytes, without and with
//! the dictionary, and the time to decompress one object. Printed as a table (no criterion
//! groups: the figures are sizes and one timing per row).
//!
//! `cargo bench --bench compression` (about a minute).

// A bench's main is not documented API.
#![allow(missing_docs)]

use std::time::Instant;

use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Dictionary size, bytes (zstd's own default for trained dictionaries is about 110 KB).
const DICT_BYTES: usize = 112 * 1024;
/// Objects the dictionary is trained on.
const TRAIN: usize = 1000;
/// zstd level of every compression (`COMPRESSION_LEVEL`, default 3).
fn level() -> i32 {
    std::env::var("COMPRESSION_LEVEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn n() -> usize {
    std::env::var("COMPRESSION_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// The wire bytes of `n` objects from `templates`.
fn corpus(templates: Templates, vary: bool, n: usize) -> Vec<Vec<u8>> {
    let sim = SimServer::new(
        SimConfig::new(templates)
            .seed(1)
            .initial_objects(n)
            .vary(vary),
    )
    .expect("simulator");
    sim.truth()
        .objects
        .values()
        .map(|o| o.raw().unwrap().to_vec())
        .collect()
}

/// Loads one template set from the fixtures directory.
type Loader = fn(&std::path::Path) -> Templates;

struct Row {
    mean: f64,
    plain: f64,
    dict: f64,
    decompress_ns: f64,
    compress_ns: f64,
}

fn measure(objs: &[Vec<u8>], level: i32) -> Row {
    let raw: usize = objs.iter().map(Vec::len).sum();
    // Every k-th object, so the sample spans the corpus.
    let step = (objs.len() / TRAIN).max(1);
    let samples: Vec<&[u8]> = objs.iter().step_by(step).map(Vec::as_slice).collect();
    let dict = zstd::dict::from_samples(&samples, DICT_BYTES).expect("dictionary training");
    let plain: usize = objs
        .iter()
        .map(|o| zstd::bulk::compress(o, level).expect("compress").len())
        .sum();
    let mut c = zstd::bulk::Compressor::with_dictionary(level, &dict).expect("compressor");
    let t0 = Instant::now();
    let packed: Vec<Vec<u8>> = objs
        .iter()
        .map(|o| c.compress(o).expect("compress"))
        .collect();
    let compress_ns = t0.elapsed().as_nanos() as f64 / objs.len() as f64;
    let with_dict: usize = packed.iter().map(Vec::len).sum();
    let mut d = zstd::bulk::Decompressor::with_dictionary(&dict).expect("decompressor");
    let max = objs.iter().map(Vec::len).max().unwrap_or(0);
    let t0 = Instant::now();
    let mut out = 0usize;
    for (p, o) in packed.iter().zip(objs) {
        let back = d.decompress(p, max).expect("decompress");
        assert_eq!(&back, o, "round trip");
        out += back.len();
    }
    let took = t0.elapsed();
    std::hint::black_box(out);
    Row {
        mean: raw as f64 / objs.len() as f64,
        plain: plain as f64 / raw as f64,
        dict: with_dict as f64 / raw as f64,
        decompress_ns: took.as_nanos() as f64 / objs.len() as f64,
        compress_ns,
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and criterion-style filters); this report takes none.
    let dir = default_fixtures_dir().expect("fixtures");
    let n = n();
    let level = level();
    println!(
        "\nPer-object zstd level {level}, {} KiB dictionary trained on {TRAIN} objects, {n} objects per corpus",
        DICT_BYTES / 1024
    );
    println!(
        "{:<16} {:<7} {:>10} {:>14} {:>14} {:>12} {:>14} {:>16}",
        "template",
        "corpus",
        "wire B",
        "ratio no dict",
        "ratio w/ dict",
        "B / object",
        "compress ns",
        "decompress ns"
    );
    let sets: [(&str, Loader); 3] = [
        ("etcd-pod", |d| Templates::etcd_pod(d).expect("etcd Pod")),
        ("head-pod", |d| Templates::head_pod(d).expect("HEAD Pod")),
        ("openshift-json", |d| {
            Templates::openshift_json(d).expect("OpenShift Pods")
        }),
    ];
    for (name, load) in sets {
        for vary in [false, true] {
            let objs = corpus(load(&dir), vary, n);
            let r = measure(&objs, level);
            println!(
                "{:<16} {:<7} {:>10.0} {:>14.3} {:>14.3} {:>12.0} {:>14.0} {:>16.0}",
                name,
                if vary { "varied" } else { "plain" },
                r.mean,
                r.plain,
                r.dict,
                r.mean * r.dict,
                r.compress_ns,
                r.decompress_ns
            );
        }
    }
    println!();
}
