//! What the real-apiserver tests write: typed objects that can be made and changed by number
//! ([`Fixture`]), the `widgets.example.com` custom resource, Pods with labels and node names.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{
    Api, ApiResource as KubeResource, DynamicObject, ListParams, ObjectMeta, PostParams,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What a typed resource needs for the write-and-converge test.
pub trait Fixture:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Object `i` (named `o-<i>`).
    fn make(i: usize) -> Self;
    /// A change that bumps its resourceVersion.
    fn change(&mut self, round: usize);
}

/// Metadata of object `i`: named `o-<i>`, labelled `app=app-<i % 7>`.
pub fn meta(i: usize) -> ObjectMeta {
    ObjectMeta {
        name: Some(format!("o-{i}")),
        labels: Some([("app".to_owned(), format!("app-{}", i % 7))].into()),
        ..Default::default()
    }
}

/// The one container of every Pod here (never run: no kubelet).
pub fn container() -> Container {
    Container {
        name: "main".into(),
        image: Some("registry.k8s.io/pause:3.10".into()),
        ..Default::default()
    }
}

impl Fixture for ConfigMap {
    fn make(i: usize) -> Self {
        ConfigMap {
            metadata: meta(i),
            data: Some([("i".to_owned(), i.to_string())].into()),
            ..Default::default()
        }
    }
    fn change(&mut self, round: usize) {
        self.data = Some([("round".to_owned(), round.to_string())].into());
    }
}

impl Fixture for Pod {
    fn make(i: usize) -> Self {
        Pod {
            metadata: meta(i),
            spec: Some(PodSpec {
                containers: vec![container()],
                ..Default::default()
            }),
            ..Default::default()
        }
    }
    fn change(&mut self, round: usize) {
        self.metadata
            .labels
            .get_or_insert_default()
            .insert("round".into(), round.to_string());
    }
}

impl Fixture for Deployment {
    fn make(i: usize) -> Self {
        let labels = [("app".to_owned(), format!("d-{i}"))].into();
        Deployment {
            metadata: meta(i),
            spec: DeploymentSpec {
                replicas: Some(1),
                selector: LabelSelector {
                    match_labels: Some(labels),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_owned(), format!("d-{i}"))].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![container()],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }
    fn change(&mut self, round: usize) {
        self.spec.replicas = Some(2 + round as i32);
    }
}

/// Creates the `widgets.example.com` CRD (namespaced, schemaless spec) and waits until the
/// server serves it.
pub async fn widget_crd(client: &kube::Client) -> KubeResource {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating the CRD: {e}"),
    }
    let ar = KubeResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    for _ in 0..300 {
        if widgets.list(&ListParams::default().limit(1)).await.is_ok() {
            return ar;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("widgets.example.com not served within 30 s");
}

/// Pod `i` with `app=app-<i % 7>`, `tier=<t>`, and `spec.nodeName=node-<i % 3>` (set at
/// creation: no scheduler runs).
pub fn labelled_pod(i: usize, tier: &str) -> Pod {
    let mut p = Pod::make(i);
    p.metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), tier.into());
    p.spec.as_mut().unwrap().node_name = Some(format!("node-{}", i % 3));
    p
}
