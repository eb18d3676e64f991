//! The fake cluster takes bodies in either encoding and serves objects in either, whatever it
//! keeps: a JSON write to a protobuf server (kube-rs, Python, JavaScript clients) and a
//! protobuf write to a JSON server (kubectl's typed commands) are converted by the Kubernetes
//! schema; a protobuf server's objects that match no JSON twin (varied Pods, a client's own
//! spec) are served as JSON through the same schema.

mod support;

use std::collections::BTreeMap;

use informer::object::{self, Encoding, GroupVersionKind, ObjectKey};
use informer::server::{ServerConfig, serve};
use prost::Message as _;
use support::runtime;

fn client(url: &str) -> kube::Client {
    kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
}

async fn raw_request(
    url: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, serde_json::Value) {
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", content_type),
    ];
    support::request(url, method, path, &headers, body).await
}

/// A k8s-pb Deployment `name` in `ns-0` running `image`, as protobuf with its envelope.
fn pb_deployment(name: &str, image: &str, resource_version: Option<&str>) -> Vec<u8> {
    use k8s_pb::api::apps::v1::{Deployment, DeploymentSpec};
    use k8s_pb::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec};
    use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    let d = Deployment {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns-0".into()),
            resource_version: resource_version.map(str::to_owned),
            ..Default::default()
        }),
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            selector: Some(LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: Some("app".into()),
                        image: Some(image.into()),
                        ports: vec![ContainerPort {
                            container_port: Some(8080),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    termination_grace_period_seconds: Some(0),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    object::encode_envelope(
        &GroupVersionKind::new("apps", "v1", "Deployment"),
        &d.encode_to_vec(),
    )
    .to_vec()
}

/// A JSON server (`informer serve --format json`) takes protobuf creates and updates, as
/// kubectl's typed commands send them: stored as JSON that kube-rs reads field for field
/// (`replicas: 0` and `terminationGracePeriodSeconds: 0` kept, an image change bumps the
/// generation); a protobuf body that is not a Deployment's message is a 400, not a 500.
#[test]
fn a_json_server_takes_protobuf_writes() {
    use k8s_openapi::api::apps::v1::Deployment;
    let rt = runtime();
    let sim = support::json_deployments();
    let server = rt.block_on(serve(
        sim.clone(),
        ServerConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    ));
    let server = server.unwrap();
    let url = server.url();
    rt.block_on(async {
        let pb = "application/vnd.kubernetes.protobuf";
        let path = "/apis/apps/v1/namespaces/ns-0/deployments";
        let (c, body) =
            raw_request(&url, "POST", path, pb, &pb_deployment("web", "web:1", None)).await;
        assert_eq!(c, 201, "{body}");
        let stored = sim.get(&ObjectKey::new("ns-0", "web")).unwrap();
        assert_eq!(stored.encoding(), Encoding::Json);
        let api: kube::Api<Deployment> = kube::Api::namespaced(client(&url), "ns-0");
        let d = api.get("web").await.unwrap();
        let spec = &d.spec;
        assert_eq!(spec.replicas, Some(0));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.termination_grace_period_seconds, Some(0));
        assert_eq!(pod.containers[0].image.as_deref(), Some("web:1"));
        assert_eq!(
            pod.containers[0].ports.as_ref().unwrap()[0].container_port,
            8080
        );
        assert_eq!(spec.selector.match_labels.as_ref().unwrap()["app"], "web");
        assert_eq!(d.metadata.generation, Some(1));

        let rv = d.metadata.resource_version.clone().unwrap();
        let (c, body) = raw_request(
            &url,
            "PUT",
            &format!("{path}/web"),
            pb,
            &pb_deployment("web", "web:2", Some(&rv)),
        )
        .await;
        assert_eq!(c, 200, "{body}");
        let d = api.get("web").await.unwrap();
        let pod = d.spec.template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("web:2"));
        assert_eq!(d.metadata.generation, Some(2));
        // A stale resourceVersion in protobuf is a conflict, as in JSON.
        let (c, _) = raw_request(
            &url,
            "PUT",
            &format!("{path}/web"),
            pb,
            &pb_deployment("web", "web:3", Some(&rv)),
        )
        .await;
        assert_eq!(c, 409);

        // The envelope says Deployment, the message is not one.
        let mut garbage = object::encode_envelope(
            &GroupVersionKind::new("apps", "v1", "Deployment"),
            &[0x12, 0x03, 0x0a, 0x01, 0x78, 0x1a, 0x02, 0xff, 0xff],
        )
        .to_vec();
        let (c, body) = raw_request(&url, "POST", path, pb, &garbage).await;
        assert_eq!(c, 400, "{body}");
        garbage.truncate(6);
        let (c, _) = raw_request(&url, "POST", path, pb, &garbage).await;
        assert_eq!(c, 400);
    });
    rt.block_on(server.shutdown());
}

