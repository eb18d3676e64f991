//! Varied objects (`SimConfig::vary`): every Pod gets its own spec and status, shaped like its
//! template's values, deterministic for a seed, kept across the flood's updates; without the
//! flag every object of a template shares its bytes outside `metadata`.

use std::collections::BTreeSet;

use informer::object::Object;
use informer::sim::{FloodMix, SimConfig, SimError, SimServer, Templates, default_fixtures_dir};
use k8s_pb::api::core::v1::Pod;

const N: usize = 300;

fn sim(templates: Templates, vary: bool, seed: u64) -> SimServer {
    SimServer::new(
        SimConfig::new(templates)
            .seed(seed)
            .initial_objects(N)
            // Floods hold the count: after the initial objects, mostly updates.
            .mix(FloodMix {
                target_objects: N,
                ..FloodMix::default()
            })
            .vary(vary),
    )
    .unwrap()
}

fn objects(sim: &SimServer) -> Vec<std::sync::Arc<Object>> {
    sim.truth().objects.into_values().collect()
}

/// What a Pod looks like outside its metadata, as the fields the variation touches.
#[derive(Debug, Default)]
struct Fields {
    node: String,
    pod_ip: String,
    images: Vec<String>,
    container_ids: Vec<String>,
    start_time: String,
    /// `status.startTime` − `metadata.creationTimestamp`, seconds.
    started_after: Option<i64>,
    containers: usize,
    volumes: usize,
}

fn fields_pb(o: &Object) -> Fields {
    let p: Pod = o.decode().expect("a varied Pod decodes as a Pod");
    let spec = p.spec.unwrap_or_default();
    let status = p.status.unwrap_or_default();
    Fields {
        node: spec.node_name.unwrap_or_default(),
        pod_ip: status.pod_ip.unwrap_or_default(),
        images: spec
            .containers
            .iter()
            .filter_map(|c| c.image.clone())
            .collect(),
        container_ids: status
            .container_statuses
            .iter()
            .filter_map(|c| c.container_id.clone())
            .collect(),
        start_time: format!("{:?}", status.start_time.and_then(|t| t.seconds)),
        started_after: status
            .start_time
            .and_then(|t| t.seconds)
            .zip(o.meta().creation_timestamp().as_ref())
            .map(|(s, c)| s - c.seconds),
        containers: spec.containers.len(),
        volumes: spec.volumes.len(),
    }
}

fn fields_json(o: &Object) -> Fields {
    let v: serde_json::Value =
        serde_json::from_slice(&o.raw().unwrap()).expect("a varied Pod is JSON");
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let list = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
    Fields {
        node: s(&v["spec"]["nodeName"]),
        pod_ip: s(&v["status"]["podIP"]),
        images: list(&v["spec"]["containers"])
            .iter()
            .map(|c| s(&c["image"]))
            .collect(),
        container_ids: list(&v["status"]["containerStatuses"])
            .iter()
            .map(|c| s(&c["containerID"]))
            .filter(|c| !c.is_empty())
            .collect(),
        start_time: s(&v["status"]["startTime"]),
        started_after: None,
        containers: list(&v["spec"]["containers"]).len(),
        volumes: list(&v["spec"]["volumes"]).len(),
    }
}

fn distinct<T: Ord>(it: impl IntoIterator<Item = T>) -> usize {
    it.into_iter().collect::<BTreeSet<_>>().len()
}

/// The bytes of an object after its metadata (protobuf: the `Unknown.raw` fields but 1).
fn rest(o: &Object) -> Vec<u8> {
    o.with_meta(Default::default())
        .unwrap()
        .raw()
        .unwrap()
        .to_vec()
}

