//! Compiles `proto/` with prost-build, parsing the schema with protox (pure Rust: no system
//! `protoc` is needed).

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
    Ok(())
}
