//! Uploads without a copy on the real plugin: `AlignedHost` arrays moved into
//! buffers (`Client::buffer_from_aligned`, `Buffer::into_host`) and the client's
//! pool of aligned blocks behind `Client::buffer_from_host`. The values are right;
//! the host memory stays alive and unchanged as long as the plugin may read it
//! (an execution still running when the buffer is dropped or its array taken back
//! sees the values it was given); a lent buffer is never donated; bad input is an
//! error.

mod common;

use common::*;
use xlaclient::{AlignedHost, Arg, Builder, Client, ClientOptions, Computation, Shape};

/// An asynchronous client (the test's default client is synchronous, whose
/// executions are finished when `execute` returns).
fn async_client() -> Client {
    Client::new(client().plugin(), &ClientOptions::new().asynchronous(true)).unwrap()
}

/// A program that takes a while on `[n, n]` inputs and reads `x` only at the end:
/// `h = w`, `steps` times `h = tanh(h @ w) + h`, then `h + x`.
fn slow(n: i64, steps: i32) -> Computation {
    let b = Builder::new("slow");
    let x = b.parameter(0, Shape::of::<f32>(&[n, n]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[n, n]), "w");
    let h = b.fori_loop(0, steps, w.clone(), |_, h| {
        let m = h.matmul(&w).tanh();
        &m + &h
    });
    b.build(&(&h + &x)).unwrap()
}

/// `slow` in plain Rust (f64 accumulation).
fn slow_rust(x: &[f32], w: &[f32], n: usize, steps: usize) -> Vec<f32> {
    let mut h: Vec<f32> = w.to_vec();
    for _ in 0..steps {
        let mut next = vec![0.0f32; n * n];
        for r in 0..n {
            for c in 0..n {
                let mut s = 0.0f64;
                for k in 0..n {
                    s += h[r * n + k] as f64 * w[k * n + c] as f64;
                }
                next[r * n + c] = (s as f32).tanh() + h[r * n + c];
            }
        }
        h = next;
    }
    h.iter().zip(x).map(|(a, b)| a + b).collect()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-3 * (1.0 + y.abs()))
}

#[test]
fn an_aligned_array_goes_in_and_comes_back_unchanged() {
    for c in [client().clone(), async_client()] {
        let b = Builder::new("neg");
        let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
        let exe = c.compile(b.build(&(-&x)).unwrap()).unwrap();
        let mut host = AlignedHost::<f32>::new(6).unwrap();
        let address = host.as_ptr();
        for step in 0..5 {
            for (i, v) in host.iter_mut().enumerate() {
                *v = (step * 10 + i) as f32;
            }
            let want: Vec<f32> = host.iter().map(|v| -v).collect();
            let sent = host.to_vec();
            let input = c.buffer_from_aligned(host, &[2, 3]).unwrap();
            assert_eq!(input.to_vec::<f32>().unwrap(), sent);
            let out = exe.execute(&[&input]).unwrap();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
            host = input.into_host().unwrap();
            // The same memory, with the values it held.
            assert_eq!(host.as_ptr(), address);
            assert_eq!(&host[..], &sent[..]);
        }
    }
}

#[test]
fn every_element_type_goes_in_without_a_copy() {
    let c = client();
    fn round_trip<T: xlaclient::NativeType + PartialEq>(c: &Client, v: &[T]) {
        let host = AlignedHost::from_slice(v).unwrap();
        let b = c.buffer_from_aligned(host, &[v.len() as i64]).unwrap();
        assert_eq!(b.to_vec::<T>().unwrap(), v);
        let mut by_plugin = vec![T::default(); v.len()];
        b.copy_to_host_via_plugin(&mut by_plugin).unwrap();
        assert_eq!(by_plugin, v);
        assert_eq!(&b.into_host::<T>().unwrap()[..], v);
    }
    round_trip(c, &[true, false, true]);
    round_trip(c, &[1i8, -2, 3]);
    round_trip(c, &[1i16, -2]);
    round_trip(c, &[1i32, -2, 3, 4]);
    round_trip(c, &[1i64 << 40]);
    round_trip(c, &[255u8, 0, 7]);
    round_trip(c, &[65535u16]);
    round_trip(c, &[1u32, 2]);
    round_trip(c, &[u64::MAX]);
    round_trip(c, &[xlaclient::half::f16::from_f32(1.5)]);
    round_trip(c, &[xlaclient::half::bf16::from_f32(-2.5)]);
    round_trip(c, &[0.25f32; 17]);
    round_trip(c, &[1e300f64, -0.0]);
    // Empty arrays too.
    let e = c
        .buffer_from_aligned(AlignedHost::<f32>::new(0).unwrap(), &[0, 4])
        .unwrap();
    assert!(e.to_vec::<f32>().unwrap().is_empty());
    assert!(e.into_host::<f32>().unwrap().is_empty());
}

#[test]
fn into_host_waits_for_an_execution_still_reading_the_array() {
    let c = async_client();
    let n = 96usize;
    let steps = 40;
    let exe = c.compile(slow(n as i64, steps)).unwrap();
    let mut rng = Rng(5);
    let x0 = rng.vec(n * n, -1.0, 1.0);
    let w = rng.vec(n * n, -0.1, 0.1);
    let want = slow_rust(&x0, &w, n, steps as usize);
    let wb = c.buffer_from_host(&w, &[n as i64, n as i64]).unwrap();
    for _ in 0..3 {
        let x = c
            .buffer_from_aligned(AlignedHost::from_slice(&x0).unwrap(), &[n as i64, n as i64])
            .unwrap();
        let running = exe.execute_async(&[&x, &wb]).unwrap();
        // Taken back at once: it must wait until the execution no longer reads
        // it, so that overwriting it cannot change the result.
        let mut host = x.into_host::<f32>().unwrap();
        host.fill(f32::NAN);
        let out = running.wait().unwrap();
        assert!(close(&out[0].to_vec::<f32>().unwrap(), &want));
    }
}

