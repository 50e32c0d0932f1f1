//! NumPy files (feature `npy`), on the real plugin: every file NumPy wrote in
//! tests/data/npy (recorded by scripts/record_npy.py with NumPy's own read-back
//! values in manifest.json: every dtype XLA shares with NumPy, big-endian,
//! Fortran order, 0-d, empty, `.npz` archives stored and deflated with nested,
//! dotted and positional keys) is read into arrays, buffers and trees with
//! NumPy's values; written back and read again unchanged (byte for byte what
//! NumPy wrote, for C-order little-endian files); every truncation and random
//! corruption of those files is an error, never a panic; mismatched trees name
//! the leaf and both sides.
//!
//! Run: `cargo test --features ndarray,npy --test npy`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ndarray::{Ix0, Ix2, array};
use proptest::prelude::*;
use serde_json::Value;
use xlaclient::half::{bf16, f16};
use xlaclient::npy::{self, Npz};
use xlaclient::{
    ArrayElement, Client, ClientOptions, ElementType, Error, NdArray, Plugin, Shape, Tree,
};

fn client() -> &'static Client {
    static C: OnceLock<Client> = OnceLock::new();
    C.get_or_init(|| {
        let plugin = Plugin::default_plugin().expect("load the plugin");
        Client::new(&plugin, &ClientOptions::new().cpu_device_count(1)).expect("create a client")
    })
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/npy")
}

