//! What the controller of [`crate::hpa`] must end up with, computed from two simulators'
//! truth (a server of Deployments and a server of Pods with the same seed, namespaces and
//! apps), for `examples/controller.rs` and `tests/controller.rs`.
//!
//! It does not use the controller's Pod-to-Deployment mapping: the simulator labels each Pod
//! `app: app-N` and makes it owned (through the ReplicaSet `app-N-<hash>`) by the Deployment
//! `app-N` of its namespace, so the expected owner is read from the label instead of the owner
//! reference.

use std::collections::{BTreeMap, HashMap};

use informer::object::{DecodeError, ObjectKey};
use informer::sim::Truth;
use k8s_pb::api::apps::v1::Deployment;
use k8s_pb::api::core::v1::Pod;

use crate::hpa::ScaleStatus;

/// The status every Deployment of `deployments` must have given the Pods of `pods`.
///
/// # Errors
/// When an object of either truth does not decode as its kind.
pub(crate) fn expected(
    deployments: &Truth,
    pods: &Truth,
) -> Result<BTreeMap<ObjectKey, ScaleStatus>, DecodeError> {
    let mut out = BTreeMap::new();
    for (key, obj) in &deployments.objects {
        let d: Deployment = obj.decode()?;
        out.insert(
            key.clone(),
            ScaleStatus {
                generation: obj.meta().generation().unwrap_or(0),
                desired: d.spec.and_then(|s| s.replicas).unwrap_or(1),
                pods: 0,
                ready: 0,
            },
        );
    }
    for obj in pods.objects.values() {
        let Some(app) = obj.meta().labels().get("app") else {
            continue;
        };
        let Some(status) = out.get_mut(&ObjectKey::new(obj.namespace(), app)) else {
            continue; // orphan: its Deployment does not exist
        };
        let p: Pod = obj.decode()?;
        status.pods += 1;
        let ready = p.status.is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.r#type.as_deref() == Some("Ready") && c.status.as_deref() == Some("True")
            })
        });
        status.ready += u32::from(ready);
    }
    Ok(out)
}

/// `None` when every Deployment of `deployments` carries, in its `status`, the counts of
/// `expected` (as the controller writes them: `observedGeneration`, `replicas`,
/// `readyReplicas`); otherwise how many differ, with up to three examples.
///
/// # Errors
/// When a Deployment does not decode.
pub(crate) fn written_diff(
    expected: &BTreeMap<ObjectKey, ScaleStatus>,
    deployments: &Truth,
) -> Result<Option<String>, DecodeError> {
    let mut wrong = Vec::new();
    for (key, obj) in &deployments.objects {
        let d: Deployment = obj.decode()?;
        let s = d.status.unwrap_or_default();
        let got = (
            s.observed_generation.unwrap_or(0),
            s.replicas.unwrap_or(0),
            s.ready_replicas.unwrap_or(0),
        );
        let want = expected
            .get(key)
            .map(|e| (e.generation, e.pods as i32, e.ready as i32));
        if Some(got) != want {
            wrong.push(format!(
                "{key}: written (observedGeneration, replicas, ready) {got:?}, want {want:?}"
            ));
        }
    }
    Ok((!wrong.is_empty()).then(|| {
        format!(
            "{} of {} written statuses wrong: {:?}",
            wrong.len(),
            deployments.objects.len(),
            &wrong[..wrong.len().min(3)]
        )
    }))
}

/// `None` when `got` equals `expected`; otherwise how they differ: counts of missing, extra
/// and wrong statuses, with up to three examples of each.
pub(crate) fn diff(
    expected: &BTreeMap<ObjectKey, ScaleStatus>,
    got: &HashMap<ObjectKey, ScaleStatus>,
) -> Option<String> {
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    let mut extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(*k)).collect();
    extra.sort();
    let wrong: Vec<_> = expected
        .iter()
        .filter_map(|(k, want)| {
            got.get(k)
                .filter(|g| *g != want)
                .map(|g| format!("{k}: got {g:?}, want {want:?}"))
        })
        .collect();
    if missing.is_empty() && extra.is_empty() && wrong.is_empty() {
        return None;
    }
    Some(format!(
        "{} statuses for {} deployments: {} missing {:?}, {} extra {:?}, {} wrong {:?}",
        got.len(),
        expected.len(),
        missing.len(),
        &missing[..missing.len().min(3)],
        extra.len(),
        &extra[..extra.len().min(3)],
        wrong.len(),
        &wrong[..wrong.len().min(3)],
    ))
}