/// A protobuf server takes any JSON write to a Pod's spec (merge and strategic merge
/// patches, a create of a client's own Pod): stored as protobuf that k8s-pb decodes with the
/// new fields, read back as the same JSON by kube-rs; a patch giving a field the wrong JSON
/// type is a 422 naming the field.
#[test]
fn a_protobuf_server_takes_json_spec_writes() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams, PostParams};
    let rt = runtime();
    let sim = support::sim("head", |c| {
        c.namespaces(1).initial_objects(3).target_objects(3)
    });
    let server = rt.block_on(support::start(&sim));
    let url = server.url();
    let key = sim.truth().objects.keys().next().unwrap().clone();
    rt.block_on(async {
        let api: kube::Api<Pod> = kube::Api::namespaced(client(&url), key.namespace());
        let patched = api
            .patch(
                key.name(),
                &PatchParams::default(),
                &Patch::Strategic(serde_json::json!({"spec": {
                    "activeDeadlineSeconds": 42,
                    "containers": [{"name": "nameValue", "image": "busybox:1.36",
                                    "resources": {"limits": {"cpu": "250m", "memory": 1048576}}}],
                    "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": -5}]
                }})),
            )
            .await
            .unwrap();
        let spec = patched.spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(42));
        let typed: k8s_pb::api::core::v1::Pod = sim.get(&key).unwrap().decode().unwrap();
        let pb_spec = typed.spec.unwrap();
        assert_eq!(pb_spec.active_deadline_seconds, Some(42));
        let c = pb_spec
            .containers
            .iter()
            .find(|c| c.name.as_deref() == Some("nameValue"))
            .unwrap();
        assert_eq!(c.image.as_deref(), Some("busybox:1.36"));
        let limits = &c.resources.as_ref().unwrap().limits;
        assert_eq!(limits["cpu"].string.as_deref(), Some("250m"));
        assert_eq!(limits["memory"].string.as_deref(), Some("1048576"));
        assert!(
            pb_spec
                .tolerations
                .iter()
                .any(|t| t.toleration_seconds == Some(-5))
        );
        // Read back through JSON: the same Pod kube-rs was answered.
        let again = api.get(key.name()).await.unwrap();
        assert_eq!(again.spec.unwrap().active_deadline_seconds, Some(42));

        // A client's own Pod (no template has its fields).
        let mine: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "mine", "labels": {"app": "mine"}},
            "spec": {"containers": [{"name": "c", "image": "mine:1",
                                     "env": [{"name": "E", "value": "é ✓"}]}],
                     "restartPolicy": "Never"}
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &mine).await.unwrap();
        assert_eq!(created.metadata.generation, Some(1));
        let stored = sim.get(&ObjectKey::new(key.namespace(), "mine")).unwrap();
        assert_eq!(stored.encoding(), Encoding::Protobuf);
        let typed: k8s_pb::api::core::v1::Pod = stored.decode().unwrap();
        let c = &typed.spec.as_ref().unwrap().containers[0];
        assert_eq!(c.env[0].value.as_deref(), Some("é ✓"));
        let listed = api.list(&Default::default()).await.unwrap();
        let found = listed
            .items
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("mine"))
            .unwrap();
        assert_eq!(
            found.spec.as_ref().unwrap().restart_policy.as_deref(),
            Some("Never")
        );

        // A patch that makes a value of the wrong type: 422 naming the field (a body of the
        // wrong type is a 400: `a_json_server_takes_protobuf_writes`).
        let bad = api
            .patch(
                key.name(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"activeDeadlineSeconds": "soon"}})),
            )
            .await;
        match bad {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{}", s.message);
                assert!(
                    s.message.contains("spec.activeDeadlineSeconds"),
                    "{}",
                    s.message
                );
            }
            other => panic!("expected a 400, got {other:?}"),
        }
    });
    rt.block_on(server.shutdown());
}