fn manifest() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| {
        let text = std::fs::read_to_string(data_dir().join("manifest.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

fn element_type_of(numpy: &str) -> ElementType {
    match numpy {
        "bool" => ElementType::Pred,
        "int8" => ElementType::S8,
        "int16" => ElementType::S16,
        "int32" => ElementType::S32,
        "int64" => ElementType::S64,
        "uint8" => ElementType::U8,
        "uint16" => ElementType::U16,
        "uint32" => ElementType::U32,
        "uint64" => ElementType::U64,
        "float16" => ElementType::F16,
        "float32" => ElementType::F32,
        "float64" => ElementType::F64,
        other => panic!("no element type for {other}"),
    }
}

/// The values of `a` (row-major) as the manifest's JSON numbers compare: exact
/// integers as i128, floats as f64 (f16 and f32 widen exactly).
fn numbers(a: &NdArray) -> Vec<Num> {
    fn all<T: ArrayElement>(a: &NdArray, f: impl Fn(T) -> Num) -> Vec<Num> {
        a.view::<T>().unwrap().iter().map(|&x| f(x)).collect()
    }
    match a.element_type() {
        ElementType::Pred => all(a, |x: bool| Num::Int(x as i128)),
        ElementType::S8 => all(a, |x: i8| Num::Int(x as i128)),
        ElementType::S16 => all(a, |x: i16| Num::Int(x as i128)),
        ElementType::S32 => all(a, |x: i32| Num::Int(x as i128)),
        ElementType::S64 => all(a, |x: i64| Num::Int(x as i128)),
        ElementType::U8 => all(a, |x: u8| Num::Int(x as i128)),
        ElementType::U16 => all(a, |x: u16| Num::Int(x as i128)),
        ElementType::U32 => all(a, |x: u32| Num::Int(x as i128)),
        ElementType::U64 => all(a, |x: u64| Num::Int(x as i128)),
        ElementType::F16 => all(a, |x: f16| Num::Float(x.to_f64())),
        ElementType::F32 => all(a, |x: f32| Num::Float(x as f64)),
        ElementType::F64 => all(a, Num::Float),
        other => panic!("unexpected {other}"),
    }
}

#[derive(Debug, PartialEq)]
enum Num {
    Int(i128),
    Float(f64),
}

fn expected_numbers(entry: &Value) -> Vec<Num> {
    let float = entry["dtype"].as_str().unwrap().starts_with("float");
    entry["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            if float {
                Num::Float(v.as_f64().unwrap())
            } else if let Some(u) = v.as_u64() {
                Num::Int(u as i128)
            } else {
                Num::Int(v.as_i64().unwrap() as i128)
            }
        })
        .collect()
}

fn dims_of(entry: &Value) -> Vec<i64> {
    entry["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect()
}

/// Checks an array read by the crate against a manifest entry (NumPy's read).
fn check_against(what: &str, a: &NdArray, entry: &Value) {
    assert_eq!(
        a.element_type(),
        element_type_of(entry["dtype"].as_str().unwrap()),
        "{what}: dtype"
    );
    assert_eq!(a.dims(), dims_of(entry), "{what}: dims");
    assert_eq!(numbers(a), expected_numbers(entry), "{what}: values");
}

#[test]
fn every_recorded_npy_file_reads_as_numpy_reads_it() {
    let entries = manifest()["npy"].as_array().unwrap();
    assert!(entries.len() >= 19);
    for entry in entries {
        let file = entry["file"].as_str().unwrap();
        let path = data_dir().join(file);
        let a = npy::read_npy(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        check_against(file, &a, entry);
        // Uploaded: the buffer holds the same values (read back by the plugin).
        let b = npy::load_npy(client(), &path).unwrap();
        assert_eq!(b.dims().unwrap(), dims_of(entry), "{file}: buffer dims");
        assert_eq!(
            NdArray::from_buffer(&b).unwrap(),
            a,
            "{file}: buffer values"
        );
    }
}

#[test]
fn written_files_read_back_and_match_numpy_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for entry in manifest()["npy"].as_array().unwrap() {
        let file = entry["file"].as_str().unwrap();
        let original = std::fs::read(data_dir().join(file)).unwrap();
        let a = npy::parse_npy(&original).unwrap();
        let out = dir.path().join(file);
        npy::write_npy(&out, &a).unwrap();
        let written = std::fs::read(&out).unwrap();
        assert_eq!(npy::parse_npy(&written).unwrap(), a, "{file}: round trip");
        // NumPy's own bytes for the files it wrote little-endian in C order (the
        // crate writes C order, little-endian, format 1.0, as `np.save` does): the
        // same header dict (npyz spells a tuple `(2, 3, )`, NumPy `(2, 3)`) and
        // the same data bytes.
        if !file.contains("big_endian") && !file.starts_with("fortran") {
            let (h1, d1) = split_npy(&written);
            let (h0, d0) = split_npy(&original);
            assert_eq!(h1, h0, "{file}: header differs from NumPy's");
            assert_eq!(d1, d0, "{file}: data differs from NumPy's");
        }
        // Through a buffer.
        let b = a.to_buffer(client()).unwrap();
        npy::save_npy(&out, &b).unwrap();
        assert_eq!(
            npy::read_npy(&out).unwrap(),
            a,
            "{file}: saved from a buffer"
        );
    }
}

/// A format 1.0 `.npy`'s header dict, spaces and trailing commas dropped, and
/// its data bytes.
fn split_npy(bytes: &[u8]) -> (String, &[u8]) {
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header: String = String::from_utf8_lossy(&bytes[10..10 + len])
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (
        header.replace(",)", ")").replace(",}", "}"),
        &bytes[10 + len..],
    )
}

#[derive(Tree, Debug)]
struct Layer<T> {
    w: T,
    b: T,
}

#[derive(Tree, Debug)]
struct Model<T> {
    layers: Vec<Layer<T>>,
    step: T,
}

fn model_spec() -> Model<Shape> {
    Model {
        layers: vec![
            Layer {
                w: Shape::of::<f32>(&[3, 4]),
                b: Shape::of::<f32>(&[4]),
            },
            Layer {
                w: Shape::of::<f32>(&[4, 2]),
                b: Shape::of::<f32>(&[2]),
            },
        ],
        step: Shape::of::<i64>(&[]),
    }
}

fn npz_entry(file: &str) -> &'static Value {
    manifest()["npz"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == file)
        .unwrap()
}

#[test]
fn npz_archives_read_into_trees() {
    for (file, sep) in [("nested.npz", "/"), ("dotted_compressed.npz", ".")] {
        let entry = npz_entry(file);
        let npz = Npz::read(data_dir().join(file)).unwrap();
        let keys: Vec<&str> = entry["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["key"].as_str().unwrap())
            .collect();
        assert_eq!(npz.names(), keys, "{file}");
        for a in entry["arrays"].as_array().unwrap() {
            check_against(file, npz.get(a["key"].as_str().unwrap()).unwrap(), a);
        }
        // Into the tree: key `layers{sep}1{sep}w` is the leaf `layers.1.w`.
        let tree = npz.tree(&model_spec()).unwrap();
        let key = format!("layers{sep}1{sep}w");
        assert_eq!(&tree.layers[1].w, npz.get(&key).unwrap(), "{file}");
        assert_eq!(
            tree.step
                .clone()
                .into_array::<i64, Ix0>()
                .unwrap()
                .into_scalar(),
            7
        );
        let bufs = npy::load_npz(client(), data_dir().join(file), &model_spec()).unwrap();
        assert_eq!(
            NdArray::from_buffer(&bufs.layers[0].b).unwrap(),
            *npz.get(&format!("layers{sep}0{sep}b")).unwrap()
        );
    }
    // `np.savez(f, x)`: the lone array `arr_0` is a bare leaf's; Fortran order
    // read into row-major.
    let entry = npz_entry("positional.npz");
    let npz = Npz::read(data_dir().join("positional.npz")).unwrap();
    assert_eq!(npz.names(), ["arr_0"]);
    let leaf = npz.tree(&Shape::of::<f64>(&[2, 2])).unwrap();
    check_against("positional.npz", &leaf, &entry["arrays"][0]);
    // Mixed dtypes in one archive.
    #[derive(Tree)]
    struct Mixed<T> {
        half: T,
        flag: T,
        count: T,
    }
    let spec = Mixed {
        half: Shape::of::<f16>(&[2]),
        flag: Shape::of::<bool>(&[2]),
        count: Shape::of::<u8>(&[3]),
    };
    let mixed = Npz::read(data_dir().join("mixed.npz"))
        .unwrap()
        .tree(&spec)
        .unwrap();
    let entry = npz_entry("mixed.npz");
    for (a, got) in
        entry["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .zip([&mixed.half, &mixed.flag, &mixed.count])
    {
        check_against("mixed.npz", got, a);
    }
}

#[test]
fn trees_saved_as_npz_load_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.npz");
    let src = Npz::read(data_dir().join("nested.npz"))
        .unwrap()
        .tree(&model_spec())
        .unwrap();
    let bufs = xlaclient::arrays::to_buffers(client(), &src).unwrap();
    npy::save_npz(&path, &bufs).unwrap();
    let back = Npz::read(&path).unwrap();
    assert_eq!(
        back.names(),
        [
            "layers.0.w",
            "layers.0.b",
            "layers.1.w",
            "layers.1.b",
            "step"
        ]
    );
    let tree = back.tree(&model_spec()).unwrap();
    assert_eq!(tree.leaves(), src.leaves());
    // A bare leaf is saved as `arr_0`, as NumPy names a lone positional array.
    let one = NdArray::from(array![[1.5f64, 2.5]]);
    npy::save_npz_arrays(&path, &one).unwrap();
    assert_eq!(Npz::read(&path).unwrap().names(), ["arr_0"]);
    assert_eq!(
        Npz::read(&path)
            .unwrap()
            .tree(&Shape::of::<f64>(&[1, 2]))
            .unwrap(),
        one
    );
}

fn npy_reason(e: Error) -> String {
    match e {
        Error::Npy { reason, .. } => reason,
        other => panic!("not an Npy error: {other}"),
    }
}

#[test]
fn mismatched_trees_name_the_leaf_and_both_sides() {
    let npz = Npz::read(data_dir().join("nested.npz")).unwrap();
    let mut spec = model_spec();
    spec.layers[1].w = Shape::of::<f64>(&[4, 2]);
    assert_eq!(
        npy_reason(npz.tree(&spec).unwrap_err()),
        "leaf layers.1.w: the spec is f64[4,2], the file holds f32[4,2] (key \"layers/1/w\")"
    );
    let mut spec = model_spec();
    spec.layers[0].b = Shape::of::<f32>(&[5]);
    assert!(
        npy_reason(npz.tree(&spec).unwrap_err())
            .contains("the spec is f32[5], the file holds f32[4]")
    );
    // A leaf with no key.
    let mut spec = model_spec();
    spec.layers.push(Layer {
        w: Shape::of::<f32>(&[2, 2]),
        b: Shape::of::<f32>(&[2]),
    });
    let reason = npy_reason(npz.tree(&spec).unwrap_err());
    assert!(
        reason.starts_with("no array for the leaf \"layers.2.w\""),
        "{reason}"
    );
    // Keys that name no leaf.
    let mut spec = model_spec();
    spec.layers.pop();
    assert_eq!(
        npy_reason(npz.tree(&spec).unwrap_err()),
        "keys that name no leaf of the spec: [\"layers/1/w\", \"layers/1/b\"]"
    );
    // Two keys naming one leaf.
    let a = NdArray::from(array![1.0f32]);
    let bytes = npy::npz_bytes([("x/y", &a), ("x.y", &a)]).unwrap();
    let reason = npy_reason(
        Npz::from_bytes(&bytes)
            .unwrap()
            .tree(&vec![Shape::of::<f32>(&[1])])
            .unwrap_err(),
    );
    assert_eq!(
        reason,
        "keys \"x/y\" and \"x.y\" both name the leaf \"x.y\""
    );
    // A key given twice when writing.
    assert!(npy::npz_bytes([("k", &a), ("k", &a)]).is_err());
    // The error names the file.
    let path = data_dir().join("nested.npz");
    let e = npy::load_npz(client(), &path, &vec![Shape::of::<f32>(&[1])]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("NumPy file {}: ", path.display())),
        "{e}"
    );
}

#[test]
fn unsupported_dtypes_are_refused_with_the_dtype() {
    // bf16 and 8-bit floats have no NumPy dtype.
    let b = NdArray::from(array![bf16::from_f32(1.0)]);
    assert!(npy_reason(npy::npy_bytes(&b).unwrap_err()).starts_with("bf16 has no NumPy dtype"));
    // Complex, object (pickled) and structured arrays: a header NumPy writes,
    // with the data of the right length.
    for (descr, item, what) in [
        ("'<c8'", 8, "<c8"),
        ("'|O'", 8, "|O"),
        ("[('a', '<i4'), ('b', '<f4')]", 8, "a"),
    ] {
        let bytes = npy_file(
            &format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (2,), }}"),
            &vec![0u8; 2 * item],
        );
        let e = npy::parse_npy(&bytes).unwrap_err().to_string();
        assert!(e.contains(what), "{descr}: {e}");
    }
}