#[test]
fn protobuf_pods_differ_in_spec_and_status_with_the_templates_shapes() {
    let dir = default_fixtures_dir().unwrap();
    for templates in [
        Templates::etcd_pod(&dir).unwrap(),
        Templates::head_pod(&dir).unwrap(),
    ] {
        let base = fields_pb(&templates.objects()[0]);
        let objs = objects(&sim(templates, true, 1));
        assert_eq!(objs.len(), N);
        let f: Vec<Fields> = objs.iter().map(|o| fields_pb(o)).collect();
        // Nodes from a pool, Pod IPs nearly unique in the template's network.
        let nodes = distinct(f.iter().map(|f| f.node.clone()));
        assert!((20..=200).contains(&nodes), "{nodes} nodes");
        assert!(distinct(f.iter().map(|f| f.pod_ip.clone())) > N * 9 / 10);
        let prefix: String = base.pod_ip.split('.').take(2).collect::<Vec<_>>().join(".");
        assert!(f.iter().all(|f| f.pod_ip.starts_with(&prefix)), "{prefix}");
        // Every container ID its own, of the template's length.
        let ids: Vec<&String> = f.iter().flat_map(|f| &f.container_ids).collect();
        assert_eq!(distinct(ids.iter()), ids.len());
        // A real ID keeps its length and scheme; a placeholder gets a random suffix.
        let b = &base.container_ids[0];
        if b.bytes().any(|c| c.is_ascii_digit()) {
            let scheme = &b[..b.find("://").map_or(0, |i| i + 3)];
            assert!(
                ids.iter()
                    .all(|i| i.len() == b.len() && i.starts_with(scheme))
            );
        } else {
            assert!(ids.iter().all(|i| i.starts_with(b.as_str())));
        }
        // Images: the same repositories, several tags.
        let repo = |i: &str| i.split(':').next().unwrap_or_default().to_owned();
        let repos: BTreeSet<String> = base.images.iter().map(|i| repo(i)).collect();
        assert!(
            f.iter()
                .flat_map(|f| &f.images)
                .all(|i| repos.contains(&repo(i)))
        );
        assert!(distinct(f.iter().flat_map(|f| f.images.clone())) > repos.len());
        // A Pod starts up to two minutes after it is created.
        assert!(
            f.iter()
                .all(|f| f.started_after.is_some_and(|s| (0..120).contains(&s))),
            "{:?}",
            f.iter()
                .map(|f| f.started_after)
                .take(5)
                .collect::<Vec<_>>()
        );
        // Counts between one and the template's.
        assert!(
            f.iter()
                .all(|f| (1..=base.containers).contains(&f.containers))
        );
        assert!(f.iter().all(|f| f.volumes <= base.volumes));
        if base.containers > 1 {
            assert!(distinct(f.iter().map(|f| f.containers)) > 1);
        }
        // No two objects share their bytes outside metadata.
        assert_eq!(distinct(objs.iter().map(|o| rest(o))), N);
    }
}

#[test]
fn json_pods_vary_too() {
    let dir = default_fixtures_dir().unwrap();
    let templates = Templates::openshift_json(&dir).unwrap();
    let n_templates = templates.len();
    let objs = objects(&sim(templates, true, 2));
    let f: Vec<Fields> = objs.iter().map(|o| fields_json(o)).collect();
    assert!(distinct(f.iter().map(|f| f.node.clone())) > 10);
    // Three of the seven templates are hostNetwork Pods (Pod IP = host IP, one per node).
    assert!(distinct(f.iter().map(|f| f.pod_ip.clone())) > N / 2);
    let started: Vec<&Fields> = f.iter().filter(|f| !f.start_time.is_empty()).collect();
    assert!(started.len() > N / 2);
    // Creations one resourceVersion (one second) apart, starts up to two minutes later.
    assert!(distinct(started.iter().map(|f| f.start_time.clone())) > started.len() / 4);
    assert!(
        started
            .iter()
            .all(|f| f.start_time.len() == "2021-07-07T12:00:00Z".len()
                && f.start_time.ends_with('Z')),
        "timestamps keep RFC 3339"
    );
    let raws = distinct(objs.iter().map(|o| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.raw().unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("metadata");
        v.to_string()
    }));
    assert!(
        raws > N * 9 / 10,
        "{raws} distinct bodies from {n_templates} templates"
    );
}

