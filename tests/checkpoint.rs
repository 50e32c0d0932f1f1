//! Checkpoints on the real plugin: derived trees of several dtypes saved to a
//! safetensors file and loaded back bit for bit; the file read by the `safetensors`
//! crate itself; every kind of bad file and mismatched tree an error naming what is
//! wrong (never a panic); saves atomic.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use xlaclient::RuntimeError;
use xlaclient::checkpoint::{
    self, Checkpoint, CheckpointError, HostArray, HostArrayError, OnExtra,
};
use xlaclient::half::{bf16, f16};
use xlaclient::nn::Error;
use xlaclient::{Buffer, ElementType, Shape, Tree};

#[derive(Tree, Debug)]
struct Layer<T> {
    w: T,
    b: T,
}

#[derive(Tree, Debug)]
struct Model<T> {
    layers: Vec<Layer<T>>,
    embed: T,
    mask: T,
    step: T,
    empty: T,
    scale: Option<T>,
    #[tree(skip)]
    name: String,
}

/// The spec: f32, bf16, f64, u8, pred, a rank-0 s32, a zero-size f32 and an f16.
fn spec() -> Model<Shape> {
    Model {
        layers: vec![
            Layer {
                w: Shape::of::<f32>(&[3, 4]),
                b: Shape::of::<bf16>(&[4]),
            },
            Layer {
                w: Shape::of::<f64>(&[4, 2]),
                b: Shape::of::<f64>(&[2]),
            },
        ],
        embed: Shape::of::<u8>(&[5]),
        mask: Shape::of::<bool>(&[2, 3]),
        step: Shape::of::<i32>(&[]),
        empty: Shape::of::<f32>(&[0, 3]),
        scale: Some(Shape::of::<f16>(&[2])),
        name: "model".to_string(),
    }
}

const PATHS: [&str; 9] = [
    "layers.0.w",
    "layers.0.b",
    "layers.1.w",
    "layers.1.b",
    "embed",
    "mask",
    "step",
    "empty",
    "scale",
];

/// Host values for each leaf of `spec()`, with the awkward floats (NaN with a
/// payload, -0, infinities, subnormals) that a value round trip could lose.
fn host_values() -> Model<HostArray> {
    let f32s: Vec<f32> = [
        f32::from_bits(0x7fc0_1234),
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
        1.5,
        -2.25,
        f32::MAX,
        3.0e-39,
        0.1,
        7.0,
    ]
    .to_vec();
    let bf16s: Vec<bf16> = [0x7fc1u16, 0x8000, 0x0001, 0x3f80]
        .map(bf16::from_bits)
        .to_vec();
    let f64s: Vec<f64> = (0..8)
        .map(|i| f64::from_bits(0x7ff8_0000_0000_0001 + i * 0x0101_0101))
        .collect();
    let f16s = vec![f16::from_bits(0x7e01), f16::from_bits(0x0001)];
    let h = |r: xlaclient::nn::Result<HostArray>| r.unwrap();
    Model {
        layers: vec![
            Layer {
                w: h(HostArray::from_slice(&f32s, &[3, 4])),
                b: h(HostArray::from_slice(&bf16s, &[4])),
            },
            Layer {
                w: h(HostArray::from_slice(&f64s, &[4, 2])),
                b: h(HostArray::from_slice(
                    &[-0.0f64, f64::MIN_POSITIVE / 2.0],
                    &[2],
                )),
            },
        ],
        embed: h(HostArray::from_slice(&[0u8, 1, 127, 128, 255], &[5])),
        mask: h(HostArray::from_slice(
            &[true, false, false, true, true, false],
            &[2, 3],
        )),
        step: h(HostArray::from_slice(&[-123_456_789i32], &[])),
        empty: h(HostArray::from_slice::<f32>(&[], &[0, 3])),
        scale: Some(h(HostArray::from_slice(&f16s, &[2]))),
        name: "model".to_string(),
    }
}

fn upload_tree(host: &Model<HostArray>) -> Model<Buffer> {
    host.try_map_ref(&mut |a| a.to_buffer(client())).unwrap()
}

fn download_tree(buffers: &Model<Buffer>) -> Model<HostArray> {
    buffers.try_map_ref(&mut HostArray::from_buffer).unwrap()
}

