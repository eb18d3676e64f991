//! Varying a protobuf Pod (through the k8s-pb type).

use k8s_pb::api::core::v1::{Container, ContainerStatus, Pod, PodCondition, PodStatus};

use super::values::{
    env_value, node_ip, node_name, pooled_image, pooled_image_id, restarts, vary_id,
};
use super::{Draw, SimRng};

pub(super) fn vary_pod(pod: &mut Pod, shift: Option<i64>, rng: &mut SimRng) {
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
pub(super) type Images = Vec<(String, Option<String>, u64)>;

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
