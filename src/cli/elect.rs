//! `informer elect`: one candidate in a leader election over a Lease, printing each change as
//! a JSON line (who leads, until when this one may act).

use std::time::Duration;

use informer::election::{LeaderElectionConfig, LeaderElector, Leadership};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

use super::lease_args::{LeaseArgs, emit, instant_ns, wall_ns};

/// Arguments of `informer elect`.
#[derive(Debug, clap::Args)]
pub(crate) struct ElectArgs {
    /// The Lease's name.
    #[arg(long, default_value = "informer-elect")]
    lease: String,
    #[command(flatten)]
    common: LeaseArgs,
}

/// Runs the command; returns the process exit code: 0 when stopped (by `--duration` or a
/// signal, after releasing the Lease), 1 when it led and lost the Lease (so that a supervisor
/// restarts it, as a client-go controller exits when it stops leading), 2 on an error.
pub(crate) fn run(args: &ElectArgs) -> i32 {
    let mut lost = false;
    let code = super::block_on_command("elect", async {
        lost = run_async(args).await? == Leadership::Lost;
        Ok(())
    });
    if code == 0 && lost { 1 } else { code }
}

async fn run_async(args: &ElectArgs) -> Result<Leadership, String> {
    let client = args.common.client().await?;
    let identity = args.common.identity();
    let config = LeaderElectionConfig::new(&args.lease, &identity).timing(args.common.timing());
    let leases = kube::Api::<Lease>::namespaced(client, &args.common.lease_namespace);
    let elector = LeaderElector::new(leases, config).map_err(|e| e.to_string())?;
    emit(
        json!({"event": "candidate", "identity": identity, "lease": args.lease, "t_ns": wall_ns() as u64}),
    );
    let run = elector.run(super::until_stop(args.common.duration));
    tokio::pin!(run);
    let mut states = elector.watch();
    let renew_deadline = args.common.timing().renew_deadline;
    let mut last_until = None;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let end = loop {
        tokio::select! {
            end = &mut run => break end,
            Ok(()) = states.changed() => {
                // Leading and losing show in the renewals below; only a change of leader
                // seen from outside is written here.
                if let Leadership::Following { leader } = states.borrow_and_update().clone() {
                    emit(json!({"event": "following", "leader": leader, "t_ns": wall_ns() as u64}));
                }
            }
            _ = tick.tick() => {}
        }
        // Every renewal moves the deadline: the timeline a checker needs (this process acts
        // as leader until the last deadline it printed, at most).
        let until = elector.leading_until();
        if until != last_until {
            match (last_until, until) {
                // The term began no earlier than the renewal request that won it, which started
                // one renew deadline before the first deadline.
                (None, Some(u)) => emit(json!({"event": "leading", "t_ns": wall_ns() as u64,
                    "from_ns": instant_ns(u - renew_deadline) as u64, "until_ns": instant_ns(u) as u64})),
                (Some(_), Some(u)) => emit(
                    json!({"event": "renewed", "t_ns": wall_ns() as u64, "until_ns": instant_ns(u) as u64}),
                ),
                (Some(_), None) => {
                    emit(json!({"event": "stopped_leading", "t_ns": wall_ns() as u64}))
                }
                (None, None) => {}
            }
            last_until = until;
        }
    };
    if last_until.is_some() {
        emit(json!({"event": "stopped_leading", "t_ns": wall_ns() as u64}));
    }
    let name = match end {
        Leadership::Lost => "lost",
        _ => "stopped",
    };
    emit(json!({"event": name, "t_ns": wall_ns() as u64}));
    Ok(end)
}