/// A fresh directory and a saved checkpoint of `host_values()` in it.
fn saved() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let params = upload_tree(&host_values());
    checkpoint::save_with_metadata(
        &path,
        &params,
        [("step", "1000"), ("format", "xlaclient-1")],
    )
    .unwrap();
    (dir, path)
}

/// The `CheckpointError` of a checkpoint error, after checking that the error names
/// `path`.
fn problem(e: Error, path: &Path) -> CheckpointError {
    match e {
        Error::Checkpoint { path: p, error } => {
            assert_eq!(p, path);
            *error
        }
        other => panic!("expected a checkpoint error, got {other:?}"),
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn leaves_are_named_by_their_paths() {
    assert_eq!(spec().leaf_paths(), PATHS);
}

#[test]
fn round_trip_is_bit_for_bit() {
    let (_dir, path) = saved();
    let want = host_values();

    let loaded = checkpoint::load(client(), &path, &spec()).unwrap();
    assert_eq!(loaded.name, "model", "metadata fields come from the spec");
    let got = download_tree(&loaded);
    let (want_leaves, got_leaves) = (want.leaves(), got.leaves());
    assert_eq!(got_leaves.len(), PATHS.len());
    for ((w, g), name) in want_leaves.iter().zip(&got_leaves).zip(PATHS) {
        assert_eq!(g.shape(), w.shape(), "{name}");
        assert_eq!(g.bytes(), w.bytes(), "{name}: bytes differ");
    }
    // Typed reads of a few leaves, to be sure of the byte layouts.
    assert_eq!(loaded.step.to_scalar::<i32>().unwrap(), -123_456_789);
    assert_eq!(
        loaded.mask.to_vec::<bool>().unwrap(),
        [true, false, false, true, true, false]
    );
    assert_eq!(
        loaded.layers[0].w.to_vec::<f32>().unwrap()[0].to_bits(),
        0x7fc0_1234
    );
    assert_eq!(loaded.empty.dims().unwrap(), [0, 3]);

    // The host variant gives the same bytes without a device.
    let host = checkpoint::load_host(&path, &spec()).unwrap();
    for ((w, g), name) in want.leaves().iter().zip(host.leaves()).zip(PATHS) {
        assert_eq!(g, *w, "{name}");
    }
    assert_eq!(
        host.layers[0].b.to_vec::<bf16>().unwrap()[0].to_bits(),
        0x7fc1
    );

    // The metadata and the tensor list.
    let file = Checkpoint::read(&path).unwrap();
    assert_eq!(file.metadata().get("step"), Some(&"1000"));
    assert_eq!(file.metadata().get("format"), Some(&"xlaclient-1"));
    let mut names = PATHS.map(String::from).to_vec();
    names.sort();
    assert_eq!(file.names(), names);
    assert_eq!(file.shape("layers.1.w"), Some(Shape::of::<f64>(&[4, 2])));
    assert_eq!(file.dtype("mask"), Some(Dtype::BOOL));
    assert_eq!(file.shape("nope"), None);

    // Without metadata: none in the file, and host trees save too.
    let plain = path.with_file_name("plain.safetensors");
    checkpoint::save(&plain, &loaded).unwrap();
    assert!(Checkpoint::read(&plain).unwrap().metadata().is_empty());
    let from_host = path.with_file_name("host.safetensors");
    checkpoint::save_host(&from_host, &want, [("k", "v")]).unwrap();
    let from_device = path.with_file_name("device.safetensors");
    checkpoint::save_with_metadata(&from_device, &loaded, [("k", "v")]).unwrap();
    assert_eq!(
        std::fs::read(&from_host).unwrap(),
        std::fs::read(&from_device).unwrap()
    );
    let again = checkpoint::load_host(&from_host, &spec()).unwrap();
    assert_eq!(again.into_leaves(), want.into_leaves());
}

#[test]
fn the_safetensors_crate_reads_our_files() {
    let (_dir, path) = saved();
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let want = host_values();
    let expected: [(&str, Dtype, &[usize]); 9] = [
        ("layers.0.w", Dtype::F32, &[3, 4]),
        ("layers.0.b", Dtype::BF16, &[4]),
        ("layers.1.w", Dtype::F64, &[4, 2]),
        ("layers.1.b", Dtype::F64, &[2]),
        ("embed", Dtype::U8, &[5]),
        ("mask", Dtype::BOOL, &[2, 3]),
        ("step", Dtype::I32, &[]),
        ("empty", Dtype::F32, &[0, 3]),
        ("scale", Dtype::F16, &[2]),
    ];
    let mut names = st.names();
    names.sort();
    let mut want_names: Vec<&str> = expected.iter().map(|e| e.0).collect();
    want_names.sort();
    assert_eq!(names, want_names);
    for ((name, dtype, shape), leaf) in expected.iter().zip(want.leaves()) {
        let t = st.tensor(name).unwrap();
        assert_eq!(t.dtype(), *dtype, "{name}");
        assert_eq!(t.shape(), *shape, "{name}");
        assert_eq!(t.data(), leaf.bytes(), "{name}");
    }
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = header.metadata().as_ref().unwrap();
    assert_eq!(meta.get("step").map(String::as_str), Some("1000"));
    assert_eq!(meta.len(), 2);

    // Every element type with a dtype maps to the one the issue names.
    let names = [
        (ElementType::Pred, "BOOL"),
        (ElementType::S8, "I8"),
        (ElementType::S16, "I16"),
        (ElementType::S32, "I32"),
        (ElementType::S64, "I64"),
        (ElementType::U8, "U8"),
        (ElementType::U16, "U16"),
        (ElementType::U32, "U32"),
        (ElementType::U64, "U64"),
        (ElementType::F16, "F16"),
        (ElementType::Bf16, "BF16"),
        (ElementType::F32, "F32"),
        (ElementType::F64, "F64"),
    ];
    for (ty, name) in names {
        assert_eq!(checkpoint::dtype_of(ty).unwrap().to_string(), name, "{ty}");
    }
    assert_eq!(checkpoint::dtype_of(ElementType::C64), None);
    assert_eq!(checkpoint::dtype_of(ElementType::C128), None);
}

#[test]
fn a_file_cut_short_at_any_length_is_an_error() {
    let (dir, path) = saved();
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.safetensors");
    for len in 0..bytes.len() {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let e = checkpoint::load_host(&cut, &spec()).unwrap_err();
        let shown = e.to_string();
        match problem(e, &cut) {
            CheckpointError::Format { reason } => {
                assert!(!reason.is_empty(), "{len}");
                assert!(shown.starts_with("checkpoint "), "{shown}");
                assert!(shown.contains("not a valid safetensors file"), "{shown}");
            }
            other => panic!("length {len}: {other:?}"),
        }
        assert!(
            checkpoint::load(client(), &cut, &spec()).is_err(),
            "length {len}"
        );
    }
    // The messages say what is wrong at the interesting lengths.
    let msg = |len: usize| {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        checkpoint::load_host(&cut, &spec())
            .unwrap_err()
            .to_string()
    };
    assert!(
        msg(3).contains("has 3 bytes, fewer than the 8"),
        "{}",
        msg(3)
    );
    assert!(
        msg(20).contains("runs past the end of the file (20 bytes"),
        "{}",
        msg(20)
    );
    assert!(
        msg(bytes.len() - 1).contains("do not cover the file's"),
        "{}",
        msg(bytes.len() - 1)
    );
    // One byte too many is as wrong as one too few.
    let mut padded = bytes.clone();
    padded.push(0);
    std::fs::write(&cut, &padded).unwrap();
    let e = checkpoint::load_host(&cut, &spec()).unwrap_err();
    assert!(matches!(problem(e, &cut), CheckpointError::Format { .. }));
}

#[test]
fn garbage_and_bad_headers_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    let spec = Shape::of::<f32>(&[2]);
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let e = checkpoint::load_host(&path, &spec).unwrap_err();
        let shown = e.to_string();
        match problem(e, &path) {
            CheckpointError::Format { reason } => (reason, shown),
            other => panic!("{other:?}"),
        }
    };
    // Random bytes of many lengths (a fixed generator: reproducible).
    let mut rng = Rng(7);
    for len in [0usize, 1, 7, 8, 9, 16, 100, 1000, 65_536] {
        let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        load(&junk);
    }
    // A header length larger than the file, and absurdly large.
    let mut huge = (1u64 << 20).to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    let (reason, shown) = load(&huge);
    assert!(
        reason.contains("header length 1048576 runs past the end"),
        "{shown}"
    );
    let (reason, _) = load(&u64::MAX.to_le_bytes());
    assert!(
        reason.contains("too large") || reason.contains("past the end"),
        "{reason}"
    );
    // A header that is not JSON, and JSON that is not a header.
    let header = |json: &str, data: &[u8]| {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.extend_from_slice(data);
        b
    };
    let (reason, _) = load(&header("{not json", &[]));
    assert!(reason.contains("JSON"), "{reason}");
    load(&header("[1, 2, 3]", &[]));
    load(&header(r#"{"x": {"dtype": "F32"}}"#, &[0; 8]));
    load(&header("\u{0}\u{1}\u{2}", &[]));
    let mut bad_utf8 = 2u64.to_le_bytes().to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe]);
    let (reason, _) = load(&bad_utf8);
    assert!(reason.contains("UTF-8"), "{reason}");
    // Offsets past the end of the data, overlapping, or with a gap.
    load(&header(
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}}"#,
        &[0; 8],
    ));
    load(&header(
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
        &[0; 12],
    ));
    load(&header(
        r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
        &[0; 8],
    ));
    // Dims whose product overflows.
    load(&header(
        r#"{"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}"#,
        &[0; 8],
    ));
    // A well-formed file of another name is not a format error but a missing tensor.
    let ok = header(
        r#"{"y":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &[0; 8],
    );
    std::fs::write(&path, &ok).unwrap();
    let e = checkpoint::load_host(&path, &spec).unwrap_err();
    assert!(
        matches!(problem(e, &path), CheckpointError::MissingTensor { .. }),
        "a bare leaf's tensor is named by the empty path"
    );
    // A file that is not there.
    let e = checkpoint::load_host(dir.path().join("absent"), &spec).unwrap_err();
    assert!(e.to_string().contains("reading the file failed"), "{e}");
}

