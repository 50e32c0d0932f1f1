//! The workspace's layers, checked from the sources: each crate depends only on the
//! crates below it, no error type names a module or crate above it, the IR imports
//! nothing from the op families, the builder or the transforms, and `unsafe` code is
//! allowed in the runtime alone. Cargo forbids dependency cycles between crates, but
//! not an upward import inside one crate nor a lower crate growing a dependency on
//! a higher one's crates: these tests do.

use std::fs;
use std::path::{Path, PathBuf};

/// The layer crates, bottom to top.
const LAYERS: [&str; 5] = [
    "xlaclient-proto",
    "xlaclient-pjrt",
    "xlaclient-core",
    "xlaclient-nn",
    "xlaclient-rl",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crate_dir(name: &str) -> PathBuf {
    root().join("crates").join(name)
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of the files under `dir` that contain any of `needles`, as `file:line: text`.
fn mentions(dir: &Path, needles: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for f in rust_files(dir) {
        let text = fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            if needles.iter().any(|n| line.contains(n)) {
                hits.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    hits
}

/// The names in a manifest's `[dependencies]` table (not dev- or build-dependencies).
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = fs::read_to_string(manifest).unwrap();
    let value: toml::Table = text.parse().unwrap();
    value
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn each_layer_depends_only_on_layers_below_it() {
    for (i, name) in LAYERS.iter().enumerate() {
        let deps = dependencies(&crate_dir(name).join("Cargo.toml"));
        for above in &LAYERS[i..] {
            assert!(
                !deps.iter().any(|d| d == above),
                "{name} depends on {above}, which is not below it"
            );
        }
    }
    // The heavy crates of the upper layers stay out of the runtime and the core.
    for name in ["xlaclient-proto", "xlaclient-pjrt", "xlaclient-core"] {
        let deps = dependencies(&crate_dir(name).join("Cargo.toml"));
        for heavy in [
            "clap",
            "toml",
            "plotters",
            "indicatif",
            "csv",
            "serde",
            "safetensors",
            "rand",
            "futures",
        ] {
            assert!(
                !deps.iter().any(|d| d == heavy),
                "{name} depends on {heavy}"
            );
        }
    }
}

/// The paths the IR may not name: the op families, the builder, the transforms.
const ABOVE_THE_IR: [&str; 6] = [
    "crate::ops",
    "crate::builder",
    "crate::autodiff",
    "crate::jit",
    "crate::Builder",
    "crate::Op",
];

#[test]
fn the_ir_imports_nothing_from_the_op_families_the_builder_or_the_transforms() {
    let hits = mentions(&crate_dir("xlaclient-core").join("src/ir"), &ABOVE_THE_IR);
    assert!(
        hits.is_empty(),
        "upward imports from ir/:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_op_table_is_data_that_names_no_path() {
    // `src/op_table.rs` is expanded inside the IR (`ir/op.rs`) as well as in the op
    // library: its rule slots must stay bare identifiers, resolved only by the op
    // library's callback, so the file names no path and imports nothing (its one
    // `use` re-exports its own macro).
    let file = crate_dir("xlaclient-core").join("src/op_table.rs");
    let text = fs::read_to_string(&file).unwrap();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim();
        let hit = ABOVE_THE_IR.iter().any(|n| code.contains(n))
            || ["crate::", "super::", "self::"]
                .iter()
                .any(|n| code.contains(n))
            || (!code.starts_with("//")
                && code.contains("use ")
                && code != "pub(crate) use for_each_op;");
        assert!(!hit, "{}:{}: {code}", file.display(), i + 1);
    }
    assert!(text.contains("pub(crate) use for_each_op;"));
}

#[test]
fn no_error_type_names_a_layer_above_it() {
    let src = |c: &str, f: &str| crate_dir(c).join("src").join(f);
    let cases: [(PathBuf, &[&str]); 5] = [
        (
            src("xlaclient-pjrt", "error.rs"),
            &[
                "xlaclient_core",
                "xlaclient_nn",
                "xlaclient_rl",
                "crate::ir",
            ],
        ),
        (
            src("xlaclient-core", "error.rs"),
            &[
                "xlaclient_nn",
                "xlaclient_rl",
                "checkpoint",
                "runner",
                "crate::builder",
                "crate::ops",
                "crate::autodiff",
                "crate::jit",
            ],
        ),
        // The core's error names `TreeError`: the tree module must stay below the
        // builder for that.
        (
            src("xlaclient-core", "tree.rs"),
            &["crate::Op", "crate::builder", "crate::ops", "crate::jit"],
        ),
        (src("xlaclient-nn", "error.rs"), &["xlaclient_rl", "runner"]),
        (src("xlaclient-rl", "error.rs"), &["xlaclient::"]),
    ];
    for (file, needles) in cases {
        let text = fs::read_to_string(&file).unwrap();
        for n in needles {
            assert!(!text.contains(n), "{} names `{n}`", file.display());
        }
    }
}

#[test]
fn unsafe_code_is_forbidden_outside_the_runtime() {
    for name in [
        "xlaclient-proto",
        "xlaclient-core",
        "xlaclient-nn",
        "xlaclient-rl",
    ] {
        let lib = fs::read_to_string(crate_dir(name).join("src/lib.rs")).unwrap();
        // The core denies unsafe code and allows one `unsafe impl`: the verifier's
        // promise that a `Computation` is a module XLA will not abort on (the
        // runtime's `HloModuleSource` is an unsafe trait).
        let (lint, allowed): (&str, &[&str]) = if name == "xlaclient-core" {
            (
                "#![deny(unsafe_code)]",
                &["unsafe impl xlaclient_pjrt::HloModuleSource for Computation {"],
            )
        } else {
            ("#![forbid(unsafe_code)]", &[])
        };
        assert!(lib.contains(lint), "{name} does not forbid unsafe code");
        let mut hits = mentions(
            &crate_dir(name).join("src"),
            &["unsafe {", "unsafe fn", "unsafe impl"],
        );
        hits.retain(|h| !allowed.iter().any(|a| h.ends_with(a)));
        if name == "xlaclient-core" {
            let allows = mentions(&crate_dir(name).join("src"), &["allow(unsafe_code)"]);
            assert_eq!(allows.len(), 1, "one allowed unsafe impl only: {allows:?}");
        }
        assert!(
            hits.is_empty(),
            "unsafe outside the runtime:\n{}",
            hits.join("\n")
        );
    }
    let facade = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    assert!(facade.contains("#![forbid(unsafe_code)]"));
}
