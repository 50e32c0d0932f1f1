//! numpy indexing (`Op::index`) and JAX's functional updates (`Op::at` with
//! `get/set/add/mul/min/max` and their modes) against JAX 0.10.2: every case of
//! `tests/data/index_jax.json` (recorded by `bench/record_index_jax.py`: integers,
//! negative integers, slices with steps, reversed and clipped bounds, new axes,
//! ellipses, index arrays broadcast together, adjacent and apart, clamped or filled
//! or dropped when out of range, constant masks, repeated indices, empty results)
//! built with `ix!` entries (index arrays as run-time parameters), run on the CPU
//! plugin and compared element by element with the shape; where recorded, the
//! gradients against JAX's. Bad indices are errors naming `index` and this file's
//! line.

mod common;

use common::*;
use serde_json::Value as Json;
use xlaclient::{Buffer, Builder, ElementType, IndexMode, Ix, Op, Shape, ix};

fn cases() -> Vec<Json> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/index_jax.json"
    ))
    .expect("tests/data/index_jax.json");
    let j: Json = serde_json::from_str(&text).expect("json");
    assert_eq!(j["jax_version"], "0.10.2");
    j["cases"].as_array().expect("cases").clone()
}

fn ty_of(a: &Json) -> ElementType {
    match a["dtype"].as_str().unwrap() {
        "float32" => ElementType::F32,
        "int32" => ElementType::S32,
        d => panic!("dtype {d}"),
    }
}

fn upload_json(a: &Json) -> Buffer {
    let (d, v) = (dims_of(a), data_of(a));
    match ty_of(a) {
        ElementType::F32 => upload(&v.iter().map(|x| *x as f32).collect::<Vec<_>>(), &d),
        _ => upload(&v.iter().map(|x| *x as i32).collect::<Vec<_>>(), &d),
    }
}

fn download(b: &Buffer) -> Vec<f64> {
    match b.element_type().unwrap() {
        ElementType::F32 => b
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        ElementType::S32 => b
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        t => panic!("{t}"),
    }
}

/// The case's index as `Ix` entries; index arrays become parameters from
/// `next` on (their buffers are pushed to `args`).
fn entries(b: &Builder, c: &Json, next: &mut usize, args: &mut Vec<Buffer>) -> Vec<Ix> {
    let mut out = Vec::new();
    for e in c["index"].as_array().unwrap() {
        let o = e.as_object().unwrap();
        let ix = if let Some(k) = o.get("int") {
            Ix::from(k.as_i64().unwrap())
        } else if let Some(s) = o.get("slice") {
            let part = |k: usize| s[k].as_i64();
            Ix::slice(part(0), part(1), part(2).unwrap_or(1))
        } else if o.contains_key("newaxis") {
            Ix::NewAxis
        } else if o.contains_key("ellipsis") {
            Ix::Ellipsis
        } else if let Some(a) = o.get("array") {
            let p = b.parameter(*next, Shape::of::<i32>(&dims_of(a)), "idx");
            *next += 1;
            args.push(upload_json(a));
            Ix::from(&p)
        } else if let Some(m) = o.get("mask") {
            let values: Vec<bool> = data_of(m).iter().map(|v| *v != 0.0).collect();
            Ix::mask(&values, &dims_of(m))
        } else {
            panic!("entry {e}")
        };
        out.push(ix);
    }
    out
}

fn mode_of(c: &Json) -> Option<IndexMode> {
    match c["mode"].as_str() {
        None => None,
        Some("clip") => Some(IndexMode::Clip),
        Some("fill") => Some(IndexMode::Fill),
        Some("drop") => Some(IndexMode::Drop),
        Some(m) => panic!("mode {m}"),
    }
}

/// The case's result, built on `x` (and `v`, the update value).
fn apply(c: &Json, x: &Op, v: Option<&Op>, idx: &[Ix]) -> Op {
    let op = c["op"].as_str().unwrap();
    if op == "index" {
        return x.index(idx);
    }
    let at = match mode_of(c) {
        Some(m) => x.at(idx).mode(m),
        None => x.at(idx),
    };
    let v = || v.expect("a value");
    match op {
        "get" => at.get(),
        "set" => at.set(v()),
        "add" => at.add(v()),
        "multiply" => at.mul(v()),
        "min" => at.min(v()),
        "max" => at.max(v()),
        o => panic!("op {o}"),
    }
}

fn same(name: &str, what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{name} {what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-5 * (1.0 + w.abs());
        assert!(ok, "{name} {what}[{k}]: got {g}, JAX {w}");
    }
}

