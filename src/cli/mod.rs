//! Subcommands of the `informer` binary.

pub(crate) mod cache;
pub(crate) mod decode;
pub(crate) mod duration;
pub(crate) mod elect;
pub(crate) mod flood;
pub(crate) mod lease_args;
pub(crate) mod serve;
pub(crate) mod shard;
pub(crate) mod sim_args;
pub(crate) mod watch;

/// A multi-thread tokio runtime with two workers (the machine this targets has two cores) and
/// the I/O and time drivers on, as every command uses.
///
/// # Errors
/// The OS error when the runtime's threads or its I/O driver cannot be created.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Runs `command` to completion on a two-worker tokio runtime (the machine this targets has two
/// cores) and returns the process exit code: 0 on `Ok`, 2 with `informer NAME: error` on stderr
/// when the runtime cannot start or the command fails.
pub(crate) fn block_on_command<F>(name: &str, command: F) -> i32
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("informer {name}: {e}");
            return 2;
        }
    };
    match runtime.block_on(command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("informer {name}: {e}");
            2
        }
    }
}

/// Completes after `duration` seconds (a value from [`duration::seconds`]), or when `None` at
/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first.
pub(crate) async fn until_stop(duration: Option<f64>) {
    match duration {
        Some(d) => tokio::time::sleep(std::time::Duration::from_secs_f64(d.max(0.0))).await,
        None => stop_signal().await,
    }
}

/// Completes at SIGINT (Ctrl-C) or, on Unix, SIGTERM (what `kill` and Kubernetes send first),
/// so that an elected or sharded process gives its Lease up either way. A handler that cannot
/// be installed leaves the other one waiting.
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => {
                        if r.is_err() {
                            term.recv().await;
                        }
                    }
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot handle SIGTERM; stopping at Ctrl-C only"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Sends `tracing` records (lease request failures, lost elections, handler panics) to
/// stderr, filtered by `RUST_LOG` (default `warn`; e.g. `RUST_LOG=informer=debug`).
pub(crate) fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
