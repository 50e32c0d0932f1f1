//! `Buffer::read_in_place` (the host loop's way of reading Q-values, see
//! `examples/catch_hostloop.rs`) on the real plugin: it gives what an independent
//! computation in Rust gives, and the same as `copy_to_host`, for outputs of
//! executables (transposed ones included), uploaded buffers, every rank from 0 to 3,
//! a second device, and synchronous and asynchronous clients; bad input is the same
//! error as a copy's.

mod common;

use common::*;
use xlaclient::{Builder, Client, ClientOptions, Shape};

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
        out[0].read_in_place(&mut y).unwrap();
        out[1].read_in_place(&mut t).unwrap();
        assert_eq!(y, want_y);
        assert_eq!(t, want_t);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), y);
        assert_eq!(out[1].to_vec::<f32>().unwrap(), t);
    }
    // An uploaded buffer reads back as it was given.
    let mut back = vec![0.0f32; rows * cols];
    xb.read_in_place(&mut back).unwrap();
    assert_eq!(back, x);
}

#[test]
fn read_in_place_matches_rust_and_copy_on_the_shared_client() {
    check_client(client());
}

#[test]
fn read_in_place_matches_rust_and_copy_on_a_synchronous_client() {
    let sync = Client::new(client().plugin(), &ClientOptions::new().asynchronous(false)).unwrap();
    check_client(&sync);
}

#[test]
fn read_in_place_every_rank_and_type() {
    let c = client();
    let s = c.scalar(7i32).unwrap();
    let mut one = [0i32];
    s.read_in_place(&mut one).unwrap();
    assert_eq!(one, [7]);

    let v: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
    for dims in [&[24i64][..], &[4, 6], &[2, 3, 4]] {
        let b = c.buffer_from_host(&v, dims).unwrap();
        let mut got = vec![0.0f64; 24];
        b.read_in_place(&mut got).unwrap();
        assert_eq!(got, v, "dims {dims:?}");
    }
    // Empty buffers read as empty.
    let e = c.buffer_from_host::<f32>(&[], &[0, 3]).unwrap();
    e.read_in_place::<f32>(&mut []).unwrap();
}

#[test]
fn read_in_place_on_the_second_device() {
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
    moved.read_in_place(&mut got).unwrap();
    assert_eq!(got, v);
}

#[test]
fn read_in_place_refuses_what_a_copy_refuses() {
    let b = upload(&[1.0f32, 2.0, 3.0], &[3]);
    let mut short = [0.0f32; 2];
    assert!(matches!(
        b.read_in_place(&mut short),
        Err(xlaclient::RuntimeError::HostLength { .. })
    ));
    let mut wrong_type = [0i32; 3];
    assert!(matches!(
        b.read_in_place(&mut wrong_type),
        Err(xlaclient::RuntimeError::HostType { .. })
    ));
}
