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

use bytes::Bytes;
use k8s_pb::api::core::v1::{Container, ContainerStatus, Pod, PodCondition, PodStatus};
use prost::Message;
use serde_json::{Map, Value};

use super::codec::json_rest;
use super::rng::{SimRng, mix};
use super::{SimError, Templates};
use crate::object::{DecodeError, Encoding};

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
                        serde_json::from_slice(t.raw()).map_err(|e| DecodeError::json(&e, 0))?;
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

// ----- values --------------------------------------------------------------------------------

/// A random generator that depends only on `value` and `index`: the pool's `index`-th value.
fn pool_rng(value: &str, index: u64) -> SimRng {
    let mut h = mix(index ^ 0x706f_6f6c);
    for chunk in value.as_bytes().chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    SimRng::new(h)
}

/// `s` with the same shape: runs of 8 or more hex digits get random hex digits, other digits
/// random digits (a leading non-zero digit stays non-zero); everything else is kept.
fn reshape(s: &str, rng: &mut SimRng) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            .count();
        if run >= 8 {
            out.extend((0..run).map(|_| HEX[rng.below(16) as usize]));
            i += run;
            continue;
        }
        let c = b[i];
        if c.is_ascii_digit() {
            let leading = i == 0 || !b[i - 1].is_ascii_digit();
            let lo =
                u64::from(leading && c != b'0' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
            out.push(b'0' + rng.range_inclusive(lo, 9) as u8);
        } else {
            out.push(c);
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// `s` with every run of 8 or more hex digits replaced by random hex digits (a digest, a
/// container ID); everything else kept (`sha256:` stays).
fn reshape_hex(s: &str, rng: &mut SimRng) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            .count();
        if run >= 8 {
            out.extend((0..run).map(|_| HEX[rng.below(16) as usize]));
            i += run;
        } else {
            out.extend_from_slice(&b[i..i + run.max(1)]);
            i += run.max(1);
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// A name (a node's): [`reshape`]d when it has digits; else its last `-` segment gets random
/// lower-case letters and digits (`kubernetes-minion-group-vlql` → `...-group-x7qf`), or, with
/// no `-`, a random five-character suffix is added (as generated names have).
fn vary_name(name: &str, rng: &mut SimRng) -> String {
    const ALNUM: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    if name.bytes().any(|c| c.is_ascii_digit()) {
        return reshape(name, rng);
    }
    let mut random = |n: usize| -> String {
        (0..n)
            .map(|_| char::from(ALNUM[rng.below(36) as usize]))
            .collect()
    };
    match name.rsplit_once('-') {
        Some((head, last)) if !last.is_empty() => format!("{head}-{}", random(last.len())),
        _ => format!("{name}-{}", random(5)),
    }
}

/// An identifier (a container ID): [`reshape`]d, or through [`vary_name`] when it has no digit
/// to change (a placeholder such as the HEAD fixture's).
fn vary_id(id: &str, rng: &mut SimRng) -> String {
    let v = reshape_hex(id, rng);
    if v == id { vary_name(id, rng) } else { v }
}

/// The host IP of node `node` made from the template's `ip`: its first two octets, the third
/// the node's number (so no two nodes of one template share an IP), the fourth fixed per
/// template. Not IPv4: [`vary_name`] from the node's pool.
fn node_ip(ip: &str, node: u64) -> String {
    match ip.parse::<std::net::Ipv4Addr>() {
        Ok(a) => {
            let [x, y, _, _] = a.octets();
            let fourth = 2 + pool_rng(ip, u64::MAX).below(250);
            format!("{x}.{y}.{}.{fourth}", node % 256)
        }
        Err(_) => vary_name(ip, &mut pool_rng(ip, node)),
    }
}

/// The name of node `node` made from the template's `name`: an AWS-style `ip-A-B-C-D...` name
/// spells `host_ip`; otherwise the last digits of the first DNS label become the node's number
/// (same width, at least 3), or, without digits, the last `-` segment its number in base 36 (the
/// same length). Distinct nodes get distinct names.
fn node_name(name: &str, node: u64, host_ip: Option<&str>) -> String {
    let (label, domain) = name.split_once('.').map_or((name, ""), |(l, d)| (l, d));
    let dot = if domain.is_empty() { "" } else { "." };
    if let (Some(rest), Some(ip)) = (label.strip_prefix("ip-"), host_ip)
        && rest.split('-').count() == 4
        && rest.split('-').all(|p| p.parse::<u8>().is_ok())
        && ip.parse::<std::net::Ipv4Addr>().is_ok()
    {
        return format!("ip-{}{dot}{domain}", ip.replace('.', "-"));
    }
    if let Some(end) = label.rfind(|c: char| c.is_ascii_digit()) {
        let start = label[..=end]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let width = (end + 1 - start).max(3);
        return format!(
            "{}{node:0width$}{}{dot}{domain}",
            &label[..start],
            &label[end + 1..]
        );
    }
    const B36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let (head, last) = label.rsplit_once('-').unwrap_or((label, ""));
    let len = last.len().max(2);
    let mut n = node;
    let mut digits = vec![b'0'; len];
    for d in digits.iter_mut().rev() {
        *d = B36[(n % 36) as usize];
        n /= 36;
    }
    let suffix = String::from_utf8(digits).unwrap_or_default();
    let sep = if last.is_empty() { "-" } else { "" };
    let head = if last.is_empty() {
        label
    } else {
        &label[..head.len() + 1]
    };
    format!("{head}{sep}{suffix}{dot}{domain}")
}

/// An IPv4 address keeps its first two octets (the cluster's network) and gets random last two;
/// anything else (an IPv6 address, a placeholder) goes through [`vary_name`].
fn vary_ip(ip: &str, rng: &mut SimRng) -> String {
    match ip.parse::<std::net::Ipv4Addr>() {
        Ok(a) => {
            let [x, y, _, _] = a.octets();
            format!("{x}.{y}.{}.{}", rng.below(256), 1 + rng.below(254))
        }
        Err(_) => vary_name(ip, rng),
    }
}

/// The pool's `index`-th image made from `image`: index 0 is the template's own; others keep
/// the repository and get another tag (the template's tag reshaped, or `v<major>.<minor>`).
fn pooled_image(image: &str, index: u64) -> String {
    if index == 0 {
        return image.to_owned();
    }
    let mut rng = pool_rng(image, index);
    let (repo, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (image, None),
    };
    match tag {
        Some(t) if t.bytes().any(|c| c.is_ascii_digit()) => {
            format!("{repo}:{}", reshape(t, &mut rng))
        }
        _ => format!("{repo}:v{}.{}", 1 + rng.below(9), rng.below(40)),
    }
}

/// The image ID of the pool's image `index` (the template's ID, reshaped unless index 0).
fn pooled_image_id(image_id: &str, index: u64) -> String {
    if index == 0 {
        image_id.to_owned()
    } else {
        reshape_hex(image_id, &mut pool_rng(image_id, index))
    }
}

/// Draws made once per object, shared by the spec and the status.
struct Draw {
    node: u64,
    pod_ip: Option<String>,
    shift: i64,
    containers: usize,
    volumes: usize,
    /// Image index per container position.
    images: Vec<u64>,
    /// Image index per init container position.
    init_images: Vec<u64>,
}

impl Draw {
    /// `shift`: how far to move every time (drawn when `None`).
    fn new(
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
    fn pod_ip(&mut self, ip: &str, host_ip: Option<&str>, rng: &mut SimRng) -> String {
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

/// An environment value: three in four from the variable's pool, the rest random.
fn env_value(value: &str, rng: &mut SimRng) -> String {
    if rng.below(4) < 3 {
        reshape(value, &mut pool_rng(value, rng.below(ENV_VALUES)))
    } else {
        reshape(value, rng)
    }
}

/// A restart count: mostly 0, sometimes a few.
fn restarts(rng: &mut SimRng) -> i32 {
    if rng.below(8) == 0 {
        1 + rng.below(5) as i32
    } else {
        0
    }
}

// ----- protobuf ------------------------------------------------------------------------------

fn vary_pod(pod: &mut Pod, shift: Option<i64>, rng: &mut SimRng) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let mut d = Draw::new(
        rng,
        shift,
        spec.containers.len(),
        spec.init_containers.len(),
        spec.volumes.len(),
    );
    spec.volumes.truncate(d.volumes);
    let kept: Vec<String> = spec.volumes.iter().filter_map(|v| v.name.clone()).collect();
    spec.containers.truncate(d.containers);
    for (i, c) in spec.containers.iter_mut().enumerate() {
        vary_container(c, d.images[i], &kept, rng);
    }
    for (i, c) in spec.init_containers.iter_mut().enumerate() {
        vary_container(c, d.init_images[i], &kept, rng);
    }
    let template_host = pod.status.as_ref().and_then(|s| s.host_ip.clone());
    let host = template_host.as_deref().map(|h| node_ip(h, d.node));
    if let Some(n) = &mut spec.node_name {
        *n = node_name(n, d.node, host.as_deref());
    }
    let images = spec_images(&spec.containers, &d.images);
    let init_images = spec_images(&spec.init_containers, &d.init_images);
    if let Some(status) = &mut pod.status {
        vary_status(status, &mut d, template_host.as_deref(), rng);
        status.container_statuses.retain(|s| {
            s.name
                .as_ref()
                .is_none_or(|n| images.iter().any(|i| &i.0 == n))
        });
        for s in &mut status.container_statuses {
            vary_container_status(s, &images, d.shift, rng);
        }
        for s in &mut status.init_container_statuses {
            vary_container_status(s, &init_images, d.shift, rng);
        }
    }
}

/// Per container: its name, its varied image and that image's pool index.
type Images = Vec<(String, Option<String>, u64)>;

fn spec_images(containers: &[Container], index: &[u64]) -> Images {
    containers
        .iter()
        .zip(index)
        .map(|(c, &i)| (c.name.clone().unwrap_or_default(), c.image.clone(), i))
        .collect()
}

fn vary_container(c: &mut Container, image: u64, volumes: &[String], rng: &mut SimRng) {
    if let Some(i) = &mut c.image {
        *i = pooled_image(i, image);
    }
    for e in &mut c.env {
        if let Some(v) = &mut e.value {
            *v = env_value(v, rng);
        }
    }
    c.volume_mounts
        .retain(|m| m.name.as_ref().is_none_or(|n| volumes.contains(n)));
}

fn shift_time(t: &mut Option<k8s_pb::apimachinery::pkg::apis::meta::v1::Time>, by: i64) {
    if let Some(t) = t
        && let Some(s) = &mut t.seconds
    {
        *s += by;
    }
}

/// The node's addresses, the Pod's IPs and the status and condition times.
fn vary_status(
    status: &mut PodStatus,
    d: &mut Draw,
    template_host: Option<&str>,
    rng: &mut SimRng,
) {
    if let Some(h) = &mut status.host_ip {
        *h = node_ip(h, d.node);
    }
    for h in &mut status.host_ips {
        if let Some(ip) = &mut h.ip {
            *ip = node_ip(ip, d.node);
        }
    }
    if let Some(ip) = status.pod_ip.clone() {
        status.pod_ip = Some(d.pod_ip(&ip, template_host, rng));
    }
    for p in &mut status.pod_ips {
        if let Some(ip) = p.ip.clone() {
            p.ip = Some(d.pod_ip(&ip, template_host, rng));
        }
    }
    shift_time(&mut status.start_time, d.shift);
    for c in &mut status.conditions {
        vary_condition(c, d.shift);
    }
}

fn vary_condition(c: &mut PodCondition, shift: i64) {
    shift_time(&mut c.last_transition_time, shift);
    shift_time(&mut c.last_probe_time, shift);
}

/// A container status: the image of its container (as varied in the spec), a fresh container
/// ID, a restart count, shifted times.
fn vary_container_status(s: &mut ContainerStatus, images: &Images, shift: i64, rng: &mut SimRng) {
    if let Some((_, spec_image, index)) = images
        .iter()
        .find(|(n, _, _)| s.name.as_deref() == Some(n.as_str()))
        && *index != 0
    {
        if spec_image.is_some() {
            s.image.clone_from(spec_image);
        }
        if let Some(i) = &mut s.image_id {
            *i = pooled_image_id(i, *index);
        }
    }
    let id = s.container_id.as_ref().map(|c| vary_id(c, rng));
    s.container_id.clone_from(&id);
    s.restart_count = s.restart_count.map(|_| restarts(rng));
    for state in [&mut s.state, &mut s.last_state].into_iter().flatten() {
        if let Some(r) = &mut state.running {
            shift_time(&mut r.started_at, shift);
        }
        if let Some(t) = &mut state.terminated {
            shift_time(&mut t.started_at, shift);
            shift_time(&mut t.finished_at, shift);
            if t.container_id.is_some() {
                t.container_id.clone_from(&id);
            }
        }
    }
}

// ----- JSON ----------------------------------------------------------------------------------

fn vary_json(doc: &mut Map<String, Value>, shift: Option<i64>, rng: &mut SimRng) {
    let len = |spec: Option<&Value>, key: &str| {
        spec.and_then(|s| s.get(key))
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let spec = doc.get("spec");
    let mut d = Draw::new(
        rng,
        shift,
        len(spec, "containers"),
        len(spec, "initContainers"),
        len(spec, "volumes"),
    );
    let template_host = doc.get("status").and_then(|s| str_at(s, "hostIP"));
    let host = template_host.as_deref().map(|h| node_ip(h, d.node));
    let mut images: Vec<(String, Option<String>, u64)> = Vec::new();
    let mut init_images = Vec::new();
    if let Some(spec) = doc.get_mut("spec").and_then(Value::as_object_mut) {
        let mut kept = Vec::new();
        if let Some(v) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
            v.truncate(d.volumes);
            kept = v.iter().filter_map(|v| str_at(v, "name")).collect();
        }
        if let Some(cs) = spec.get_mut("containers").and_then(Value::as_array_mut) {
            cs.truncate(d.containers);
            for (i, c) in cs.iter_mut().enumerate() {
                vary_json_container(c, d.images[i], &kept, rng);
                images.push((
                    str_at(c, "name").unwrap_or_default(),
                    str_at(c, "image"),
                    d.images[i],
                ));
            }
        }
        if let Some(cs) = spec.get_mut("initContainers").and_then(Value::as_array_mut) {
            for (i, c) in cs.iter_mut().enumerate() {
                vary_json_container(c, d.init_images[i], &kept, rng);
                init_images.push((
                    str_at(c, "name").unwrap_or_default(),
                    str_at(c, "image"),
                    d.init_images[i],
                ));
            }
        }
        if let Some(Value::String(n)) = spec.get_mut("nodeName") {
            *n = node_name(n, d.node, host.as_deref());
        }
    }
    let Some(status) = doc.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::String(h)) = status.get_mut("hostIP") {
        *h = node_ip(h, d.node);
    }
    for h in array(status, "hostIPs") {
        if let Some(Value::String(ip)) = h.get_mut("ip") {
            *ip = node_ip(ip, d.node);
        }
    }
    let template_host = template_host.as_deref();
    if let Some(Value::String(ip)) = status.get_mut("podIP") {
        *ip = d.pod_ip(ip, template_host, rng);
    }
    for p in array(status, "podIPs") {
        if let Some(Value::String(ip)) = p.get_mut("ip") {
            *ip = d.pod_ip(ip, template_host, rng);
        }
    }
    shift_json_time(status.get_mut("startTime"), d.shift);
    for c in array(status, "conditions") {
        shift_json_time(c.get_mut("lastTransitionTime"), d.shift);
        shift_json_time(c.get_mut("lastProbeTime"), d.shift);
    }
    if let Some(Value::Array(ss)) = status.get_mut("containerStatuses") {
        ss.retain(|s| str_at(s, "name").is_none_or(|n| images.iter().any(|i| i.0 == n)));
    }
    for s in array(status, "containerStatuses") {
        vary_json_container_status(s, &images, d.shift, rng);
    }
    for s in array(status, "initContainerStatuses") {
        vary_json_container_status(s, &init_images, d.shift, rng);
    }
}

fn str_at(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The objects in the array member `key` of `m` (none when absent or not an array).
fn array<'a>(m: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Value> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

fn vary_json_container(c: &mut Value, image: u64, volumes: &[String], rng: &mut SimRng) {
    let Some(c) = c.as_object_mut() else { return };
    if let Some(Value::String(i)) = c.get_mut("image") {
        *i = pooled_image(i, image);
    }
    for e in array(c, "env") {
        if let Some(Value::String(v)) = e.get_mut("value") {
            *v = env_value(v, rng);
        }
    }
    if let Some(Value::Array(ms)) = c.get_mut("volumeMounts") {
        ms.retain(|m| str_at(m, "name").is_none_or(|n| volumes.contains(&n)));
    }
}

fn vary_json_container_status(s: &mut Value, images: &Images, shift: i64, rng: &mut SimRng) {
    let Some(s) = s.as_object_mut() else { return };
    let name = s.get("name").and_then(Value::as_str).map(str::to_owned);
    if let Some((_, spec_image, index)) = images
        .iter()
        .find(|(n, _, _)| name.as_deref() == Some(n.as_str()))
        && *index != 0
    {
        if let (Some(Value::String(i)), Some(spec)) = (s.get_mut("image"), spec_image) {
            i.clone_from(spec);
        }
        if let Some(Value::String(i)) = s.get_mut("imageID") {
            *i = pooled_image_id(i, *index);
        }
    }
    let id = match s.get_mut("containerID") {
        Some(Value::String(c)) => {
            *c = vary_id(c, rng);
            Some(c.clone())
        }
        _ => None,
    };
    if let Some(r) = s.get_mut("restartCount").filter(|r| r.is_number()) {
        *r = restarts(rng).into();
    }
    for key in ["state", "lastState"] {
        let Some(state) = s.get_mut(key).and_then(Value::as_object_mut) else {
            continue;
        };
        for (_, phase) in state.iter_mut() {
            shift_json_time(phase.get_mut("startedAt"), shift);
            shift_json_time(phase.get_mut("finishedAt"), shift);
            if let (Some(Value::String(c)), Some(id)) = (phase.get_mut("containerID"), &id) {
                c.clone_from(id);
            }
        }
    }
}

/// Shifts an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SSZ`, fraction allowed) by `by`
/// seconds; other values are left alone.
fn shift_json_time(v: Option<&mut Value>, by: i64) {
    if let Some(Value::String(s)) = v
        && let Some(t) = parse_utc(s)
    {
        *s = format_utc(t + by, &s[19..]);
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS...`.
fn parse_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + se)
}

/// `t` as `YYYY-MM-DDTHH:MM:SS` followed by `rest` (the original's fraction and zone).
fn format_utc(t: i64, rest: &str) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{rest}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_shift() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2017-06-27T16:35:34Z",
            "2024-02-29T23:59:59Z",
        ] {
            let t = parse_utc(s).unwrap();
            assert_eq!(format_utc(t, &s[19..]), s);
        }
        assert_eq!(parse_utc("2017-06-27T16:35:34Z"), Some(1_498_581_334));
        let mut v = Value::from("2024-02-28T23:00:00.5Z");
        shift_json_time(Some(&mut v), 2 * 3600);
        assert_eq!(v, "2024-02-29T01:00:00.5Z");
        let mut not_time = Value::from("yesterday");
        shift_json_time(Some(&mut not_time), 60);
        assert_eq!(not_time, "yesterday");
    }

    #[test]
    fn values_keep_their_shape() {
        let mut rng = SimRng::new(7);
        let id = "docker://ef1d307d0a12f232b88037c61f577411b618f52975a2143801e5e49c4d0b0117";
        let v = reshape(id, &mut rng);
        assert_eq!(v.len(), id.len());
        assert!(v.starts_with("docker://") && v != id);
        assert!(v[9..].bytes().all(|c| c.is_ascii_hexdigit()));
        let ip = vary_ip("10.244.2.8", &mut rng);
        assert!(ip.starts_with("10.244."), "{ip}");
        assert!(ip.parse::<std::net::Ipv4Addr>().is_ok());
        assert_eq!(pooled_image("perl", 0), "perl");
        let other = pooled_image("perl", 3);
        assert!(other.starts_with("perl:v"), "{other}");
        assert_eq!(
            other,
            pooled_image("perl", 3),
            "a pool value depends on its index only"
        );
        assert_eq!(
            reshape("node-7", &mut pool_rng("node-7", 5)),
            reshape("node-7", &mut pool_rng("node-7", 5))
        );
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
            let raw = raw.raw();
            // Unknown.raw of the Pod: field 1 (empty metadata) first, then the rest.
            let (len, n) = crate::object::varint::read(&raw[1..]).unwrap();
            let rest = &raw[1 + n + len as usize..];
            assert_eq!(pod.encode_to_vec().len() + lost, rest.len());
        }
    }
}
