//! Reaction latency against load: server change → handler, as the `informer flood` binary
//! reports it, at paced rates sized to the capacity measured first in the same run.
//!
//! One flat-out flood measures the capacity (events/s); then, for each share of it in
//! [`SHARES`], `LATENCY_RUNS` paced floods (`--rate`, changes made one at a time) of
//! [`SECONDS`] each. Every run must end verified, with a latency sample per handler for (at least 99 %
//! of) every change. Prints a markdown table (per share: the rate the generator reached, the median
//! run's p50/p99/p999 and the range over the runs) and writes an SVG plot of p50, p99 and p999
//! against that rate (plotters).
//!
//! Environment (all optional): `LATENCY_TEMPLATE` (default `etcd-pod`), `LATENCY_HANDLERS`
//! (default 4), `LATENCY_RUNS` (default 3), `LATENCY_PLOT` (the SVG's path; default
//! `latency.svg` in Cargo's bench scratch directory; BENCHMARKS.md shows
//! `benches/plots/latency.svg`), `LATENCY_STEP` (changes per generator step in the paced runs,
//! `informer flood --step`; default one at a time): events then arrive in bursts, as a busy
//! API server sends them, and each latency counts from its burst's start.
//!
//! `cargo bench --bench latency` (about 70 s on 2 cores).

use std::path::PathBuf;
use std::process::Command;

use plotters::prelude::*;
use serde_json::Value;

/// Shares of the measured capacity at which latency is measured.
const SHARES: [f64; 5] = [0.01, 0.05, 0.10, 0.25, 0.50];

/// Length of each paced run (`--duration`), seconds.
const SECONDS: &str = "4";

/// The latency figures of one run (µs).
#[derive(Clone, Copy, Debug)]
struct Run {
    p50: f64,
    p99: f64,
    p999: f64,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// Runs `informer flood` with `extra` arguments; its `--json` report.
fn flood(template: &str, handlers: &str, extra: &[String]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_informer"))
        .args(["flood", "--json", "--no-progress", "--objects", "10000"])
        .args(["--template", template, "--handlers", handlers])
        .args(extra)
        .output()
        .expect("run the informer binary");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "informer flood {extra:?}: no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        report["verified"], true,
        "informer flood {extra:?} did not verify: {}",
        report["problems"]
    );
    report
}

fn micros(report: &Value, key: &str) -> f64 {
    report["latency_ns"][key]
        .as_f64()
        .expect("a latency figure")
        / 1e3
}

fn main() {
    let template = env_or("LATENCY_TEMPLATE", "etcd-pod");
    let handlers = env_or("LATENCY_HANDLERS", "4");
    let handler_count: f64 = handlers.parse().expect("LATENCY_HANDLERS: a number");
    let runs: usize = env_or("LATENCY_RUNS", "3")
        .parse()
        .expect("LATENCY_RUNS: a number");
    let plot = std::env::var_os("LATENCY_PLOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("latency.svg"));

    let step = std::env::var("LATENCY_STEP").ok();
    let flat = flood(&template, &handlers, &["--events".into(), "200000".into()]);
    let capacity = flat["events_per_second"]
        .as_f64()
        .expect("events_per_second");
    println!(
        "latency: {template}, {handlers} handlers, capacity {:.0} events/s (flat out), paced \
         in steps of {}",
        capacity,
        step.as_deref().unwrap_or("1")
    );
    println!();
    println!("| rate (share of capacity) | p50 µs | p99 µs | p999 µs |");
    println!("|---|---|---|---|");
    let mut rows = Vec::new();
    for share in SHARES {
        let rate = ((capacity * share) as u64).max(1);
        let mut reached = Vec::new();
        let mut measured: Vec<Run> = (0..runs.max(1))
            .map(|_| {
                let mut args = vec![
                    "--rate".to_owned(),
                    rate.to_string(),
                    "--duration".into(),
                    SECONDS.into(),
                ];
                if let Some(n) = &step {
                    args.extend(["--step".to_owned(), n.clone()]);
                }
                let r = flood(&template, &handlers, &args);
                let events = r["events"].as_f64().expect("events");
                let samples = r["latency_ns"]["samples"].as_f64().expect("samples");
                assert!(
                    samples >= 0.99 * events * handler_count,
                    "{samples} latency samples for {events} events to {handlers} handlers"
                );
                reached.push(events / r["generate_seconds"].as_f64().expect("generate_seconds"));
                Run {
                    p50: micros(&r, "p50"),
                    p99: micros(&r, "p99"),
                    p999: micros(&r, "p999"),
                }
            })
            .collect();
        let reached = reached.iter().sum::<f64>() / reached.len() as f64;
        measured.sort_by(|a, b| a.p99.total_cmp(&b.p99));
        let median = measured[measured.len() / 2];
        let range = |f: fn(&Run) -> f64| {
            let lo = measured.iter().map(f).fold(f64::INFINITY, f64::min);
            let hi = measured.iter().map(f).fold(0.0, f64::max);
            format!("{lo:.0}–{hi:.0}")
        };
        println!(
            "| {rate}/s ({:.0} %), reached {reached:.0}/s | {:.0} ({}) | {:.0} ({}) | {:.0} ({}) |",
            share * 100.0,
            median.p50,
            range(|r| r.p50),
            median.p99,
            range(|r| r.p99),
            median.p999,
            range(|r| r.p999),
        );
        rows.push((reached, median));
    }
    draw(&plot, &template, &handlers, capacity, &rows).expect("draw the latency plot");
    println!();
    println!("latency: plot written to {}", plot.display());
}

/// A plotted line: its name, the figure it takes from a run, its colour.
type Series = (&'static str, fn(&Run) -> f64, RGBColor);

/// Plots p50, p99 and p999 (median runs) against the rate, both axes logarithmic.
fn draw(
    path: &PathBuf,
    template: &str,
    handlers: &str,
    capacity: f64,
    rows: &[(f64, Run)],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_lo = rows.first().map_or(1.0, |r| r.0) / 1.5;
    let x_hi = rows.last().map_or(10.0, |r| r.0) * 1.5;
    let y_lo = rows.iter().map(|r| r.1.p50).fold(f64::INFINITY, f64::min) / 1.5;
    let y_hi = rows.iter().map(|r| r.1.p999).fold(1.0, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "server change → handler, {template}, {handlers} handlers (capacity {:.0} k/s)",
                capacity / 1e3
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("paced rate, events/s")
        .y_desc("latency, µs")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let series: [Series; 3] = [
        ("p50", |r| r.p50, BLUE),
        ("p99", |r| r.p99, RED),
        ("p999", |r| r.p999, BLACK),
    ];
    for (name, f, color) in series {
        let points: Vec<(f64, f64)> = rows.iter().map(|(x, r)| (*x, f(r))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}