/// What a helper trying `--vary` found wrong once: a node with two host IPs (or one IP on two
/// nodes), `ip-A-B-C-D` names not spelling their IP, digests renamed (`sha918:`), a status
/// image other than its container's, init containers mounting dropped volumes.
#[test]
fn varied_pods_stay_coherent() {
    let dir = default_fixtures_dir().unwrap();
    let objs = objects(&sim(Templates::openshift_json(&dir).unwrap(), true, 5));
    let mut node_ip = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    let mut ip_node = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for o in &objs {
        let v: serde_json::Value = serde_json::from_slice(&o.raw().unwrap()).unwrap();
        let (spec, status) = (&v["spec"], &v["status"]);
        let name = o.key().to_string();
        if let (Some(n), Some(h)) = (spec["nodeName"].as_str(), status["hostIP"].as_str()) {
            node_ip.entry(n.into()).or_default().insert(h.into());
            ip_node.entry(h.into()).or_default().insert(n.into());
            if let Some(rest) = n.strip_prefix("ip-") {
                let spelled = rest.split('.').next().unwrap().replace('-', ".");
                assert_eq!(spelled, h, "{name}: {n}");
            }
        }
        let volumes: BTreeSet<&str> = spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["name"].as_str())
            .collect();
        let mut images = std::collections::BTreeMap::new();
        for key in ["containers", "initContainers"] {
            for c in spec[key].as_array().into_iter().flatten() {
                images.insert(c["name"].as_str().unwrap(), c["image"].as_str().unwrap());
                for m in c["volumeMounts"].as_array().into_iter().flatten() {
                    let m = m["name"].as_str().unwrap();
                    assert!(volumes.contains(m), "{name}: mount {m} of a dropped volume");
                }
            }
        }
        for key in ["containerStatuses", "initContainerStatuses"] {
            for c in status[key].as_array().into_iter().flatten() {
                let n = c["name"].as_str().unwrap();
                if let Some(id) = c["imageID"].as_str().filter(|i| i.contains('@')) {
                    assert!(id.contains("@sha256:"), "{name}: {id}");
                }
                let spec_image = images[n];
                let status_image = c["image"].as_str().unwrap();
                // The template's own image (pool index 0) keeps the status form it had.
                if !spec_image.contains("@sha256:") && status_image != spec_image {
                    let t = |i: &str| i.rsplit_once(':').map(|x| x.1.to_owned());
                    assert_eq!(t(status_image), t(spec_image), "{name}: {n}");
                }
            }
        }
    }
    assert!(node_ip.len() > 20);
    for (n, ips) in &node_ip {
        assert_eq!(ips.len(), 1, "node {n} has host IPs {ips:?}");
    }
    for (ip, nodes) in &ip_node {
        assert_eq!(nodes.len(), 1, "host IP {ip} on nodes {nodes:?}");
    }
}

#[test]
fn without_the_flag_a_templates_objects_share_their_body() {
    let dir = default_fixtures_dir().unwrap();
    let objs = objects(&sim(Templates::etcd_pod(&dir).unwrap(), false, 1));
    assert_eq!(distinct(objs.iter().map(|o| rest(o))), 1);
}

#[test]
fn same_seed_same_objects_and_updates_keep_the_body() {
    let dir = default_fixtures_dir().unwrap();
    let a = sim(Templates::etcd_pod(&dir).unwrap(), true, 9);
    let b = sim(Templates::etcd_pod(&dir).unwrap(), true, 9);
    let raw = |s: &SimServer| -> Vec<Vec<u8>> {
        objects(s)
            .iter()
            .map(|o| o.raw().unwrap().to_vec())
            .collect()
    };
    assert_eq!(raw(&a), raw(&b));
    let c = sim(Templates::etcd_pod(&dir).unwrap(), true, 10);
    assert_ne!(raw(&a), raw(&c));

    let before = a.truth().objects;
    a.step(500).unwrap();
    let mut updated = 0;
    for (k, o) in &a.truth().objects {
        if let Some(old) = before.get(k) {
            assert_eq!(rest(old), rest(o), "{k}: an update changes metadata only");
            updated += usize::from(old.resource_version() != o.resource_version());
        }
    }
    assert!(updated > 100, "{updated} objects updated");
}

/// With the Pod-state templates an update moves a Pod to another state: its status changes,
/// its node, IP and images stay.
#[test]
fn a_pod_moving_to_its_next_state_keeps_its_node_ip_and_images() {
    let dir = default_fixtures_dir().unwrap();
    let s = SimServer::new(
        SimConfig::new(Templates::pod_states(&dir).unwrap())
            .seed(3)
            .initial_objects(100)
            .update_template(true)
            .mix(FloodMix {
                target_objects: 100,
                ..FloodMix::default()
            })
            .vary(true),
    )
    .unwrap();
    let before = s.truth().objects;
    s.step(400).unwrap();
    let mut moved = 0;
    for (k, o) in &s.truth().objects {
        let Some(old) = before.get(k) else { continue };
        let (a, b) = (fields_pb(old), fields_pb(o));
        assert_eq!(
            (&a.node, &a.pod_ip, &a.images),
            (&b.node, &b.pod_ip, &b.images),
            "{k}"
        );
        let phase = |o: &Object| o.decode::<Pod>().unwrap().status.unwrap().phase;
        moved += usize::from(phase(old) != phase(o));
    }
    assert!(moved > 0, "no Pod changed phase");
}

#[test]
fn only_pods_vary() {
    let dir = default_fixtures_dir().unwrap();
    let Err(err) = SimServer::new(SimConfig::new(Templates::deployments(&dir).unwrap()).vary(true))
    else {
        panic!("Deployments cannot vary");
    };
    assert!(
        matches!(err, SimError::NotPods(ref k) if k.contains("Deployment")),
        "{err}"
    );
}