/// The tree the file was saved from, with one leaf renamed: `b` → `bias`.
#[derive(Tree, Debug)]
struct RenamedLayer<T> {
    w: T,
    bias: T,
}

#[test]
fn a_missing_or_renamed_tensor_is_named() {
    let (_dir, path) = saved();
    let renamed = (
        RenamedLayer {
            w: Shape::of::<f32>(&[3, 4]),
            bias: Shape::of::<bf16>(&[4]),
        },
        (),
    );
    let e = checkpoint::load(client(), &path, &renamed).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "checkpoint {}: the file has no tensor `0.w` (the tree's leaf is f32[3,4])",
            path.display()
        )
    );
    // The saved tree nested one level deeper: every name differs.
    #[derive(Tree, Debug)]
    struct Wrapped<T> {
        model: Model<T>,
    }
    let e = checkpoint::load_host(&path, &Wrapped { model: spec() }).unwrap_err();
    assert!(
        e.to_string().contains("no tensor `model.layers.0.w`"),
        "{e}"
    );

    // A tree with one more leaf than the file: that leaf is named.
    let mut more = spec();
    more.layers.push(Layer {
        w: Shape::of::<f32>(&[2, 2]),
        b: Shape::of::<f32>(&[2]),
    });
    let e = checkpoint::load(client(), &path, &more).unwrap_err();
    match problem(e.clone(), &path) {
        CheckpointError::MissingTensor { name, expected } => {
            assert_eq!(name, "layers.2.w");
            assert_eq!(expected, Shape::of::<f32>(&[2, 2]));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .ends_with("the file has no tensor `layers.2.w` (the tree's leaf is f32[2,2])"),
        "{e}"
    );
}

