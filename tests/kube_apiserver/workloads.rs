//! Deployments with their ReplicaSets and Pods, made through the API as the deployment and
//! replicaset controllers would (none runs here), and the statuses the controller example must
//! report for them.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

use super::fixtures::{Fixture, container};

/// An owner reference to `o` (of `kind` in `apps/v1`), as the controller that made it sets.
pub fn controlled_by(kind: &str, o: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: o.name.clone().unwrap(),
        uid: o.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Deployment `d-<i>` with `replicas`, its ReplicaSet `d-<i>-h<i>` and `replicas` Pods
/// (`ready` of them Ready), made as the deployment and replicaset controllers would.
pub async fn deployment_family(
    client: &kube::Client,
    ns: &str,
    i: usize,
    replicas: i32,
    ready: usize,
) {
    let (deployments, sets, pods): (Api<Deployment>, Api<ReplicaSet>, Api<Pod>) = (
        Api::namespaced(client.clone(), ns),
        Api::namespaced(client.clone(), ns),
        Api::namespaced(client.clone(), ns),
    );
    let mut d = Deployment::make(i);
    d.metadata.name = Some(format!("d-{i}"));
    d.spec.replicas = Some(replicas);
    let d = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let hash = format!("h{i}");
    let mut labels = d.spec.template.metadata.clone().unwrap().labels.unwrap();
    labels.insert("pod-template-hash".into(), hash.clone());
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("d-{i}-{hash}")),
            labels: Some(labels.clone()),
            owner_references: Some(vec![controlled_by("Deployment", &d.metadata)]),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: d.spec.template.spec.clone(),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let rs = sets.create(&PostParams::default(), &rs).await.unwrap();
    for k in 0..replicas as usize {
        add_pod(&pods, &rs, k, k < ready).await;
    }
}

/// Pod `<rs>-<k>` owned by `rs`, made Ready through the status subresource when `ready`.
pub async fn add_pod(pods: &Api<Pod>, rs: &ReplicaSet, k: usize, ready: bool) {
    let name = format!("{}-{k}", rs.metadata.name.as_deref().unwrap());
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: rs.metadata.labels.clone(),
            owner_references: Some(vec![controlled_by("ReplicaSet", &rs.metadata)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container()],
            ..Default::default()
        }),
        ..Default::default()
    };
    pods.create(&PostParams::default(), &pod).await.unwrap();
    if ready {
        set_ready(pods, &name, true).await;
    }
}

/// Sets the Pod's `Ready` condition through the status subresource (as a kubelet would).
pub async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch =
        serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": status}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// What the controller must report for every Deployment of `ns`, computed from the server's
/// objects: desired replicas, the Pods a ReplicaSet of it controls, and the Ready ones.
pub async fn expected_statuses(client: &kube::Client, ns: &str) -> serde_json::Value {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = pods.list(&ListParams::default()).await.unwrap().items;
    let mut out = serde_json::Map::new();
    for d in deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let name = d.metadata.name.clone().unwrap();
        let owned: Vec<&Pod> = pods
            .iter()
            .filter(|p| {
                let hash = p.metadata.labels.as_ref().and_then(|l| l.get("pod-template-hash"));
                let owner = p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
                matches!((hash, owner), (Some(h), Some(o)) if o.kind == "ReplicaSet" && o.name == format!("{name}-{h}"))
            })
            .collect();
        let ready = owned
            .iter()
            .filter(|p| {
                p.status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
            .count();
        out.insert(
            format!("{ns}/{name}"),
            serde_json::json!({
                "generation": d.metadata.generation.unwrap(),
                "desired": d.spec.replicas.unwrap(),
                "pods": owned.len(),
                "ready": ready,
            }),
        );
    }
    serde_json::Value::Object(out)
}
