//! Varying a JSON Pod (a `serde_json` document).

use serde_json::{Map, Value};

use super::protobuf::Images;
use super::time::shift_json_time;
use super::values::{
    env_value, node_ip, node_name, pooled_image, pooled_image_id, restarts, vary_id,
};
use super::{Draw, SimRng};

pub(super) fn vary_json(doc: &mut Map<String, Value>, shift: Option<i64>, rng: &mut SimRng) {
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