/// A protobuf server of varied Pods (`informer serve --vary`), with or without JSON twins,
/// serves them to JSON clients: every listed Pod's node, IP and images equal its protobuf form.
#[test]
fn varied_protobuf_pods_are_served_as_json() {
    use k8s_openapi::api::core::v1::Pod;
    let rt = runtime();
    for twins in [false, true] {
        let sim = support::sim("head", |c| {
            c.namespaces(1)
                .initial_objects(20)
                .target_objects(20)
                .vary(true)
        });
        let server = rt.block_on(async {
            if twins {
                support::start(&sim).await
            } else {
                serve(
                    sim.clone(),
                    ServerConfig::default(),
                    "127.0.0.1:0".parse().unwrap(),
                )
                .await
                .unwrap()
            }
        });
        rt.block_on(async {
            let api: kube::Api<Pod> = kube::Api::all(client(&server.url()));
            let listed = api.list(&Default::default()).await.unwrap();
            assert_eq!(listed.items.len(), 20);
            for p in &listed.items {
                let key = ObjectKey::new(
                    p.metadata.namespace.as_deref().unwrap(),
                    p.metadata.name.as_deref().unwrap(),
                );
                let typed: k8s_pb::api::core::v1::Pod = sim.get(&key).unwrap().decode().unwrap();
                let (spec, pb_spec) = (p.spec.as_ref().unwrap(), typed.spec.as_ref().unwrap());
                assert_eq!(spec.node_name, pb_spec.node_name);
                let images = |v: Vec<Option<String>>| v;
                assert_eq!(
                    images(spec.containers.iter().map(|c| c.image.clone()).collect()),
                    images(pb_spec.containers.iter().map(|c| c.image.clone()).collect())
                );
                assert_eq!(
                    p.status.as_ref().unwrap().pod_ip,
                    typed.status.as_ref().unwrap().pod_ip
                );
                assert_eq!(p.metadata.uid, typed.metadata.as_ref().unwrap().uid);
            }
        });
        rt.block_on(server.shutdown());
    }
}