#[test]
fn every_recorded_case_matches_jax() {
    let all = cases();
    assert!(all.len() >= 50, "{} cases", all.len());
    for c in &all {
        let name = c["name"].as_str().unwrap();
        let b = Builder::new(name);
        let xs = Shape::array(ty_of(&c["x"]), &dims_of(&c["x"]));
        let x = b.parameter(0, xs, "x");
        let mut args = vec![upload_json(&c["x"])];
        let mut next = 1;
        let v = c.get("value").map(|v| {
            let p = b.parameter(next, Shape::array(ty_of(v), &dims_of(v)), "v");
            next += 1;
            args.push(upload_json(v));
            p
        });
        let idx = entries(&b, c, &mut next, &mut args);
        let out = apply(c, &x, v.as_ref(), &idx);
        assert_eq!(out.dims().unwrap(), dims_of(&c["out"]), "{name}: shape");
        let mut results = vec![out.clone()];
        let grads = c.get("grads").and_then(Json::as_array);
        if grads.is_some() {
            let n: i64 = dims_of(&c["out"]).iter().product();
            let w: Vec<f32> = (0..n).map(|k| 1.0 + k as f32 / 10.0).collect();
            let w = b.constant_array(&w, &dims_of(&c["out"]));
            let axes: Vec<i64> = (0..dims_of(&c["out"]).len() as i64).collect();
            let loss = out.mul(&w).reduce_sum(&axes);
            results.push(b.grad(&loss, &x));
            if let Some(v) = &v {
                results.push(b.grad(&loss, v));
            }
        }
        let refs: Vec<&Op> = results.iter().collect();
        let m = b
            .build_tuple(&refs)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let bufs: Vec<&Buffer> = args.iter().collect();
        let got = run(&m, &bufs);
        same(name, "out", &download(&got[0]), &data_of(&c["out"]));
        if let Some(gs) = grads {
            for (k, g) in gs.iter().enumerate() {
                same(
                    name,
                    &format!("grad {k}"),
                    &download(&got[1 + k]),
                    &data_of(g),
                );
            }
        }
    }
}

#[test]
fn static_indices_build_slices_not_gathers() {
    let b = Builder::new("static");
    let x = b.parameter(0, Shape::of::<f32>(&[6, 4]), "x");
    let y = x.index(&ix![Ix::step(-2), 1..3, Ix::NewAxis]);
    assert_eq!(y.dims().unwrap(), vec![3, 2, 1]);
    let m = b.build(&y).unwrap();
    let text = m.to_hlo_text();
    assert!(!text.contains("gather("), "{text}");
    let data: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let got = run1::<f32>(&m, &[&upload(&data, &[6, 4])]);
    // rows 5, 3, 1; columns 1, 2
    assert_eq!(got, vec![21.0, 22.0, 13.0, 14.0, 5.0, 6.0]);
}

#[test]
fn a_buffer_write_at_a_run_time_position() {
    // The replay-buffer idiom: buffer.at[i].set(row), i a traced scalar.
    let b = Builder::new("write");
    let buf = b.parameter(0, Shape::of::<f32>(&[4, 3]), "buf");
    let i = b.parameter(1, Shape::of::<i32>(&[]), "i");
    let row = b.parameter(2, Shape::of::<f32>(&[3]), "row");
    let m = b.build(&buf.at(&ix![&i]).set(&row)).unwrap();
    let zeros = upload(&[0.0f32; 12], &[4, 3]);
    let row = upload(&[1.0f32, 2.0, 3.0], &[3]);
    for (i, want_row) in [(2, Some(2)), (-1, Some(3)), (4, None), (-5, None)] {
        let got = run1::<f32>(&m, &[&zeros, &upload(&[i], &[]), &row]);
        let mut want = vec![0.0f32; 12];
        if let Some(r) = want_row {
            want[r * 3..r * 3 + 3].copy_from_slice(&[1.0, 2.0, 3.0]);
        }
        assert_eq!(got, want, "i = {i}");
    }
}

#[test]
fn bad_indices_are_errors_naming_the_op_and_line() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 4]), "x");
    let f = b.parameter(1, Shape::of::<f32>(&[2]), "f");
    let m = b.parameter(2, Shape::of::<bool>(&[3]), "m");
    let line = line!() + 2;
    let cases = [
        (x.index(&ix![3]), "out of bounds"),
        (x.index(&ix![0, 0, 0]), "too many indices"),
        (x.index(&ix![Ix::Ellipsis, 0, Ix::Ellipsis]), "one ellipsis"),
        (x.index(&ix![Ix::step(0)]), "step 0"),
        (x.index(&ix![Ix::step(i64::MIN)]), "step -922"),
        (x.index(&ix![&f]), "integer type"),
        (x.index(&ix![&m]), "constant mask"),
        (x.index(&ix![Ix::mask(&[true, false], &[2])]), "not match"),
        (x.index(&ix![Ix::mask(&[true], &[2])]), "needs 2 values"),
        (x.at(&ix![0]).set(&f), "does not broadcast"),
    ];
    for (k, (op, want)) in cases.iter().enumerate() {
        let e = op.shape().unwrap_err().to_string();
        assert!(e.contains(want), "case {k}: {e}");
        assert!(e.contains("index"), "case {k}: {e}");
        let at = format!("numpy_index.rs:{}", line + k as u32);
        assert!(e.contains(&at), "case {k}: {e} (want {at})");
    }
    // An index array cannot index an empty axis (JAX refuses it too).
    let e0 = b.parameter(3, Shape::of::<f32>(&[0, 3]), "e");
    let i = b.parameter(4, Shape::of::<i32>(&[2]), "i");
    assert!(
        e0.index(&ix![&i])
            .shape()
            .unwrap_err()
            .to_string()
            .contains("size 0")
    );
    // ... but updating through it changes nothing, as JAX's.
    assert_eq!(e0.at(&ix![&i]).set(1.0).dims().unwrap(), vec![0, 3]);
}