#[test]
fn extra_tensors_are_refused_unless_ignored() {
    let (_dir, path) = saved();
    let mut fewer = spec();
    fewer.layers.pop();
    fewer.scale = None;
    let e = checkpoint::load(client(), &path, &fewer).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "checkpoint {}: the file has 3 tensor(s) the tree has no leaf for: `layers.1.b`, `layers.1.w`, `scale`",
            path.display()
        )
    );
    match problem(e, &path) {
        CheckpointError::ExtraTensors { names } => {
            assert_eq!(names, ["layers.1.b", "layers.1.w", "scale"])
        }
        other => panic!("{other:?}"),
    }
    // Ignoring them loads the sub-tree.
    let file = Checkpoint::read(&path).unwrap();
    let sub = file.buffers(client(), &fewer, OnExtra::Ignore).unwrap();
    let want = host_values();
    assert_eq!(
        HostArray::from_buffer(&sub.layers[0].w).unwrap(),
        want.layers[0].w
    );
    assert!(sub.scale.is_none());
    let one = file
        .host(&(Shape::of::<f32>(&[3, 4]),), OnExtra::Ignore)
        .unwrap_err();
    assert!(one.to_string().contains("no tensor `0`"), "{one}");
}

#[test]
fn a_wrong_dtype_or_shape_is_named_with_both_sides() {
    let (_dir, path) = saved();
    let mut wrong_type = spec();
    wrong_type.layers[0].w = Shape::of::<f64>(&[3, 4]);
    let e = checkpoint::load(client(), &path, &wrong_type).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "checkpoint {}: tensor `layers.0.w` is F32 in the file; the tree's leaf is f64[3,4] (F64)",
            path.display()
        )
    );
    match problem(e, &path) {
        CheckpointError::ElementType {
            name,
            expected,
            found,
        } => {
            assert_eq!(name, "layers.0.w");
            assert_eq!(expected, Shape::of::<f64>(&[3, 4]));
            assert_eq!(found, "F32");
        }
        other => panic!("{other:?}"),
    }
    // bf16 and f16 are told apart, and pred and u8.
    let mut half = spec();
    half.layers[0].b = Shape::of::<f16>(&[4]);
    let e = checkpoint::load_host(&path, &half).unwrap_err();
    assert!(e.to_string().contains("`layers.0.b` is BF16"), "{e}");
    let mut mask = spec();
    mask.mask = Shape::of::<u8>(&[2, 3]);
    let e = checkpoint::load_host(&path, &mask).unwrap_err();
    assert!(e.to_string().contains("`mask` is BOOL"), "{e}");

    let mut transposed = spec();
    transposed.layers[0].w = Shape::of::<f32>(&[4, 3]);
    let e = checkpoint::load(client(), &path, &transposed).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "checkpoint {}: tensor `layers.0.w` has dims [3, 4] in the file; the tree's leaf is f32[4,3] (dims [4, 3])",
            path.display()
        )
    );
    // Same element count, other rank; rank 0 against rank 1.
    for dims in [&[12][..], &[1, 3, 4], &[]] {
        let mut s = spec();
        s.layers[0].w = Shape::of::<f32>(dims);
        let e = checkpoint::load_host(&path, &s).unwrap_err();
        assert!(
            matches!(problem(e, &path), CheckpointError::Dims { ref name, .. } if name == "layers.0.w"),
            "{dims:?}"
        );
    }
    let mut vector_step = spec();
    vector_step.step = Shape::of::<i32>(&[1]);
    let e = checkpoint::load_host(&path, &vector_step).unwrap_err();
    assert!(
        e.to_string().contains("`step` has dims [] in the file"),
        "{e}"
    );
    // A complex or tuple leaf cannot be in a checkpoint.
    let mut complex = spec();
    complex.embed = Shape::array(ElementType::C64, &[5]);
    let e = checkpoint::load_host(&path, &complex).unwrap_err();
    assert!(matches!(
        problem(e, &path),
        CheckpointError::Unsupported { .. }
    ));
}

