//! The op table of the guide's ops chapter (`guide/14-ops.md`) lists every entry of
//! the opcode table exactly once, with a family file and numeric test files that
//! exist, and gradient, tangent and batching columns equal to what `autodiff::gradient`,
//! `forward::tangent` and `batching::batching` say, and a StableHLO column equal to
//! the op table's (`Opcode::stablehlo_name`): they cannot drift from the code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use xlaclient::autodiff::{Gradient, gradient};
use xlaclient::batching::batching;
use xlaclient::forward::tangent;
use xlaclient::ir::Opcode;

/// The directory of the op family files: `ops/` of the core crate (the workspace
/// layout), or of the root package (the single-crate layout).
fn ops_dir(root: &Path) -> PathBuf {
    let core = root.join("crates/xlaclient-core/src/ops");
    if core.is_dir() {
        core
    } else {
        root.join("src/ops")
    }
}

#[test]
fn the_guide_op_table_matches_the_opcode_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chapter = std::fs::read_to_string(root.join("guide/14-ops.md")).unwrap();
    let start = chapter
        .find("<!-- op-table")
        .expect("the op table's start marker");
    let end = chapter
        .find("<!-- /op-table -->")
        .expect("the op table's end marker");
    let ops = ops_dir(root);
    let mut listed = Vec::new();
    for row in chapter[start..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        let family = cells[2].split_whitespace().next().unwrap();
        assert!(
            ops.join(format!("{family}.rs")).exists(),
            "{name}: no family file {}/{family}.rs",
            ops.display()
        );
        for t in cells[3].split(", ") {
            let file = t.split('`').nth(1).unwrap_or("");
            if !file.is_empty() {
                assert!(root.join(file).exists(), "{name}: no test file {file}");
            }
        }
        let op = Opcode::ALL
            .iter()
            .find(|o| o.name() == name)
            .unwrap_or_else(|| panic!("{name}: not in ir::Opcode::ALL"));
        let want = match gradient(*op) {
            Gradient::Rule => "rule".to_string(),
            Gradient::Partial(forms) => format!("partial: {forms}"),
            Gradient::None => "none".to_string(),
            Gradient::Missing => "missing".to_string(),
        };
        let got = cells.get(5).copied().unwrap_or("");
        assert_eq!(got, want, "{name}: the gradient column");
        let class = |g: Gradient| match g {
            Gradient::Rule => "rule".to_string(),
            Gradient::Partial(forms) => format!("partial: {forms}"),
            Gradient::None => "none".to_string(),
            Gradient::Missing => "missing".to_string(),
        };
        let got = cells.get(6).copied().unwrap_or("");
        assert_eq!(got, class(tangent(*op)), "{name}: the tangent column");
        let got = cells.get(7).copied().unwrap_or("");
        assert_eq!(got, class(batching(*op)), "{name}: the batching column");
        let got = cells.get(8).copied().unwrap_or("");
        assert!(
            got.starts_with(&format!("`{}`", op.stablehlo_name())),
            "{name}: the StableHLO column says {got}, the op table {}",
            op.stablehlo_name()
        );
        listed.push(name.to_string());
    }
    let set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    assert_eq!(set.len(), listed.len(), "an op is listed twice");
    let table: BTreeSet<&str> = Opcode::ALL.iter().map(|o| o.name()).collect();
    assert_eq!(set, table, "guide op table vs ir::Opcode::ALL");
}
