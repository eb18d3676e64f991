//! Compiles `proto/` with prost-build, parsing the schema with protox (pure Rust: no system
//! `protoc` is needed). With the `server` feature it also writes `k8s.fds`, the descriptor set
//! of `proto/k8s/` (the Kubernetes API schema the server converts protobuf and JSON with).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/runtime.proto",
        "proto/meta.proto",
        "proto/etcd.proto",
        "proto/trace.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .btree_map(["."])
        .compile_fds(fds)?;
    if std::env::var_os("CARGO_FEATURE_SERVER").is_some() {
        k8s_schema()?;
    }
    Ok(())
}

/// `proto/k8s/**/*.proto` (written by `scripts/gen-k8s-schema.py`) as one encoded
/// `FileDescriptorSet` in `$OUT_DIR/k8s.fds`.
fn k8s_schema() -> Result<(), Box<dyn std::error::Error>> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "proto") {
                let rel = p.strip_prefix("proto/k8s").map_err(std::io::Error::other)?;
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(std::path::Path::new("proto/k8s"), &mut files)?;
    files.sort();
    let fds = protox::compile(&files, ["proto/k8s"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("k8s.fds");
    std::fs::write(out, prost::Message::encode_to_vec(&fds))?;
    Ok(())
}
