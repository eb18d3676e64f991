//! The `informer` command line: `flood` runs the whole pipeline against the embedded simulated
//! API server and verifies it; `serve` puts that server on a loopback socket; `watch` runs an
//! informer against a cluster; `elect` and `shard` stand in a leader election or a shard group
//! over Leases; `decode` prints what is inside Kubernetes bytes.

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
    /// Stand in a leader election over a Lease and print who leads, as JSON lines (exit code 1
    /// after losing the lead).
    Elect(cli::elect::ElectArgs),
    /// Decode Kubernetes objects, lists, etcd values and watch captures and print their metadata.
    Decode(cli::decode::DecodeArgs),
    /// Flood the whole pipeline from the embedded API server and verify every view at the end.
    Flood(cli::flood::FloodArgs),
    /// Feed a trace written by `flood --record` back through the pipeline and verify it.
    Replay(cli::flood::replay::ReplayArgs),
    /// Serve the embedded API server over HTTP on 127.0.0.1 (for kubectl, kube-rs, client-go).
    Serve(cli::serve::ServeArgs),
    /// Join a shard group over Leases: cache and "reconcile" this member's share of a
    /// resource, printing views, cache changes and claims as JSON lines.
    Shard(cli::shard::ShardArgs),
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
    cli::init_logging();
    if matches!(cli.command, Command::Watch(_)) {
        purge_freed_memory_at_once();
    }
    let code = match &cli.command {
        Command::Decode(args) => cli::decode::run(args),
        Command::Elect(args) => cli::elect::run(args),
        Command::Shard(args) => cli::shard::run(args),
        Command::Flood(args) => cli::flood::run(args),
        Command::Replay(args) => cli::flood::replay::run(args),
        Command::Serve(args) => cli::serve::run(args),
        Command::Watch(args) => cli::watch::run(args),
    };
    std::process::exit(code);
}

/// Re-executes this process (same pid, same arguments) with `MIMALLOC_PURGE_DELAY=0` and
/// `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072`, each unless the variable is already set
/// (then it is left to the user).
///
/// mimalloc hands freed pages back to the OS only after a delay, and then only when the thread
/// that owns them allocates again: once `informer watch` has synced and compressed its cache,
/// its threads go quiet and the memory of the received list stays resident. 100 000 varied
/// HEAD Pods, `--compression zstd` (2026-12-04, AMD EPYC): 925 MiB RSS at the end with the
/// default delay, 241 MiB with 0 (and 248 MiB with 1 ms). The option is read when the allocator
/// starts, before `main`, hence the re-exec rather than setting it here. `informer flood` keeps
/// the default: at 0 its throughput fell by about a fifth (132–136 k → 108–109 k events/s,
/// etcd Pods, 2 runs each).
///
/// zstd's dictionary trainer allocates with the C library's `malloc`, several megabytes at a
/// time, many times over: glibc serves the first from `mmap`, then raises its threshold and
/// serves the rest from the training thread's arena, which it keeps after the thread is gone
/// (7.4 MB of a 100 000 etcd Pod cache's 101 MB RSS, 2026-12-07). A fixed threshold keeps
/// them all in `mmap`, handed back when freed: 1 011 → 945–957 B of RSS per cached etcd Pod.
#[cfg(unix)]
fn purge_freed_memory_at_once() {
    use std::os::unix::process::CommandExt;
    const PURGE: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "0");
    const TUNABLES: (&str, &str) = ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072");
    let unset: Vec<_> = [PURGE, TUNABLES]
        .into_iter()
        .filter(|(var, _)| std::env::var_os(var).is_none())
        .collect();
    if unset.is_empty() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    // `exec` only returns on failure; the command then runs with the defaults.
    let _ = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .envs(unset)
        .exec();
}

#[cfg(not(unix))]
fn purge_freed_memory_at_once() {}
