//! Compiles our own XLA `.proto` declarations (in `proto/xla/`) with prost-build,
//! using the pure-Rust `protox` compiler so that no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/xla/xla_data.proto",
        "proto/xla/hlo.proto",
        "proto/xla/compile_options.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