/// A `.npy` (format 1.0) with `header` and `data`.
fn npy_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((h.len() as u16).to_le_bytes());
    out.extend(h.as_bytes());
    out.extend(data);
    out
}

#[test]
fn malformed_headers_and_lengths_are_errors() {
    let f32s = |n: usize| vec![0u8; 4 * n];
    let header =
        |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Too few and too many data bytes.
    let e = npy_reason(npy::parse_npy(&npy_file(&header("(2, 3)"), &f32s(5))).unwrap_err());
    assert_eq!(
        e,
        "truncated data: the header's <f4 [2, 3] needs 24 bytes, the file holds 20"
    );
    let e = npy_reason(npy::parse_npy(&npy_file(&header("(2, 3)"), &f32s(7))).unwrap_err());
    assert!(e.starts_with("trailing bytes"), "{e}");
    // An element count that overflows 64 bits (npyz would multiply unchecked),
    // also behind a zero dimension (its strides would overflow).
    for shape in [
        "(4294967296, 4294967296, 4294967296)",
        "(0, 4294967296, 4294967296, 16)",
    ] {
        let e = npy_reason(npy::parse_npy(&npy_file(&header(shape), &[])).unwrap_err());
        assert!(
            e.contains("more elements than fit in 64 bits"),
            "{shape}: {e}"
        );
    }
    // Deep nesting in the header.
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(npy::parse_npy(&npy_file(&header(&deep), &[])).is_err());
    // Not NumPy at all, a missing key, a bool that is not 0 or 1.
    assert!(npy::parse_npy(b"PK\x03\x04 not npy").is_err());
    assert!(npy::parse_npy(&npy_file("{'descr': '<f4', 'shape': (1,), }", &f32s(1))).is_err());
    let e = npy::parse_npy(&npy_file(
        "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
        &[1, 7],
    ))
    .unwrap_err();
    assert!(e.to_string().contains("bad data"), "{e}");
    // A missing file names it.
    let e = npy::read_npy("/nonexistent/x.npy").unwrap_err().to_string();
    assert!(
        e.starts_with("NumPy file /nonexistent/x.npy: reading:"),
        "{e}"
    );
    // An archive member that is not an .npy.
    let mut zip = Vec::new();
    {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut zip));
        w.start_file("notes.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(b"hello").unwrap();
        w.finish().unwrap();
    }
    let e = Npz::from_bytes(&zip).unwrap_err().to_string();
    assert!(e.contains("notes.txt") && e.contains("not an .npy"), "{e}");
}

