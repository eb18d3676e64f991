//! `informer flood`: the whole pipeline against the embedded simulated API server. Objects are
//! stamped from real fixtures, listed and watched through the real wire format, flooded with
//! creates/updates/deletes, and at the end the store and every handler's view are compared
//! with the simulator's truth. `informer replay` feeds a recorded flood back through it.

mod args;
mod clock;
mod faults;
mod pipeline;
mod progress;
pub(crate) mod replay;
mod report;
mod source;
mod view;
mod wait;

use std::sync::Arc;

use informer::reflector::ListerWatcher;
use informer::trace::{RecordingListerWatcher, TraceWriter};
use informer::{Informer, InformerConfig};

pub(crate) use args::FloodArgs;
use args::Transport;
use pipeline::run_pipeline;
use source::{HttpSource, Source, build_sim};

/// Runs `informer flood`; the process exit code (1 when verification fails, 2 on an error).
pub(crate) fn run(args: &FloodArgs) -> i32 {
    match flood(args) {
        Ok(ok) => i32::from(!ok),
        Err(e) => {
            eprintln!("informer flood: {e}");
            2
        }
    }
}

/// Runs the flood over the transport asked for, recording if asked; whether it verified.
fn flood(args: &FloodArgs) -> Result<bool, String> {
    if args.slow_handlers > args.handlers {
        return Err(format!(
            "--slow-handlers {} is more than --handlers {}",
            args.slow_handlers, args.handlers
        ));
    }
    if args.fault_every.is_some() && args.server.is_some() {
        return Err("--fault-every needs the simulator in this process (not --server)".into());
    }
    let runtime = crate::cli::runtime().map_err(|e| e.to_string())?;
    let config = args.informer_config();
    let writer = match &args.record {
        Some(path) => Some(TraceWriter::create(path, "pods").map_err(|e| e.to_string())?),
        None => None,
    };
    let ok = if args.transport == Transport::InProcess && args.server.is_none() {
        let (sim, _) = build_sim(args)?;
        let source = Source::Local(sim.clone());
        let w = writer.as_ref();
        through(args, &runtime, config, w, sim, &source, "in-process")
    } else {
        let http = HttpSource::connect(args, &runtime)?;
        let w = writer.as_ref();
        let ok = through(
            args,
            &runtime,
            config,
            w,
            http.lw,
            &http.source,
            &http.label,
        );
        if let Some(h) = http.handle {
            runtime.block_on(h.shutdown());
        }
        ok
    };
    if let Some(w) = writer {
        w.finish().map_err(|e| e.to_string())?;
    }
    ok
}

/// Runs the pipeline with an informer on `lw` (recorded to `writer`, if any).
fn through<L: ListerWatcher>(
    args: &FloodArgs,
    runtime: &tokio::runtime::Runtime,
    config: InformerConfig,
    writer: Option<&Arc<TraceWriter>>,
    lw: L,
    source: &Source,
    transport: &str,
) -> Result<bool, String> {
    match writer {
        Some(w) => {
            let informer = Informer::new(RecordingListerWatcher::new(lw, w.clone()), config);
            run_pipeline(args, runtime, informer, source, transport, Some(w))
        }
        None => run_pipeline(
            args,
            runtime,
            Informer::new(lw, config),
            source,
            transport,
            None,
        ),
    }
}
