//! Reading results on the host, as every read does by default (`copy_to_host`,
//! `to_vec`, `to_scalar`: in place where the buffer lives in host memory in the
//! dense row-major layout, through the plugin's transfer otherwise), on the real
//! plugin: it gives what an independent computation in Rust gives, and the same as
//! the plugin's own transfer (`copy_to_host_via_plugin`), for outputs of executables
//! (tuples and transposed ones included), uploaded buffers, every rank from 0 to 3,
//! every element type, a second device, and synchronous and asynchronous clients;
//! bad input is the same error either way.

mod common;

use common::*;
use xlaclient::half::{bf16, f16};
use xlaclient::{Builder, Client, ClientOptions, NativeType, Shape};

/// `[rows, cols]` input; outputs `x * 2 + 1` ([rows, cols]) and `transpose(x)`
/// ([cols, rows]).
fn twice_plus_one_and_transpose(rows: i64, cols: i64) -> xlaclient::Computation {
    let b = Builder::new("t");
    let x = b.parameter(0, Shape::of::<f32>(&[rows, cols]), "x");
    let y = &x * 2.0 + 1.0;
    let t = x.transpose(&[1, 0]);
    b.build(&b.tuple(&[&y, &t])).expect("builds")
}

fn check_client(client: &Client) {
    let (rows, cols) = (5usize, 3usize);
    let x: Vec<f32> = Rng(11).vec(rows * cols, -2.0, 2.0);
    let exe = client
        .compile(twice_plus_one_and_transpose(rows as i64, cols as i64))
        .unwrap();
    let xb = client
        .buffer_from_host(&x, &[rows as i64, cols as i64])
        .unwrap();
    // Independent answers, in Rust.
    let want_y: Vec<f32> = x.iter().map(|v| v * 2.0 + 1.0).collect();
    let mut want_t = vec![0.0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            want_t[c * rows + r] = x[r * cols + c];
        }
    }
    for _ in 0..3 {
        let out = exe.execute(&[&xb]).unwrap();
        assert_eq!(out.len(), 2);
        let mut y = vec![0.0f32; rows * cols];
        let mut t = vec![0.0f32; rows * cols];
        out[0].copy_to_host(&mut y).unwrap();
        out[1].read_in_place(&mut t).unwrap();
        assert_eq!(y, want_y);
        assert_eq!(t, want_t);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), y);
        assert_eq!(out[1].to_vec::<f32>().unwrap(), t);
        let (mut y2, mut t2) = (vec![0.0f32; rows * cols], vec![0.0f32; rows * cols]);
        out[0].copy_to_host_via_plugin(&mut y2).unwrap();
        out[1].copy_to_host_via_plugin(&mut t2).unwrap();
        assert_eq!((y2, t2), (want_y.clone(), want_t.clone()));
    }
    // An uploaded buffer reads back as it was given.
    let mut back = vec![0.0f32; rows * cols];
    xb.copy_to_host(&mut back).unwrap();
    assert_eq!(back, x);
}

#[test]
fn reads_match_rust_and_the_plugin_on_the_default_synchronous_client() {
    check_client(client());
}

#[test]
fn reads_match_rust_and_the_plugin_on_an_asynchronous_client() {
    let a = Client::new(client().plugin(), &ClientOptions::new().asynchronous(true)).unwrap();
    check_client(&a);
}

