//! The HTTP subcommands as a user runs them: `informer serve` prints its URL and serves;
//! `informer flood --transport http --server URL` floods it through the control endpoint and
//! verifies the informer's store against an exact list; `informer watch` prints a live summary
//! and a final report; `informer flood --transport http` (server in the same process) verifies.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_informer"))
}

/// Starts `informer serve` with `args`; returns the child and the URL it printed.
fn serve(args: &[&str]) -> (Child, String) {
    let mut child = bin()
        .arg("serve")
        .args(args)
        .args(["--status-every", "0", "--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // Keep reading: the server prints a line per served resource, and a closed pipe would fail
    // its later writes.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    (child, url)
}

#[test]
fn flood_through_a_running_informer_serve() {
    let (mut server, url) = serve(&[
        "--objects",
        "300",
        "--flow-control",
        "true",
        "--template",
        "etcd-pod",
    ]);
    let out = bin()
        .args([
            "flood",
            "--transport",
            "http",
            "--server",
            &url,
            "--events",
            "3000",
            "--handlers",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["relists"], 0, "{v}");
    assert!(v["transport"].as_str().unwrap().starts_with("http"), "{v}");
    assert!(v["objects"].as_u64().unwrap() >= 300, "{v}");

    // The same server, watched with the live summary for a moment.
    let out = bin()
        .args([
            "watch",
            "--server",
            &url,
            "--resource",
            "po",
            "--interval",
            "0.3",
            "--duration",
            "1.5",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("watching /api/v1/pods (kind Pod)"), "{text}");
    assert!(text.contains("final report"), "{text}");
    assert!(text.contains("synced:            true"), "{text}");
    let objects = v["objects"].as_u64().unwrap();
    assert!(
        text.contains(&format!("objects:           {objects} in 10 namespaces")),
        "{text}"
    );
    server.kill().ok();
    server.wait().ok();
}

#[test]
fn flood_over_http_in_one_process_in_both_encodings() {
    for accept in ["protobuf", "json"] {
        let out = bin()
            .args([
                "flood",
                "--transport",
                "http",
                "--accept",
                accept,
                "--objects",
                "300",
                "--events",
                "3000",
                "--handlers",
                "1",
                "--template",
                "head-pod",
                "--json",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["verified"], true, "{accept}: {v}");
        assert!(
            v["watch_bytes"].as_u64().unwrap() > 3000 * 10_000,
            "{accept}: {v}"
        );
    }
}

#[test]
fn watch_reports_a_missing_resource() {
    let (mut server, url) = serve(&["--objects", "10"]);
    let out = bin()
        .args([
            "watch",
            "--server",
            &url,
            "--resource",
            "deployments.apps",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("doesn't have a resource type"), "{err}");
    server.kill().ok();
    server.wait().ok();
}

/// `informer serve --template deployments --template pod-states`: one server, two resources
/// with their own `--objects`, both watchable in protobuf and in JSON (the JSON twins of the
/// state templates); more `--objects` values than templates is refused.
#[test]
fn serve_takes_repeated_templates_with_their_own_object_counts() {
    let (mut server, url) = serve(&[
        "--template",
        "deployments",
        "--template",
        "pod-states",
        "--objects",
        "40",
        "--objects",
        "300",
    ]);
    for (resource, path, objects) in [
        ("deployments.apps", "/apis/apps/v1/deployments", 40),
        ("pods", "/api/v1/pods", 300),
    ] {
        for json in [false, true] {
            let mut cmd = bin();
            cmd.args(["watch", "--server", &url, "--resource", resource]);
            cmd.args(["--interval", "0.5", "--duration", "0.5"]);
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{resource} json={json}: {text} {err}");
            assert!(
                text.contains(&format!("resource:          {path}")),
                "{text}"
            );
            assert!(text.contains("synced:            true"), "{text}");
            assert!(
                text.contains(&format!("objects:           {objects} in ")),
                "{resource} json={json}: {text}"
            );
        }
    }
    server.kill().ok();
    server.wait().ok();

    let out = bin()
        .args([
            "serve",
            "--objects",
            "1",
            "--objects",
            "2",
            "--duration",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 --objects values for 1 --template values"),
        "{err}"
    );
}

/// `informer watch --compression zstd` compresses the whole cache once synced and reports it
/// (`cache` in `--report-json`); `--compression none` keeps the received bytes.
#[test]
fn watch_reports_cache_bytes_with_and_without_compression() {
    let (mut server, url) = serve(&["--objects", "400", "--template", "etcd-pod"]);
    for compression in ["zstd", "none"] {
        let out = bin()
            .args([
                "watch",
                "--server",
                &url,
                "--interval",
                "10",
                "--duration",
                "3",
            ])
            .args(["--compression", compression, "--report-json"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        assert!(text.contains("cache:             400 objects"), "{text}");
        let json = text.lines().last().unwrap();
        let v: serde_json::Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
        let cache = &v["cache"];
        assert_eq!(cache["objects"], 400, "{v}");
        assert_eq!(cache["compression"], compression, "{v}");
        let ratio = cache["ratio"].as_f64().unwrap();
        if compression == "zstd" {
            assert_eq!(cache["compressed_objects"], 400, "{v}");
            assert!(ratio < 0.5, "{v}");
            assert!(cache["dictionary_bytes"].as_u64().unwrap() > 0, "{v}");
        } else {
            assert_eq!(cache["compressed_objects"], 0, "{v}");
            assert!((ratio - 1.0).abs() < 1e-9, "{v}");
        }
        assert!(
            cache["raw_bytes_per_object"].as_f64().unwrap() > 1000.0,
            "{v}"
        );
    }
    server.kill().ok();
    server.wait().ok();
}

/// `GET path` (JSON) from the server at `url`, over a plain HTTP/1.0 connection.
fn get_json(url: &str, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    serde_json::from_str(body).unwrap()
}

/// `informer watch -l ... --field-selector ... --streaming-list` against `informer serve`: the
/// server evaluates both selectors (on the streaming list too), so the cache holds exactly
/// the Pods that match, counted here from the unfiltered list.
#[test]
fn watch_with_selectors_and_a_streaming_list_caches_exactly_the_matching_pods() {
    let (mut server, url) = serve(&["--objects", "300", "--template", "pod-states"]);
    let all = get_json(&url, "/api/v1/pods");
    let items = all["items"].as_array().unwrap();
    let expected = items
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] != "app-0" && p["status"]["phase"] == "Running")
        .count();
    assert!(
        expected > 0 && expected < items.len(),
        "{expected} of {}",
        items.len()
    );
    let out = bin()
        .args([
            "watch",
            "--server",
            &url,
            "--interval",
            "10",
            "--duration",
            "3",
        ])
        .args([
            "-l",
            "app!=app-0",
            "--field-selector",
            "status.phase=Running",
        ])
        .args(["--streaming-list", "--report-json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(v["synced"], true, "{v}");
    assert_eq!(v["objects"], expected, "{v}");
    assert_eq!(v["last_error"], serde_json::Value::Null, "{v}");
    let stats = get_json(&url, "/informer/v1/stats");
    assert_eq!(stats["lists"], 1, "only the unfiltered list above: {stats}");
    server.kill().ok();
    server.wait().ok();
}

/// A request the server refuses: `informer watch` prints the server's message as it
/// happens and in the final report, and fails when it never synced.
#[test]
fn watch_shows_the_servers_error_and_fails_when_it_never_synced() {
    let (mut server, url) = serve(&["--objects", "10"]);
    let out = bin()
        .args([
            "watch",
            "--server",
            &url,
            "--interval",
            "10",
            "--duration",
            "2",
        ])
        .args(["--field-selector", "spec.foo=x"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("error: list with resourceVersion=\"0\" failed")
            && stderr.contains("field label not supported: spec.foo"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("(retrying)").count(),
        1,
        "shown once: {stderr}"
    );
    assert!(stdout.contains("last error:        list with"), "{stdout}");
    assert!(stderr.contains("never synced"), "{stderr}");
    server.kill().ok();
    server.wait().ok();
}
