//! Generates the io.prometheus.client types from the vendored schema.

fn main() -> std::io::Result<()> {
    let proto = "proto/io/prometheus/client/metrics.proto";
    println!("cargo:rerun-if-changed={proto}");
    prost_build::Config::new()
        .compile_protos(&[proto], &["proto", "/usr/include"])
        .map_err(|e| {
            std::io::Error::other(format!(
                "{e}\n(protoc and google/protobuf/timestamp.proto come from Debian's \
                 protobuf-compiler and libprotobuf-dev: run scripts/install-deps.sh)"
            ))
        })
}