#[test]
fn a_pooled_upload_outlives_its_buffer_while_an_execution_reads_it() {
    let c = async_client();
    let n = 96usize;
    let steps = 40;
    let exe = c.compile(slow(n as i64, steps)).unwrap();
    let mut rng = Rng(6);
    let x0 = rng.vec(n * n, -1.0, 1.0);
    let w = rng.vec(n * n, -0.1, 0.1);
    let want = slow_rust(&x0, &w, n, steps as usize);
    let wb = c.buffer_from_host(&w, &[n as i64, n as i64]).unwrap();
    let dims = [n as i64, n as i64];
    for _ in 0..3 {
        let x = c.buffer_from_host(&x0, &dims).unwrap();
        let running = exe.execute_async(&[&x, &wb]).unwrap();
        drop(x);
        // Uploads of other values of the same size, while the execution runs: a
        // block handed back to the pool too early would be overwritten by them.
        let noise = vec![f32::NAN; n * n];
        let others: Vec<_> = (0..8)
            .map(|_| c.buffer_from_host(&noise, &dims).unwrap())
            .collect();
        let out = running.wait().unwrap();
        assert!(close(&out[0].to_vec::<f32>().unwrap(), &want));
        for o in others {
            assert!(o.to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));
        }
    }
}

#[test]
fn pooled_uploads_of_every_size_and_thread_hold_their_values() {
    let c = client();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut rng = Rng(100 + t);
                for round in 0..200 {
                    let n = 1 + (round * 37 + t as usize * 11) % 3000;
                    let v = rng.vec(n, -5.0, 5.0);
                    let b = c.buffer_from_host(&v, &[n as i64]).unwrap();
                    let ints: Vec<i32> = (0..n as i32).map(|i| i * 3 - 1).collect();
                    let bi = c.buffer_from_host(&ints, &[n as i64]).unwrap();
                    assert_eq!(b.to_vec::<f32>().unwrap(), v);
                    assert_eq!(bi.to_vec::<i32>().unwrap(), ints);
                    if round % 3 == 0 {
                        // A pooled block can be taken out as an array too.
                        assert_eq!(&b.into_host::<f32>().unwrap()[..], &v[..]);
                    }
                }
            });
        }
    });
    // Above the pool's size: copied by the plugin, the same values.
    let big: Vec<f32> = (0..(600 * 1024)).map(|i| i as f32).collect();
    let b = c.buffer_from_host(&big, &[600, 1024]).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), big);
    assert_eq!(&b.into_host::<f32>().unwrap()[..], &big[..]);
}

#[test]
fn a_lent_buffer_is_passed_as_kept_when_donated() {
    let c = client();
    let b = Builder::new("step");
    let s = b.parameter(0, Shape::of::<f32>(&[4]), "s");
    // Output 0 may reuse parameter 0's memory.
    let exe = c
        .compile(b.build_aliased(&[&(&s + 1.0)], &[(0, 0)]).unwrap())
        .unwrap();
    for pooled in [true, false] {
        let state = if pooled {
            c.buffer_from_host(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap()
        } else {
            c.buffer_from_aligned(
                AlignedHost::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).unwrap(),
                &[4],
            )
            .unwrap()
        };
        // The program never writes into the lent memory; the result is the same.
        let mut out = exe.execute_with([Arg::Donate(state)]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
        // Its output (the plugin's memory) donates as usual.
        let again = exe.execute_with([Arg::Donate(out.remove(0))]).unwrap();
        assert_eq!(again[0].to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0, 6.0]);
    }
}

#[test]
fn bad_aligned_uploads_are_errors() {
    let c = client();
    let host = AlignedHost::<f32>::from_slice(&[1.0, 2.0, 3.0]).unwrap();
    assert!(matches!(
        c.buffer_from_aligned(host, &[2, 2]),
        Err(xlaclient::RuntimeError::HostLength { .. })
    ));
    let host = AlignedHost::<f32>::from_slice(&[1.0, 2.0, 3.0]).unwrap();
    assert!(matches!(
        c.buffer_from_aligned(host, &[-3]),
        Err(xlaclient::RuntimeError::HostLength { .. })
    ));
    let b = c
        .buffer_from_aligned(AlignedHost::<f32>::from_slice(&[1.0, 2.0]).unwrap(), &[2])
        .unwrap();
    assert!(matches!(
        b.into_host::<i32>(),
        Err(xlaclient::RuntimeError::HostType { .. })
    ));
    // An output (no array of its own) comes out as a copy.
    let b = Builder::new("id");
    let x = b.parameter(0, Shape::of::<u8>(&[3]), "x");
    let exe = c.compile(b.build(&(&x + &x)).unwrap()).unwrap();
    let out = exe.execute(&[&upload(&[1u8, 2, 3], &[3])]).unwrap();
    assert_eq!(
        &out.into_iter().next().unwrap().into_host::<u8>().unwrap()[..],
        &[2, 4, 6]
    );
    assert!(matches!(
        AlignedHost::<f64>::new(usize::MAX),
        Err(xlaclient::RuntimeError::HostLength { .. })
    ));
}
