//! [`Variation`]: per-object differences in a Pod's spec and status, as a real cluster's Pods
//! have them, so that objects stamped from one template do not share every byte outside their
//! metadata (which would flatter any compression or deduplication measured on them).
//!
//! What varies, per object (shapes kept from the template's own values):
//! - the node (`spec.nodeName`, `status.hostIP`/`hostIPs`): one of [`NODES`], each with its
//!   own name and host IP (an `ip-A-B-C-D` name spells its IP);
//! - `status.podIP`/`podIPs`: the template's network prefix (first two octets), the rest random
//!   (a `hostNetwork` Pod's, equal to its host IP in the template, is its node's);
//! - each container's and init container's image (spec and status alike, `imageID` digest):
//!   one of [`IMAGES`] per container;
//! - environment values: three in four one of [`ENV_VALUES`] per variable, the rest random;
//! - container IDs (random hex of the template's length), restart counts;
//! - every timestamp (`startTime`, container and init container `startedAt`/`finishedAt`,
//!   condition `lastTransitionTime`), moved together so that `startTime` falls up to two
//!   minutes after the object's `creationTimestamp`;
//! - the number of containers and volumes: between one and the template's (mounts of dropped
//!   volumes and statuses of dropped containers go with them).
//!
//! Protobuf templates are varied through the k8s-pb `Pod` type: a field it does not know is
//! dropped (the HEAD fixture, which sets every field of the newest schema, loses 712 of its
//! 13 195 bytes after `metadata`; the real etcd Pod none).
//!
//! Values drawn from a pool are a function of the pool index (a node's name is the same on
//! every Pod on that node), as Pods of one cluster share nodes, images and configuration.

mod json;
mod protobuf;
mod time;
mod values;

use bytes::Bytes;
use k8s_pb::api::core::v1::Pod;
use prost::Message;
use serde_json::{Map, Value};

use super::codec::json_rest;
use super::rng::{SimRng, mix};
use super::{SimError, Templates};
use crate::object::{DecodeError, Encoding};
use json::vary_json;
use protobuf::vary_pod;
use time::parse_utc;
use values::{node_ip, vary_ip};

/// Distinct nodes Pods are spread over.
pub(crate) const NODES: u64 = 200;
/// Distinct images per container position.
pub(crate) const IMAGES: u64 = 64;
/// Distinct values of a pooled environment variable.
pub(crate) const ENV_VALUES: u64 = 8;
/// Largest shift of a timestamp, seconds (30 days).
const MAX_SHIFT: u64 = 30 * 86_400;

/// A template in the form it is varied from.
#[derive(Debug)]
enum Typed {
    Protobuf(Box<Pod>),
    Json(Map<String, Value>),
}

impl Typed {
    /// The template's `status.startTime`, seconds since the epoch.
    fn start_time(&self) -> Option<i64> {
        match self {
            Typed::Protobuf(p) => p.status.as_ref()?.start_time.as_ref()?.seconds,
            Typed::Json(d) => parse_utc(d.get("status")?.get("startTime")?.as_str()?),
        }
    }
}

/// Makes varied copies of the templates' spec and status (see the module docs).
#[derive(Debug)]
pub(crate) struct Variation {
    typed: Vec<Typed>,
}

impl Variation {
    /// Decodes every template once.
    ///
    /// # Errors
    /// [`SimError::NotPods`] when the templates are not Pods; [`SimError::Encode`] for a
    /// template that does not decode as a Pod.
    pub(crate) fn new(templates: &Templates) -> Result<Self, SimError> {
        let gvk = templates.gvk();
        if gvk.kind != "Pod" || !gvk.group.is_empty() {
            return Err(SimError::NotPods(gvk.to_string()));
        }
        let mut typed = Vec::new();
        for t in templates.objects() {
            typed.push(match t.encoding() {
                Encoding::Protobuf => {
                    let mut pod: Pod = t.decode()?;
                    pod.metadata = None;
                    Typed::Protobuf(Box::new(pod))
                }
                Encoding::Json => {
                    let doc: Map<String, Value> =
                        serde_json::from_slice(&t.raw()?).map_err(|e| DecodeError::json(&e, 0))?;
                    Typed::Json(doc)
                }
            });
        }
        Ok(Variation { typed })
    }