/// What a protobuf server does with writes a reviewer tried: a protobuf body the schema cannot
/// read is a 400 and is not stored (JSON clients keep reading the resource); JSON writes are
/// validated as on a JSON server (422); empty strings Go writes without `omitempty`
/// (`imageID`) and times at the epoch survive; a JSON body without `apiVersion` and `kind` is
/// of the served kind; a quantity given as a large JSON integer keeps every digit.
#[test]
fn a_protobuf_server_checks_writes_as_a_json_server_does() {
    let rt = runtime();
    let sim = support::sim("head", |c| {
        c.namespaces(1).initial_objects(3).target_objects(3)
    });
    let server = rt.block_on(support::start(&sim));
    let url = server.url();
    let ns = sim
        .truth()
        .objects
        .keys()
        .next()
        .unwrap()
        .namespace()
        .to_owned();
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    rt.block_on(async {
        // A Pod whose spec (field 2) is sent as a varint.
        let mut meta = vec![0x0a, 0x03];
        meta.extend_from_slice(b"bad");
        let mut raw = vec![0x0a, meta.len() as u8];
        raw.extend_from_slice(&meta);
        raw.extend_from_slice(&[0x10, 0x05]);
        let body = object::encode_envelope(&GroupVersionKind::new("", "v1", "Pod"), &raw);
        let (c, msg) = raw_request(
            &url,
            "POST",
            &pods,
            "application/vnd.kubernetes.protobuf",
            &body,
        )
        .await;
        assert_eq!(c, 400, "{msg}");
        assert!(sim.get(&ObjectKey::new(&ns, "bad")).is_none());
        let (c, _) = raw_request(&url, "GET", &pods, "application/json", b"").await;
        assert_eq!(c, 200);

        let json = "application/json";
        let post = |doc: serde_json::Value| {
            let (url, pods) = (url.clone(), pods.clone());
            async move { raw_request(&url, "POST", &pods, json, doc.to_string().as_bytes()).await }
        };
        let (c, msg) = post(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "empty"}, "spec": {}}))
        .await;
        assert_eq!(c, 422, "{msg}");
        // No apiVersion or kind: the served kind.
        let (c, msg) = post(serde_json::json!({
            "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "c", "image": "i:1",
                "resources": {"limits": {"memory": 123456789012345678u64}}}]},
        }))
        .await;
        assert_eq!(c, 201, "{msg}");
        assert_eq!(
            msg.pointer("/spec/containers/0/resources/limits/memory"),
            Some(&serde_json::json!("123456789012345678"))
        );
        // A kubelet's status: a waiting container has `imageID: ""`; a fake clock at 0.
        let status = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "plain", "namespace": ns},
            "status": {"phase": "Pending", "startTime": "1970-01-01T00:00:00Z",
                "containerStatuses": [{"name": "c", "image": "i:1", "imageID": "",
                    "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        let (c, msg) = raw_request(
            &url,
            "PUT",
            &format!("{pods}/plain/status"),
            json,
            status.to_string().as_bytes(),
        )
        .await;
        assert_eq!(c, 200, "{msg}");
        let (_, got) = raw_request(&url, "GET", &format!("{pods}/plain"), json, b"").await;
        assert_eq!(
            got.pointer("/status/containerStatuses/0/imageID"),
            Some(&"".into())
        );
        assert_eq!(
            got.pointer("/status/startTime"),
            Some(&"1970-01-01T00:00:00Z".into())
        );
    });
    rt.block_on(server.shutdown());
}

/// A protobuf server of Deployments refuses JSON writes a JSON server refuses: negative
/// replicas, a selector that does not match the template's labels, a changed selector.
#[test]
fn a_protobuf_deployment_server_validates_json_writes() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams, PostParams};
    let rt = runtime();
    let dir = support::fixtures();
    let sim = informer::sim::SimServer::new(
        informer::sim::SimConfig::new(informer::sim::Templates::deployments(&dir).unwrap())
            .namespaces(1)
            .initial_objects(2)
            .target_objects(2),
    )
    .unwrap();
    let server = rt.block_on(serve(
        sim.clone(),
        ServerConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    ));
    let server = server.unwrap();
    rt.block_on(async {
        let api: kube::Api<Deployment> = kube::Api::namespaced(client(&server.url()), "ns-0");
        let web = |replicas: i32, selected: &str| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": selected}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "web:1"}]}}}
            }))
            .unwrap()
        };
        let code = |r: Result<Deployment, kube::Error>| match r {
            Err(kube::Error::Api(s)) => s.code,
            Ok(_) => 200,
            Err(e) => panic!("{e}"),
        };
        let pp = PostParams::default();
        assert_eq!(code(api.create(&pp, &web(-1, "web")).await), 422);
        assert_eq!(code(api.create(&pp, &web(1, "other")).await), 422);
        api.create(&pp, &web(1, "web")).await.unwrap();
        let moved = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(
                    serde_json::json!({"spec": {"selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "x"}}}}}),
                ),
            )
            .await;
        assert_eq!(code(moved), 422);
    });
    rt.block_on(server.shutdown());
}