#[test]
fn a_bool_tensor_holding_other_bytes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mask.safetensors");
    let data = [0u8, 1, 2];
    let view = TensorView::new(Dtype::BOOL, vec![3], &data).unwrap();
    std::fs::write(&path, safetensors::serialize([("0", view)], None).unwrap()).unwrap();
    let spec = (Shape::of::<bool>(&[3]),);
    let e = checkpoint::load(client(), &path, &spec).unwrap_err();
    match problem(e, &path) {
        CheckpointError::InvalidValue { name, index } => {
            assert_eq!((name.as_str(), index), ("0", 2));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn saving_is_atomic() {
    let (dir, path) = saved();
    let first = std::fs::read(&path).unwrap();
    assert_eq!(files_in(dir.path()), ["model.safetensors"]);

    // Saving over an existing checkpoint replaces it whole and leaves no temporary
    // file behind.
    let mut values = host_values();
    values.step = HostArray::from_slice(&[42i32], &[]).unwrap();
    checkpoint::save(&path, &upload_tree(&values)).unwrap();
    assert_eq!(files_in(dir.path()), ["model.safetensors"]);
    let loaded = checkpoint::load(client(), &path, &spec()).unwrap();
    assert_eq!(loaded.step.to_scalar::<i32>().unwrap(), 42);
    let second = std::fs::read(&path).unwrap();
    assert_ne!(first, second);

    // A save whose download fails (a leaf of an element type the crate cannot
    // read: f8e4m3fnuz, made by a StableHLO program) leaves the old file untouched and no
    // temporary file.
    let f8 = client()
        .compile_mlir(
            b"func.func public @main(%x: tensor<i32>) -> tensor<f8E4M3FNUZ> {
  %y = stablehlo.convert %x : (tensor<i32>) -> tensor<f8E4M3FNUZ>
  return %y : tensor<f8E4M3FNUZ>
}",
            &Default::default(),
        )
        .unwrap();
    let mut params = upload_tree(&host_values());
    let stepped = params.step;
    params.step = f8.execute(&[&stepped]).unwrap().remove(0);
    let e = checkpoint::save(&path, &params).unwrap_err();
    match problem(e.clone(), &path) {
        CheckpointError::Transfer { name, error } => {
            assert_eq!(name, "step");
            assert!(
                matches!(
                    *error,
                    Error::Core(xlaclient::Error::Runtime(
                        RuntimeError::UnsupportedElementType { .. }
                    ))
                ),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .contains("leaf `step`: the buffer's element type"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), second);
    assert_eq!(files_in(dir.path()), ["model.safetensors"]);

    // With the leaf replaced by a readable buffer, the save goes through.
    params.step = stepped;
    assert!(checkpoint::save(&path, &params).is_ok());

    // A directory that does not exist: an I/O error, nothing created.
    let nowhere = dir.path().join("no/such/dir/model.safetensors");
    let e = checkpoint::save(&nowhere, &upload_tree(&host_values())).unwrap_err();
    assert!(
        matches!(problem(e.clone(), &nowhere), CheckpointError::Io { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("temporary file"), "{e}");
    assert_eq!(files_in(dir.path()), ["model.safetensors"]);

    // A path with a `.` component.
    let rel = dir.path().join(".").join("rel.safetensors");
    checkpoint::save(&rel, &upload_tree(&host_values())).unwrap();
    assert_eq!(
        files_in(dir.path()),
        ["model.safetensors", "rel.safetensors"]
    );
}

#[test]
fn host_arrays_check_their_bytes() {
    use ElementType::{C64, F32, Pred};
    let kind = |r: xlaclient::nn::Result<HostArray>| match r {
        Err(Error::HostArray(k)) => k,
        other => panic!("not a host-array error: {other:?}"),
    };
    let e = kind(HostArray::new(F32, &[2], vec![0; 7]));
    assert_eq!(
        e,
        HostArrayError::ByteCount {
            shape: Shape::of::<f32>(&[2]),
            expected: 8,
            got: 7
        }
    );
    assert_eq!(e.to_string(), "f32[2] needs 8 bytes, 7 given");
    assert_eq!(
        kind(HostArray::new(F32, &[3, -1], vec![])),
        HostArrayError::NegativeDimension {
            dims: vec![3, -1],
            axis: 1
        }
    );
    assert!(matches!(
        kind(HostArray::new(F32, &[i64::MAX, 4], vec![])),
        HostArrayError::TooLarge { ty: F32, .. }
    ));
    assert_eq!(
        kind(HostArray::new(C64, &[1], vec![0; 8])),
        HostArrayError::Unsupported { ty: C64 }
    );
    assert!(matches!(
        kind(HostArray::from_slice(&[1.0f32, 2.0, 3.0], &[2])),
        HostArrayError::ByteCount {
            expected: 8,
            got: 12,
            ..
        }
    ));
    let a = HostArray::new(Pred, &[2], vec![1, 3]).unwrap();
    let bad_pred = HostArrayError::InvalidValue { ty: Pred, index: 1 };
    assert!(matches!(a.to_vec::<bool>(), Err(Error::HostArray(k)) if k == bad_pred));
    assert!(matches!(a.to_buffer(client()), Err(Error::HostArray(k)) if k == bad_pred));
    let s = HostArray::from_slice(&[1u16, 2], &[2]).unwrap();
    assert_eq!(s.bytes(), [1, 0, 2, 0]);
    assert_eq!(s.to_vec::<u16>().unwrap(), [1, 2]);
    let e = s.to_vec::<i16>().unwrap_err();
    assert!(
        matches!(
            e,
            Error::HostArray(HostArrayError::ElementType {
                held: ElementType::U16,
                wanted: ElementType::S16
            })
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "host array: the array holds u16; s16 was asked for"
    );
    let b = s.to_buffer(client()).unwrap();
    assert_eq!(HostArray::from_buffer(&b).unwrap(), s);
}