/// Uploads `values` with `dims`, runs `x + x` (`x | x` for bools, so every type
/// takes the program's path), and reads input and output back every way.
fn check_type<T: NativeType + PartialEq>(values: &[T], dims: &[i64], double: impl Fn(T) -> T) {
    let c = client();
    let b = Builder::new("double");
    let x = b.parameter(0, Shape::of::<T>(dims), "x");
    let y = if T::TYPE == xlaclient::ElementType::Pred {
        x.or(&x)
    } else {
        &x + &x
    };
    let exe = c.compile(b.build(&y).unwrap()).unwrap();
    let input = c.buffer_from_host(values, dims).unwrap();
    let out = exe.execute(&[&input]).unwrap().remove(0);
    let want: Vec<T> = values.iter().map(|v| double(*v)).collect();
    for (buf, want) in [(&input, values), (&out, &want[..])] {
        let mut by_plugin = vec![T::default(); want.len()];
        buf.copy_to_host_via_plugin(&mut by_plugin).unwrap();
        assert_eq!(by_plugin, want, "{} {dims:?} via plugin", T::TYPE);
        assert_eq!(
            buf.to_vec::<T>().unwrap(),
            want,
            "{} {dims:?} to_vec",
            T::TYPE
        );
        let mut copied = vec![T::default(); want.len()];
        buf.copy_to_host(&mut copied).unwrap();
        assert_eq!(copied, want, "{} {dims:?} copy_to_host", T::TYPE);
        if dims.is_empty() {
            assert_eq!(buf.to_scalar::<T>().unwrap(), want[0]);
        }
    }
}

#[test]
fn every_rank_and_element_type_reads_as_the_plugin_copies() {
    for dims in [&[][..], &[6], &[2, 3], &[1, 2, 3]] {
        let n: i64 = dims.iter().product();
        let n = n as usize;
        let f: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.25).collect();
        check_type(&f, dims, |v| v + v);
        check_type(
            &f.iter().map(|v| *v as f32).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &f.iter().map(|v| f16::from_f64(*v)).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &f.iter().map(|v| bf16::from_f64(*v)).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as i8).map(|i| i - 2).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as i16).map(|i| i * 100 - 7).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as i32).map(|i| i * 1000 - 9).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as i64).map(|i| i << 40).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(&(0..n as u8).collect::<Vec<_>>(), dims, |v| v + v);
        check_type(
            &(0..n as u16).map(|i| i * 300).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as u32).map(|i| i * 70000).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(
            &(0..n as u64).map(|i| i << 33).collect::<Vec<_>>(),
            dims,
            |v| v + v,
        );
        check_type(&(0..n).map(|i| i % 3 == 0).collect::<Vec<_>>(), dims, |v| v);
    }
    // Empty buffers read as empty.
    let e = client().buffer_from_host::<f32>(&[], &[0, 3]).unwrap();
    e.copy_to_host::<f32>(&mut []).unwrap();
    assert!(e.to_vec::<f32>().unwrap().is_empty());
}

#[test]
fn reads_on_the_second_device() {
    let c = client();
    let devices = c.addressable_devices();
    if devices.len() < 2 {
        eprintln!("one device only; skipped");
        return;
    }
    let v: Vec<u8> = (0..12).collect();
    let b = c.buffer_from_host(&v, &[3, 4]).unwrap();
    let moved = b.copy_to_device(&devices[1]).unwrap();
    let mut got = vec![0u8; 12];
    moved.copy_to_host(&mut got).unwrap();
    assert_eq!(got, v);
    assert_eq!(moved.to_vec::<u8>().unwrap(), v);
}

#[test]
fn reads_refuse_what_a_plugin_copy_refuses() {
    let b = upload(&[1.0f32, 2.0, 3.0], &[3]);
    let mut short = [0.0f32; 2];
    let mut wrong_type = [0i32; 3];
    for in_place in [true, false] {
        let r = if in_place {
            b.copy_to_host(&mut short)
        } else {
            b.copy_to_host_via_plugin(&mut short)
        };
        assert!(matches!(r, Err(xlaclient::RuntimeError::HostLength { .. })));
        let r = if in_place {
            b.copy_to_host(&mut wrong_type)
        } else {
            b.copy_to_host_via_plugin(&mut wrong_type)
        };
        assert!(matches!(r, Err(xlaclient::RuntimeError::HostType { .. })));
    }
    assert!(matches!(
        b.to_scalar::<f32>(),
        Err(xlaclient::RuntimeError::HostLength { .. })
    ));
}