/// Every recorded file, cut at every length: an error (or, for a cut in an
/// archive's unread tail, the same arrays), never a panic.
#[test]
fn every_truncation_is_an_error() {
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(&path).unwrap();
        if name.ends_with(".npy") {
            for cut in 0..bytes.len() {
                assert!(
                    npy::parse_npy(&bytes[..cut]).is_err(),
                    "{name} cut at {cut}"
                );
            }
        } else if name.ends_with(".npz") {
            let whole = Npz::from_bytes(&bytes).unwrap();
            for cut in 0..bytes.len() {
                if let Ok(part) = Npz::from_bytes(&bytes[..cut]) {
                    assert_eq!(part.arrays(), whole.arrays(), "{name} cut at {cut}");
                }
            }
        }
    }
}

fn recorded(ext: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<_> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Applies `edits` (position, byte; a position past the end appends) and an
/// optional cut to `bytes`.
fn mutate(
    bytes: &[u8],
    edits: &[(usize, u8)],
    insert: Option<(usize, Vec<u8>)>,
    cut: Option<usize>,
) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for &(i, v) in edits {
        if !b.is_empty() {
            let i = i % b.len();
            b[i] = v;
        }
    }
    if let Some((at, extra)) = insert {
        let at = at % (b.len() + 1);
        b.splice(at..at, extra);
    }
    if let Some(c) = cut {
        b.truncate(c % (b.len() + 1));
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random byte edits, insertions and cuts of every recorded `.npy`: parsing
    /// returns (an error or an array whose data fills its shape), never panics;
    /// an array that parses writes and parses back to itself (compared by its
    /// written bytes, so that a NaN the edits made counts as itself).
    #[test]
    fn mutated_npy_never_panics(
        file in 0usize..64,
        edits in prop::collection::vec((0usize..4096, any::<u8>()), 0..6),
        insert in prop::option::of((0usize..4096, prop::collection::vec(any::<u8>(), 1..8))),
        cut in prop::option::of(0usize..4096),
    ) {
        let files = recorded("npy");
        let bytes = mutate(&files[file % files.len()], &edits, insert, cut);
        if let Ok(a) = npy::parse_npy(&bytes) {
            let n: usize = a.shape().iter().product();
            prop_assert_eq!(numbers(&a).len(), n);
            if let Ok(again) = npy::npy_bytes(&a) {
                let back = npy::parse_npy(&again).unwrap();
                prop_assert_eq!(back.shape(), a.shape());
                prop_assert_eq!(npy::npy_bytes(&back).unwrap(), again);
            }
        }
    }

    /// The same for the recorded `.npz` archives (stored and deflated members).
    #[test]
    fn mutated_npz_never_panics(
        file in 0usize..64,
        edits in prop::collection::vec((0usize..4096, any::<u8>()), 0..6),
        insert in prop::option::of((0usize..4096, prop::collection::vec(any::<u8>(), 1..8))),
        cut in prop::option::of(0usize..4096),
    ) {
        let files = recorded("npz");
        let bytes = mutate(&files[file % files.len()], &edits, insert, cut);
        if let Ok(npz) = Npz::from_bytes(&bytes) {
            for (_, a) in npz.arrays() {
                let n: usize = a.shape().iter().product();
                prop_assert_eq!(numbers(a).len(), n);
            }
            let _ = npz.tree(&model_spec());
        }
    }
}

#[test]
fn fortran_order_files_are_row_major_after_reading() {
    let a = npy::read_npy(data_dir().join("fortran_int64.npy")).unwrap();
    let v = a.view::<i64>().unwrap();
    assert!(v.is_standard_layout());
    let t = a.into_array::<i64, Ix2>().unwrap();
    let entry = manifest()["npy"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == "fortran_int64.npy")
        .unwrap();
    assert!(entry["fortran_order"].as_bool().unwrap());
    let flat: Vec<i64> = entry["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(t.iter().copied().collect::<Vec<_>>(), flat);
}
