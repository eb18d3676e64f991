//! kubectl against `informer serve`'s server: `get pods -A -o json` lists exactly the
//! server's pods, `get pods --watch -o name` prints changes as they happen. Skipped (with the
//! reason printed) where no kubectl is installed; `.ci/run` installs Debian's
//! `kubernetes-client` when it can.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{runtime, sim, start};

/// The kubectl binary, or `None` (with the reason printed) when there is none.
fn kubectl() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() {
        println!("skipped: kubectl not found on PATH (Debian package kubernetes-client)");
    }
    found
}

fn command(kubectl: &std::path::Path, url: &str, kubeconfig: &std::path::Path) -> Command {
    let mut c = Command::new(kubectl);
    // An empty kubeconfig: nothing from the machine's own configuration leaks in.
    c.env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .arg("--server")
        .arg(url)
        .arg("--request-timeout=20s");
    c
}

fn empty_kubeconfig(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("informer-kubectl-{tag}-{}", std::process::id()));
    std::fs::write(&p, "").unwrap();
    p
}

#[test]
fn kubectl_get_pods_json_lists_the_servers_pods() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(120).target_objects(120));
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("get");
    let out = command(&kubectl, &server.url(), &kc)
        .args(["get", "pods", "-A", "-o", "json", "--chunk-size=50"])
        .output()
        .unwrap();
    std::fs::remove_file(&kc).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: std::collections::BTreeMap<String, String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let truth: std::collections::BTreeMap<String, String> = sim
        .truth()
        .objects
        .iter()
        .map(|(k, o)| (k.to_string(), o.resource_version().to_owned()))
        .collect();
    assert_eq!(got, truth);
    // The typed fields came through the JSON twin: kubectl printed the fixture's image.
    assert_eq!(
        v["items"][0]["spec"]["containers"][0]["image"],
        "imageValue"
    );
    rt.block_on(server.shutdown());
}

#[test]
fn kubectl_watch_prints_events_as_they_happen() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(10).target_objects(10));
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("watch");
    let mut child = command(&kubectl, &server.url(), &kc)
        .args(["get", "pods", "-A", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("kubectl printed nothing for {what}"))
    };
    // The initial list: one line per pod.
    let mut initial: Vec<String> = (0..10).map(|_| next("the initial list")).collect();
    initial.sort();
    let mut expected: Vec<String> = sim
        .truth()
        .objects
        .values()
        .map(|o| format!("pod/{}", o.name()))
        .collect();
    expected.sort();
    assert_eq!(initial, expected);
    // Each change appears as it happens, in order.
    let keys: Vec<_> = sim.truth().objects.keys().take(3).cloned().collect();
    for key in &keys {
        let start = Instant::now();
        sim.update(key).unwrap();
        assert_eq!(next("an update"), format!("pod/{}", key.name()));
        assert!(start.elapsed() < Duration::from_secs(20));
    }
    let created = sim.create("ns-0", "brand-new").unwrap();
    assert_eq!(next("a create"), format!("pod/{}", created.name()));
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_file(&kc).ok();
    rt.block_on(server.shutdown());
}