    /// The template's top-level fields but `metadata`, varied by `seed`, in the form
    /// [`Codec::change_frame`](super::codec::Codec::change_frame) takes as the object's rest.
    /// Every time in the status moves with `status.startTime`, which lands up to two minutes
    /// after `created` (the object's `creationTimestamp`, seconds since the epoch), as a real
    /// Pod's does; a template without a start time has its times shifted by up to 30 days.
    pub(crate) fn rest(
        &self,
        template: usize,
        seed: u64,
        created: i64,
    ) -> Result<Bytes, DecodeError> {
        let mut rng = SimRng::new(mix(seed));
        let typed = &self.typed[template];
        let shift = typed
            .start_time()
            .map(|start| created + rng.below(120) as i64 - start);
        match typed {
            Typed::Protobuf(pod) => {
                let mut pod = (**pod).clone();
                vary_pod(&mut pod, shift, &mut rng);
                Ok(Bytes::from(pod.encode_to_vec()))
            }
            Typed::Json(doc) => {
                let mut doc = doc.clone();
                vary_json(&mut doc, shift, &mut rng);
                json_rest(doc)
            }
        }
    }
}

/// Draws made once per object, shared by the spec and the status.
pub(super) struct Draw {
    pub(super) node: u64,
    pub(super) pod_ip: Option<String>,
    pub(super) shift: i64,
    pub(super) containers: usize,
    pub(super) volumes: usize,
    /// Image index per container position.
    pub(super) images: Vec<u64>,
    /// Image index per init container position.
    pub(super) init_images: Vec<u64>,
}

impl Draw {
    /// `shift`: how far to move every time (drawn when `None`).
    pub(super) fn new(
        rng: &mut SimRng,
        shift: Option<i64>,
        containers: usize,
        init: usize,
        volumes: usize,
    ) -> Self {
        let keep = |rng: &mut SimRng, n: usize| {
            if n > 1 {
                1 + rng.below(n as u64) as usize
            } else {
                n
            }
        };
        Draw {
            node: rng.below(NODES),
            pod_ip: None,
            shift: shift.unwrap_or_else(|| rng.below(MAX_SHIFT) as i64),
            containers: keep(rng, containers),
            volumes: keep(rng, volumes),
            images: (0..containers).map(|_| rng.below(IMAGES)).collect(),
            init_images: (0..init).map(|_| rng.below(IMAGES)).collect(),
        }
    }

    /// The object's Pod IP made from the template's `ip`: its node's host IP when the
    /// template's Pod IP is its host IP (a `hostNetwork` Pod), else its own.
    pub(super) fn pod_ip(&mut self, ip: &str, host_ip: Option<&str>, rng: &mut SimRng) -> String {
        let node = self.node;
        self.pod_ip
            .get_or_insert_with(|| {
                if host_ip == Some(ip) {
                    node_ip(ip, node)
                } else {
                    vary_ip(ip, rng)
                }
            })
            .clone()
    }
}

#[cfg(test)]
mod round_trip {
    use super::*;
    use crate::object::ObjectMeta;
    use crate::sim::default_fixtures_dir;

    /// The typed form a template is varied from keeps the real Pod's every field; the HEAD
    /// fixture (every field of the newest schema) loses the few that the k8s-pb types do not
    /// know (712 of its 13 195 bytes after `metadata`).
    #[test]
    fn templates_survive_the_typed_round_trip() {
        let dir = default_fixtures_dir().unwrap();
        for (t, lost) in [
            (Templates::etcd_pod(&dir).unwrap(), 0),
            (Templates::head_pod(&dir).unwrap(), 712),
        ] {
            let v = Variation::new(&t).unwrap();
            let Typed::Protobuf(pod) = &v.typed[0] else {
                panic!("protobuf template")
            };
            let raw = t.objects()[0].with_meta(ObjectMeta::default()).unwrap();
            let raw = raw.raw().unwrap();
            // Unknown.raw of the Pod: field 1 (empty metadata) first, then the rest.
            let (len, n) = crate::object::varint::read(&raw[1..]).unwrap();
            let rest = &raw[1 + n + len as usize..];
            assert_eq!(pod.encode_to_vec().len() + lost, rest.len());
        }
    }
}
