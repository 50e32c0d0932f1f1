//! `XLA_FLAGS` honoured as JAX honours it: dump flags dump, the host device count
//! sets the CPU client's devices, unknown flags are an error naming them, and the
//! program's own settings win over the flags.

use std::process::Command;

use xlaclient::{Builder, Client, CompileOptions, RuntimeError, Shape};

fn module() -> xlaclient::Computation {
    let b = Builder::new("flagged");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    b.build(&x.relu()).unwrap()
}

/// Runs the test `name` of this binary in a child process with `XLA_FLAGS=flags`.
fn in_child(name: &str, flags: &str, dir: &std::path::Path) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--include-ignored"])
        .env("XLA_FLAGS", flags)
        .env("XLACLIENT_FLAGS_TEST_DIR", dir)
        .env("XLACLIENT_COMPILE_CACHE", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} with XLA_FLAGS={flags}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run by the test below, in a child with XLA_FLAGS set"]
fn child_with_flags() {
    let dir = std::path::PathBuf::from(std::env::var("XLACLIENT_FLAGS_TEST_DIR").unwrap());
    // --xla_force_host_platform_device_count=3
    let client = Client::cpu().unwrap();
    assert_eq!(client.addressable_devices().len(), 3);
    // --xla_dump_to=<dir>: compiling dumps the module's passes as text.
    let exe = client.compile(module()).unwrap();
    let dumped: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(
        dumped
            .iter()
            .any(|e| e.file_name().to_string_lossy().contains("flagged")),
        "{dumped:?}"
    );
    let x = client
        .buffer_from_host(&[-1.0f32, 2.0, -3.0, 4.0], &[4])
        .unwrap();
    assert_eq!(
        exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![0.0, 2.0, 0.0, 4.0]
    );
}

#[test]
#[ignore = "run by the test below, in a child with a bad XLA_FLAGS"]
fn child_with_a_bad_flag() {
    // The plugins abort the process on an unknown flag when a client is made
    // ("Unknown flag in XLA_FLAGS"): the crate refuses it first.
    let e = Client::cpu().unwrap_err();
    match e {
        RuntimeError::InvalidOption { option, reason } => {
            assert_eq!(option, "XLA_FLAGS");
            assert!(reason.contains("--xla_no_such_flag"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn xla_flags_from_the_environment_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    in_child(
        "child_with_flags",
        &format!(
            "--xla_force_host_platform_device_count=3 --xla_dump_to={}",
            dir.path().display()
        ),
        dir.path(),
    );
    in_child("child_with_a_bad_flag", "--xla_no_such_flag=1", dir.path());
}

#[test]
fn flags_given_in_code_dump_and_yield_to_explicit_settings() {
    let client = Client::cpu().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = CompileOptions::new().xla_flags(&format!(
        "--xla_dump_to={} --xla_cpu_enable_fast_min_max=true",
        dir.path().display()
    ));
    client.compile_with(module(), &opts).unwrap();
    assert!(std::fs::read_dir(dir.path()).unwrap().count() > 0);
    // The flags sit under the program's own settings: fast_min_max(false) wins.
    use prost::Message;
    let bytes = opts.clone().fast_min_max(false).to_bytes();
    let p = xlaclient::proto::CompileOptionsProto::decode(&bytes[..]).unwrap();
    let d = p.executable_build_options.unwrap().debug_options.unwrap();
    assert_eq!(d.xla_cpu_enable_fast_min_max, Some(false));
    let p = xlaclient::proto::CompileOptionsProto::decode(&opts.to_bytes()[..]).unwrap();
    let d = p.executable_build_options.unwrap().debug_options.unwrap();
    assert_eq!(d.xla_cpu_enable_fast_min_max, Some(true));
    assert_eq!(d.xla_dump_to.as_deref(), Some(dir.path().to_str().unwrap()));
    // A bad flag given in code is refused at compile time, naming it.
    let e = client
        .compile_with(
            module(),
            &CompileOptions::new().xla_flags("--xla_dump_too=/x"),
        )
        .unwrap_err();
    assert!(e.to_string().contains("--xla_dump_too"), "{e}");
}

/// A loop of 10 steps `x = x * 0.5 + i` (`i` the step as f32) over `f32[4]`.
fn small_loop() -> xlaclient::Computation {
    let b = Builder::new("small_loop");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let y = b.fori_loop(0, 10, x, |i, x| {
        &(x * 0.5) + &i.convert(xlaclient::ElementType::F32)
    });
    b.build(&y).unwrap()
}

#[test]
fn backend_extra_options_reach_the_cpu_backend() {
    // `--xla_backend_extra_options=key=value,...` fills DebugOptions'
    // xla_backend_extra_options map, which XLA's CPU backend reads: with
    // xla_cpu_small_while_loop_byte_threshold above the loop's footprint it compiles
    // the while loop into one kernel (a call marked `xla_cpu_small_call` in the
    // optimized module); with 0 it leaves the loop to the runtime. Same numbers
    // either way, checked against plain Rust.
    let client = Client::cpu().unwrap();
    let x = [1.0f32, -2.0, 0.25, 8.0];
    let want: Vec<f32> = x
        .iter()
        .map(|&v| (0..10).fold(v, |acc, i| acc * 0.5 + i as f32))
        .collect();
    for (threshold, hoisted) in [(1_000_000, true), (0, false)] {
        let dir = tempfile::tempdir().unwrap();
        let opts = CompileOptions::new()
            .dump_to(dir.path().to_str().unwrap())
            .xla_flags(&format!(
                "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={threshold}"
            ));
        use prost::Message;
        let p = xlaclient::proto::CompileOptionsProto::decode(&opts.to_bytes()[..]).unwrap();
        let d = p.executable_build_options.unwrap().debug_options.unwrap();
        assert_eq!(
            d.xla_backend_extra_options["xla_cpu_small_while_loop_byte_threshold"],
            threshold.to_string()
        );
        let exe = client.compile_with(small_loop(), &opts).unwrap();
        let optimized: String = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.contains("small_loop") && n.ends_with("after_optimizations.txt")
            })
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .collect();
        assert!(!optimized.is_empty(), "no optimized module dumped");
        assert_eq!(
            optimized.contains("xla_cpu_small_call"),
            hoisted,
            "threshold {threshold}:\n{optimized}"
        );
        let buf = client.buffer_from_host(&x, &[4]).unwrap();
        let got = exe.execute(&[&buf]).unwrap()[0].to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    }
    // A pair without a key is refused when the program is compiled, naming the flag.
    let e = client
        .compile_with(
            small_loop(),
            &CompileOptions::new().xla_flags("--xla_backend_extra_options==5"),
        )
        .unwrap_err();
    assert!(e.to_string().contains("--xla_backend_extra_options"), "{e}");
}
