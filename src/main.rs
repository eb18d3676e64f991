//! The `informer` command line: `flood` runs the whole pipeline against the embedded simulated
//! API server and verifies it; `serve` puts that server on a loopback socket; `watch` runs an
//! informer against a cluster; `decode` prints what is inside Kubernetes bytes.

use clap::{Parser, Subcommand};

mod cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// client-go's informer machinery, rebuilt in Rust.
#[derive(Debug, Parser)]
#[command(name = "informer", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode Kubernetes objects, lists, etcd values and watch captures and print their metadata.
    Decode(cli::decode::DecodeArgs),
    /// Flood the whole pipeline from the embedded API server and verify every view at the end.
    Flood(cli::flood::FloodArgs),
    /// Feed a trace written by `flood --record` back through the pipeline and verify it.
    Replay(cli::flood::replay::ReplayArgs),
    /// Serve the embedded API server over HTTP on 127.0.0.1 (for kubectl, kube-rs, client-go).
    Serve(cli::serve::ServeArgs),
    /// Run an informer against a cluster (or `informer serve`) and show a live summary.
    Watch(cli::watch::WatchArgs),
}

fn main() {
    // mimalloc asks for transparent huge pages (`MADV_HUGEPAGE`) on its arenas, and each first
    // touch of one zeroes 2 MiB in the faulting thread: at paced rates that stall put p99
    // server-change-to-handler latency in milliseconds (4 ms against 0.3 ms without, etcd Pods
    // at 17 600 events/s) and cost ~20 % more RSS, for no throughput (BENCHMARKS.md,
    // "Reaction latency"). A refusal (non-Linux, old kernel) changes nothing else.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Decode(args) => cli::decode::run(args),
        Command::Flood(args) => cli::flood::run(args),
        Command::Replay(args) => cli::flood::replay::run(args),
        Command::Serve(args) => cli::serve::run(args),
        Command::Watch(args) => cli::watch::run(args),
    };
    std::process::exit(code);
}