/// Runs kubectl with `args`; its stdout, or a panic with stderr when it fails.
fn run(kubectl: &std::path::Path, url: &str, kc: &std::path::Path, args: &[&str]) -> String {
    let out = command(kubectl, url, kc).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl get` prints the columns it prints against a real cluster (the server answers
/// its Table requests), including `-o wide`, for pods, namespaces and events.
#[test]
fn kubectl_get_prints_the_table_columns() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(30).target_objects(30));
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("table");
    let url = server.url();
    let out = run(
        &kubectl,
        &url,
        &kc,
        &["get", "pods", "-A", "--chunk-size=7"],
    );
    let lines: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(lines.len(), 31, "{out}");
    let wide = run(&kubectl, &url, &kc, &["get", "pods", "-A", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().contains("NOMINATED NODE"),
        "{wide}"
    );
    let (key, _) = sim.truth().objects.into_iter().next().unwrap();
    let one = run(
        &kubectl,
        &url,
        &kc,
        &["get", "pod", "-n", key.namespace(), key.name()],
    );
    assert!(one.lines().nth(1).unwrap().starts_with(key.name()), "{one}");
    let ns = run(&kubectl, &url, &kc, &["get", "namespaces"]);
    assert!(ns.starts_with("NAME") && ns.contains("STATUS") && ns.contains("kube-system"));
    assert!(ns.contains("\nns-0 "), "{ns}");
    std::fs::remove_file(&kc).ok();
    rt.block_on(server.shutdown());
}

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns-1
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: IMAGE
";

/// kubectl writes to a JSON server as to a cluster: `apply` creates then updates (a new
/// generation), `label`, `patch` and `scale` change the object, `rollout status` waits until
/// the status (written here as a controller would, through the status subresource) shows the
/// rollout done, `describe` shows spec and status, `delete` removes it.
#[test]
fn kubectl_apply_patch_scale_rollout_status_describe_and_delete() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = support::json_deployments();
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("write");
    let url = server.url();
    let dir = std::env::temp_dir().join(format!("informer-kubectl-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("web.yaml");
    let k = |args: &[&str]| run(&kubectl, &url, &kc, args);
    let m = manifest.to_str().unwrap();
    // No OpenAPI documents are served: client-side validation is off.
    std::fs::write(&manifest, WEB.replace("IMAGE", "web:1")).unwrap();
    assert!(k(&["apply", "--validate=false", "-f", m]).contains("created"));
    std::fs::write(&manifest, WEB.replace("IMAGE", "web:2")).unwrap();
    assert!(k(&["apply", "--validate=false", "-f", m]).contains("configured"));
    let jp = |path: &str| {
        k(&[
            "get",
            "deploy",
            "-n",
            "ns-1",
            "web",
            "-o",
            &format!("jsonpath={{{path}}}"),
        ])
    };
    assert_eq!(jp(".spec.template.spec.containers[0].image"), "web:2");
    assert_eq!(jp(".metadata.generation"), "2");
    k(&["label", "deploy", "-n", "ns-1", "web", "tier=front"]);
    assert_eq!(jp(".metadata.labels.tier"), "front");
    k(&[
        "patch",
        "deploy",
        "-n",
        "ns-1",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/minReadySeconds","value":5}]"#,
    ]);
    k(&["scale", "deploy", "-n", "ns-1", "web", "--replicas=3"]);
    assert_eq!(jp(".spec.replicas"), "3");
    let generation = jp(".metadata.generation");
    assert_eq!(generation, "4");

    // rollout status waits for the controller's status.
    let mut waiting = command(&kubectl, &url, &kc)
        .args([
            "rollout",
            "status",
            "deploy/web",
            "-n",
            "ns-1",
            "--timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "finished before the status was written"
    );
    let status = format!(
        r#"{{"status":{{"observedGeneration":{generation},"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3}}}}"#
    );
    k(&[
        "patch",
        "deploy",
        "-n",
        "ns-1",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
    let done = waiting.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(text.contains("successfully rolled out"), "{text}");

    let described = k(&["describe", "deploy", "-n", "ns-1", "web"]);
    for want in [
        "Selector:",
        "app=web",
        "3 desired | 3 updated | 3 total | 3 available",
        "web:2",
    ] {
        assert!(described.contains(want), "{want:?} in {described}");
    }
    // kubectl's typed create sends protobuf: this JSON server converts it.
    assert!(
        k(&[
            "create",
            "deployment",
            "typed",
            "-n",
            "ns-1",
            "--image=typed:1"
        ])
        .contains("created")
    );
    assert_eq!(
        k(&[
            "get",
            "deploy",
            "-n",
            "ns-1",
            "typed",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ]),
        "typed:1"
    );
    assert!(k(&["delete", "deploy", "-n", "ns-1", "web"]).contains("deleted"));
    let gone = command(&kubectl, &url, &kc)
        .args(["get", "deploy", "-n", "ns-1", "web"])
        .output()
        .unwrap();
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_file(&kc).ok();
    rt.block_on(server.shutdown());
}

/// The simulated cluster of `informer serve --template deployments --template pod-states` is
/// coherent: a fresh Deployment has rolled out (`rollout status` succeeds at once), selects
/// its app's Pods (`get pods -l` with its selector finds them), has a real strategy; Pods
/// show a container state that fits their phase. Served in protobuf with JSON twins, as the
/// command serves it.
#[test]
fn the_simulated_cluster_is_coherent_for_kubectl() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let dir = support::fixtures();
    let config = |t: informer::sim::Templates, n: usize| {
        informer::sim::SimConfig::new(t)
            .seed(3)
            .namespaces(2)
            .apps(5)
            .initial_objects(n)
            .target_objects(n)
            .update_template(true)
    };
    let deployments = informer::sim::SimServer::new(config(
        informer::sim::Templates::deployments(&dir).unwrap(),
        10,
    ))
    .unwrap();
    let pods = informer::sim::SimServer::new(config(
        informer::sim::Templates::pod_states(&dir).unwrap(),
        60,
    ))
    .unwrap();
    let server = rt.block_on(async {
        informer::server::serve_many(
            vec![
                (
                    deployments.clone(),
                    informer::server::ServerConfig::default()
                        .json_twins(informer::sim::Templates::deployment_twins(&dir).unwrap()),
                ),
                (
                    pods.clone(),
                    informer::server::ServerConfig::default()
                        .json_twins(informer::sim::Templates::pod_state_twins(&dir).unwrap()),
                ),
            ],
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap()
    });
    let kc = empty_kubeconfig("coherent");
    let url = server.url();
    let k = |args: &[&str]| run(&kubectl, &url, &kc, args);
    let (key, _) = deployments.truth().objects.into_iter().next().unwrap();
    let (ns, name) = (key.namespace().to_owned(), key.name().to_owned());
    let d = format!("deploy/{name}");
    assert!(
        k(&["rollout", "status", "-n", &ns, &d, "--timeout=10s"])
            .contains("successfully rolled out")
    );
    let described = k(&["describe", "-n", &ns, &d]);
    assert!(described.contains(&format!("app={name}")), "{described}");
    assert!(
        described.contains("StrategyType:       RollingUpdate"),
        "{described}"
    );
    let selected = k(&[
        "get",
        "pods",
        "-n",
        &ns,
        "-l",
        &format!("app={name}"),
        "-o",
        "name",
    ]);
    let expected = pods
        .truth()
        .objects
        .values()
        .filter(|p| {
            p.namespace() == ns && p.meta().labels().get("app").is_some_and(|a| *a == *name)
        })
        .count();
    assert_eq!(selected.lines().count(), expected, "{selected}");
    let statuses = k(&["get", "pods", "-A", "--no-headers"]);
    for line in statuses.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // NAMESPACE NAME READY STATUS ...
        match cols[3] {
            "Running" => assert_eq!(cols[2], "1/1", "{line}"),
            "ContainerCreating" => assert_eq!(cols[2], "0/1", "{line}"),
            other => panic!("unexpected status {other}: {line}"),
        }
    }
    // Writes to the protobuf server in JSON that change a template's spec (a strategic merge
    // patch), and a typed create (protobuf) of a Deployment no template has, read back as
    // JSON: both through the Kubernetes schema.
    assert!(k(&["set", "image", "-n", &ns, &d, "*=web:9"]).contains("image updated"));
    let jp = |d: &str, path: &str| k(&["get", "-n", &ns, d, "-o", &format!("jsonpath={{{path}}}")]);
    assert_eq!(jp(&d, ".metadata.generation"), "2");
    for image in jp(&d, ".spec.template.spec.containers[*].image").split_whitespace() {
        assert_eq!(image, "web:9");
    }
    let typed: k8s_pb::api::apps::v1::Deployment = deployments.get(&key).unwrap().decode().unwrap();
    let pod = typed.spec.unwrap().template.unwrap().spec.unwrap();
    assert!(
        pod.containers
            .iter()
            .all(|c| c.image.as_deref() == Some("web:9"))
    );
    assert!(
        k(&[
            "create",
            "deployment",
            "web",
            "-n",
            &ns,
            "--image=nginx:1",
            "--replicas=2"
        ])
        .contains("created")
    );
    assert_eq!(
        jp("deploy/web", ".spec.template.spec.containers[0].image"),
        "nginx:1"
    );
    assert_eq!(jp("deploy/web", ".spec.replicas"), "2");
    std::fs::remove_file(&kc).ok();
    rt.block_on(server.shutdown());
}
