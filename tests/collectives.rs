//! Collectives on the real CPU plugin with several devices (2, 4 and 8): each
//! program compiled with `num_replicas(n)`, run with `execute_replicated`, every
//! device's arguments uploaded to that device, and every value checked against
//! plain Rust. Gradients (`Builder::vjp`) are checked against JAX's transposition
//! rules written in Rust and against the adjoint identity
//! `Σ_devices <L x, c> = Σ_devices <x, Lᵀ c>`. Bad groups, dimensions and pairs are
//! errors; cases that reach the plugin with something it might abort on run in a
//! child process.
//!
//! Both CPU plugins run every collective here (`PJRT_PLUGIN_PATH=… cargo test
//! --test collectives` runs the file against another one).

mod common;
use common::in_child;
use xlaclient::{
    BinaryOp, Builder, Client, ClientOptions, CompileOptions, Computation, Error, Op, Plugin,
    RuntimeError, Shape,
};

/// A client of the plugin under test with `n` CPU devices.
fn client(n: usize) -> Client {
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    Client::new(&plugin, &ClientOptions::new().cpu_device_count(n as i64)).expect("create a client")
}

/// Compiles `m` for `n` replicas and runs it with `args[d]` (one f32 array of
/// `dims` per parameter) on device `d`; returns each device's outputs as f32.
fn run_f32(
    c: &Client,
    m: &Computation,
    n: usize,
    args: &[Vec<Vec<f32>>],
    dims: &[i64],
) -> Vec<Vec<Vec<f32>>> {
    let exe = c
        .compile_with(m, &CompileOptions::new().num_replicas(n as i64))
        .unwrap_or_else(|e| panic!("compile for {n} replicas: {e}"));
    let devices = c.addressable_devices();
    assert_eq!(devices.len(), n);
    let bufs: Vec<Vec<xlaclient::Buffer>> = args
        .iter()
        .zip(&devices)
        .map(|(a, d)| {
            a.iter()
                .map(|v| d.buffer_from_host(v, dims).expect("upload"))
                .collect()
        })
        .collect();
    let refs: Vec<Vec<&xlaclient::Buffer>> = bufs.iter().map(|b| b.iter().collect()).collect();
    let out = exe.execute_replicated(&refs).expect("execute_replicated");
    assert_eq!(out.len(), n);
    for (o, d) in out.iter().zip(&devices) {
        assert_eq!(o[0].device().unwrap(), *d);
    }
    out.iter()
        .map(|o| o.iter().map(|b| b.to_vec::<f32>().unwrap()).collect())
        .collect()
}

/// Device `d`'s test data: `len` small integers (sums are exact in f32).
fn data(d: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((d * 7 + i * 3) % 11) as f32 - 5.0)
        .collect()
}

/// A module of one f32 parameter of `dims` and `f(x)` as its result.
fn module(dims: &[i64], f: impl FnOnce(&Op) -> Op) -> Computation {
    let b = Builder::new("collective");
    let x = b.parameter(0, Shape::of::<f32>(dims), "x");
    b.build(&f(&x)).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `f` on each device's `data(d, len)` of `dims` and returns the outputs.
fn each(n: usize, dims: &[i64], f: impl FnOnce(&Op) -> Op) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let c = client(n);
    let len = dims.iter().product::<i64>() as usize;
    let xs: Vec<Vec<f32>> = (0..n).map(|d| data(d, len)).collect();
    let args: Vec<Vec<Vec<f32>>> = xs.iter().map(|x| vec![x.clone()]).collect();
    let out = run_f32(&c, &module(dims, f), n, &args, dims);
    (xs, out.into_iter().map(|mut o| o.remove(0)).collect())
}

/// Replica groups of consecutive ids of `size` covering `n` replicas.
fn blocks(n: usize, size: usize) -> Vec<Vec<i64>> {
    (0..n / size)
        .map(|g| ((g * size) as i64..((g + 1) * size) as i64).collect())
        .collect()
}

/// The group of `groups` holding `d`, and `d`'s position in it.
fn group_of(groups: &[Vec<i64>], d: usize) -> (&Vec<i64>, usize) {
    groups
        .iter()
        .find_map(|g| g.iter().position(|&r| r == d as i64).map(|i| (g, i)))
        .expect("every device in a group")
}

// ---- replica-id, partition-id --------------------------------------------------

#[test]
fn replica_id_is_each_devices_index() {
    for n in [2, 4, 8] {
        let c = client(n);
        let b = Builder::new("ids");
        let r = b.replica_id();
        let p = b.partition_id();
        let m = b.build_tuple(&[&r, &p]).unwrap();
        let exe = c
            .compile_with(&m, &CompileOptions::new().num_replicas(n as i64))
            .unwrap();
        let no_args: Vec<Vec<&xlaclient::Buffer>> = vec![vec![]; n];
        let out = exe.execute_replicated(&no_args).unwrap();
        for (d, o) in out.iter().enumerate() {
            assert_eq!(
                o[0].to_vec::<u32>().unwrap(),
                [d as u32],
                "replica of device {d}"
            );
            assert_eq!(
                o[1].to_vec::<u32>().unwrap(),
                [0],
                "partition of device {d}"
            );
        }
    }
}

// ---- all-reduce ---------------------------------------------------------------

#[test]
fn psum_over_all_devices_and_over_groups() {
    for n in [2, 4, 8] {
        let dims = [3, 2];
        let (xs, out) = each(n, &dims, |x| x.psum(&[]));
        let total: Vec<f32> = (0..6).map(|i| xs.iter().map(|x| x[i]).sum()).collect();
        for o in &out {
            assert_eq!(o, &total, "psum over {n} devices");
        }
        // Pairs (and, for 8, groups of four with a custom reducer order).
        let groups = blocks(n, 2);
        let (xs, out) = each(n, &dims, |x| x.psum(&groups));
        for (d, o) in out.iter().enumerate() {
            let (g, _) = group_of(&groups, d);
            let want: Vec<f32> = (0..6)
                .map(|i| g.iter().map(|&r| xs[r as usize][i]).sum())
                .collect();
            assert_eq!(o, &want, "psum over groups {groups:?}, device {d}");
        }
    }
    // Groups that are not blocks: {0, 2}, {1, 3}.
    let groups = vec![vec![0, 2], vec![1, 3]];
    let (xs, out) = each(4, &[5], |x| x.psum(&groups));
    for (d, o) in out.iter().enumerate() {
        let (g, _) = group_of(&groups, d);
        let want: Vec<f32> = (0..5)
            .map(|i| g.iter().map(|&r| xs[r as usize][i]).sum())
            .collect();
        assert_eq!(o, &want);
    }
}

#[test]
fn other_reductions_and_a_closure_body() {
    let n = 4;
    let (xs, out) = each(n, &[6], |x| x.pmax(&[]));
    let max: Vec<f32> = (0..6)
        .map(|i| xs.iter().map(|x| x[i]).fold(f32::MIN, f32::max))
        .collect();
    out.iter().for_each(|o| assert_eq!(o, &max));
    let (xs, out) = each(n, &[6], |x| x.pmin(&[]));
    let min: Vec<f32> = (0..6)
        .map(|i| xs.iter().map(|x| x[i]).fold(f32::MAX, f32::min))
        .collect();
    out.iter().for_each(|o| assert_eq!(o, &min));
    let (xs, out) = each(n, &[6], |x| x.all_reduce(BinaryOp::Multiply, &[]));
    let prod: Vec<f32> = (0..6).map(|i| xs.iter().map(|x| x[i]).product()).collect();
    out.iter().for_each(|o| assert_eq!(o, &prod));
    // pmean counts the devices when no groups are given, and takes the size of
    // groups that are.
    let (xs, out) = each(n, &[6], |x| x.pmean(&[]));
    let mean: Vec<f32> = (0..6)
        .map(|i| xs.iter().map(|x| x[i]).sum::<f32>() / n as f32)
        .collect();
    out.iter().for_each(|o| assert_eq!(o, &mean));
    let groups = vec![vec![0, 3], vec![1, 2]];
    let (xs, out) = each(n, &[6], |x| x.pmean(&groups));
    for (d, o) in out.iter().enumerate() {
        let (g, _) = group_of(&groups, d);
        let want: Vec<f32> = (0..6)
            .map(|i| g.iter().map(|&r| xs[r as usize][i]).sum::<f32>() / 2.0)
            .collect();
        assert_eq!(o, &want);
    }
    // A reducer closure: sum of absolute values is not associative-with-identity
    // safe, so use max(a, b) written out with a select.
    let (xs, out) = each(n, &[6], |x| {
        x.all_reduce_with(
            &xlaclient::ops::collective::CollectiveAttrs::groups(&[]),
            |a, b| a.max(b),
        )
    });
    let max2: Vec<f32> = (0..6)
        .map(|i| xs.iter().map(|x| x[i]).fold(f32::MIN, f32::max))
        .collect();
    out.iter().for_each(|o| assert_eq!(o, &max2));
}

#[test]
fn channels_and_global_device_ids() {
    use xlaclient::ops::collective::{CollectiveAttrs, PermuteAttrs};
    // With a channel and one partition, replica and device ids agree.
    let n = 4;
    let groups = blocks(n, 2);
    for attrs in [
        CollectiveAttrs::groups(&groups).channel(1),
        CollectiveAttrs::groups(&groups)
            .channel(2)
            .global_device_ids(),
    ] {
        let (xs, out) = each(n, &[3], |x| x.all_reduce_with(&attrs, |a, b| a + b));
        for (d, o) in out.iter().enumerate() {
            let (g, _) = group_of(&groups, d);
            let want: Vec<f32> = (0..3)
                .map(|i| g.iter().map(|&r| xs[r as usize][i]).sum())
                .collect();
            assert_eq!(o, &want, "{attrs:?}, device {d}");
        }
        let (xs, out) = each(n, &[3], |x| x.all_gather_with(0, &attrs));
        for (d, o) in out.iter().enumerate() {
            let (g, _) = group_of(&groups, d);
            let want: Vec<f32> = g.iter().flat_map(|&r| xs[r as usize].clone()).collect();
            assert_eq!(o, &want, "{attrs:?}, device {d}");
        }
    }
    // With a channel a permute's pairs are partition ids: with one partition,
    // (0, 0) leaves every replica its own value.
    let permute = PermuteAttrs {
        pairs: vec![(0, 0)],
        channel_id: Some(5),
    };
    let (xs, out) = each(n, &[2], |x| x.collective_permute_with(&permute));
    assert_eq!(out, xs);
}

#[test]
fn partition_ids_beyond_the_partitions_are_compile_errors_not_aborts() {
    // Both CPU plugins abort the process (`Span::at failed bounds check`) when a
    // permute with a channel names a partition the program does not have; the
    // compile-time check fences it. An all-to-all with a channel reads its groups
    // as partitions too (the plugins fail its run).
    in_child(
        "partition_ids_beyond_the_partitions_are_compile_errors_not_aborts",
        || {
            use xlaclient::ops::collective::{CollectiveAttrs, PermuteAttrs};
            let c = client(4);
            let permute = PermuteAttrs {
                pairs: vec![(0, 3), (3, 0)],
                channel_id: Some(5),
            };
            let m = module(&[2], |x| x.collective_permute_with(&permute));
            let e = compile_error(&c, &m, 4);
            assert!(
                e.contains("collective-permute") && e.contains("partition 3"),
                "{e}"
            );
            let attrs = CollectiveAttrs::groups(&[vec![0, 1], vec![2, 3]]).channel(1);
            let m = module(&[2], |x| x.all_to_all_with(0, &attrs));
            let e = compile_error(&c, &m, 4);
            assert!(e.contains("all-to-all") && e.contains("partition"), "{e}");
        },
    );
}

// ---- all-gather, reduce-scatter, collective-permute, all-to-all -----------------

#[test]
fn all_gather_joins_the_groups_arrays_in_order() {
    for n in [2, 4, 8] {
        let groups = vec![(0..n as i64).collect::<Vec<_>>()];
        let (xs, out) = each(n, &[2, 3], |x| x.all_gather(0, &groups));
        let want: Vec<f32> = xs.concat();
        out.iter()
            .for_each(|o| assert_eq!(o, &want, "all-gather over {n}"));
    }
    // Along axis 1, in pairs: device d gets [x_a | x_b] row by row.
    let groups = blocks(4, 2);
    let (xs, out) = each(4, &[2, 3], |x| x.all_gather(1, &groups));
    for (d, o) in out.iter().enumerate() {
        let (g, _) = group_of(&groups, d);
        let mut want = Vec::new();
        for r in 0..2 {
            for &m in g {
                want.extend_from_slice(&xs[m as usize][r * 3..r * 3 + 3]);
            }
        }
        assert_eq!(o, &want, "device {d}");
    }
}

#[test]
fn reduce_scatter_keeps_each_members_block_of_the_sum() {
    for n in [2, 4, 8] {
        let groups = vec![(0..n as i64).collect::<Vec<_>>()];
        let rows = n as i64 * 2;
        let (xs, out) = each(n, &[rows, 3], |x| {
            x.reduce_scatter(BinaryOp::Add, 0, &groups)
        });
        let len = rows as usize * 3;
        let total: Vec<f32> = (0..len).map(|i| xs.iter().map(|x| x[i]).sum()).collect();
        for (d, o) in out.iter().enumerate() {
            assert_eq!(o, &total[d * 6..d * 6 + 6], "device {d} of {n}");
        }
    }
}

#[test]
fn collective_permute_shifts_around_a_ring() {
    for n in [2, 4, 8] {
        let pairs: Vec<(i64, i64)> = (0..n as i64).map(|d| (d, (d + 1) % n as i64)).collect();
        let (xs, out) = each(n, &[4], |x| x.collective_permute(&pairs));
        for (d, o) in out.iter().enumerate() {
            assert_eq!(o, &xs[(d + n - 1) % n], "device {d} of {n}");
        }
    }
    // A device that is no target gets zeros.
    let (xs, out) = each(4, &[3], |x| x.collective_permute(&[(0, 1), (1, 2)]));
    assert_eq!(out[1], xs[0]);
    assert_eq!(out[2], xs[1]);
    assert_eq!(out[0], [0.0; 3]);
    assert_eq!(out[3], [0.0; 3]);
}

/// All-to-all in plain Rust: device `d`'s output is, for each member `j` of its
/// group in order, block `d's position` of member `j`'s operand, split along axis 0
/// of a `[rows, cols]` array.
fn all_to_all_rust(
    xs: &[Vec<f32>],
    groups: &[Vec<i64>],
    rows: usize,
    cols: usize,
) -> Vec<Vec<f32>> {
    (0..xs.len())
        .map(|d| {
            let (g, me) = group_of(groups, d);
            let block = rows / g.len() * cols;
            g.iter()
                .flat_map(|&j| xs[j as usize][me * block..(me + 1) * block].to_vec())
                .collect()
        })
        .collect()
}

#[test]
fn all_to_all_exchanges_blocks() {
    for n in [2, 4, 8] {
        let groups = vec![(0..n as i64).collect::<Vec<_>>()];
        let rows = n as i64;
        let (xs, out) = each(n, &[rows, 2], |x| x.all_to_all(0, &groups));
        assert_eq!(out, all_to_all_rust(&xs, &groups, n, 2), "{n} devices");
    }
    let groups = vec![vec![0, 2], vec![3, 1]];
    let (xs, out) = each(4, &[4, 3], |x| x.all_to_all(0, &groups));
    assert_eq!(out, all_to_all_rust(&xs, &groups, 4, 3));
}

// ---- gradients ------------------------------------------------------------------

/// The vjp of `f` at each device's `x` (dims `dims`) with cotangent `c` (dims of
/// `f(x)`), run on `n` devices: returns (x, f(x), c, vjp) per device.
#[allow(clippy::type_complexity)]
fn vjp_each(
    n: usize,
    dims: &[i64],
    out_dims: &[i64],
    f: impl Fn(&Op) -> Op,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let c = client(n);
    let b = Builder::new("vjp");
    let x = b.parameter(0, Shape::of::<f32>(dims), "x");
    let ct = b.parameter(1, Shape::of::<f32>(out_dims), "ct");
    let y = f(&x);
    let g = b.vjp(&[&y], &[&ct], &[&x]).remove(0);
    let m = b.build_tuple(&[&y, &g]).unwrap_or_else(|e| panic!("{e}"));
    let exe = c
        .compile_with(&m, &CompileOptions::new().num_replicas(n as i64))
        .unwrap();
    let len = dims.iter().product::<i64>() as usize;
    let olen = out_dims.iter().product::<i64>() as usize;
    let xs: Vec<Vec<f32>> = (0..n).map(|d| data(d, len)).collect();
    let cs: Vec<Vec<f32>> = (0..n).map(|d| data(d + 3, olen)).collect();
    let devices = c.addressable_devices();
    let bufs: Vec<Vec<xlaclient::Buffer>> = (0..n)
        .map(|d| {
            vec![
                devices[d].buffer_from_host(&xs[d], dims).unwrap(),
                devices[d].buffer_from_host(&cs[d], out_dims).unwrap(),
            ]
        })
        .collect();
    let refs: Vec<Vec<&xlaclient::Buffer>> = bufs.iter().map(|b| b.iter().collect()).collect();
    let out = exe.execute_replicated(&refs).unwrap();
    let ys = out.iter().map(|o| o[0].to_vec::<f32>().unwrap()).collect();
    let gs = out.iter().map(|o| o[1].to_vec::<f32>().unwrap()).collect();
    (xs, ys, cs, gs)
}

/// `Σ_d <y_d, c_d> == Σ_d <x_d, g_d>`: the vjp of a linear collective is its
/// transpose over all devices together.
fn assert_adjoint(xs: &[Vec<f32>], ys: &[Vec<f32>], cs: &[Vec<f32>], gs: &[Vec<f32>]) {
    let dot = |a: &[Vec<f32>], b: &[Vec<f32>]| -> f64 {
        a.iter()
            .zip(b)
            .flat_map(|(u, v)| u.iter().zip(v).map(|(p, q)| *p as f64 * *q as f64))
            .sum()
    };
    let (l, r) = (dot(ys, cs), dot(xs, gs));
    assert!(
        (l - r).abs() < 1e-6 * (1.0 + l.abs()),
        "<Lx, c> = {l}, <x, Lᵀc> = {r}"
    );
}

#[test]
fn gradient_of_psum_is_psum_of_the_cotangents() {
    for n in [2, 4] {
        let (xs, ys, cs, gs) = vjp_each(n, &[3], &[3], |x| x.psum(&[]));
        let want: Vec<f32> = (0..3).map(|i| cs.iter().map(|c| c[i]).sum()).collect();
        gs.iter().for_each(|g| assert_eq!(g, &want));
        assert_adjoint(&xs, &ys, &cs, &gs);
    }
    // pmean: the cotangents' sum over the devices, divided by their count.
    let (xs, ys, cs, gs) = vjp_each(4, &[3], &[3], |x| x.pmean(&[]));
    let want: Vec<f32> = (0..3)
        .map(|i| cs.iter().map(|c| c[i]).sum::<f32>() / 4.0)
        .collect();
    gs.iter().for_each(|g| assert_eq!(g, &want));
    assert_adjoint(&xs, &ys, &cs, &gs);
    // A product has no rule: an error naming the op.
    let b = Builder::new("no");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let y = x.all_reduce(BinaryOp::Multiply, &[]);
    let g = b.vjp(&[&y], &[&y], &[&x]).remove(0);
    let e = b.build(&g).unwrap_err().to_string();
    assert!(e.contains("all-reduce"), "{e}");
}

#[test]
fn gradients_of_all_gather_and_reduce_scatter_are_each_other() {
    let n = 4;
    let groups = blocks(n, 2);
    // all-gather: each device's gradient is the sum over its group of the
    // cotangents' blocks at its position.
    let (xs, ys, cs, gs) = vjp_each(n, &[2, 3], &[4, 3], |x| x.all_gather(0, &groups));
    for (d, g) in gs.iter().enumerate() {
        let (grp, me) = group_of(&groups, d);
        let want: Vec<f32> = (0..6)
            .map(|i| grp.iter().map(|&m| cs[m as usize][me * 6 + i]).sum())
            .collect();
        assert_eq!(g, &want, "device {d}");
    }
    assert_adjoint(&xs, &ys, &cs, &gs);
    // reduce-scatter: each device's gradient is its group's cotangents joined.
    let (xs, ys, cs, gs) = vjp_each(n, &[4, 3], &[2, 3], |x| {
        x.reduce_scatter(BinaryOp::Add, 0, &groups)
    });
    for (d, g) in gs.iter().enumerate() {
        let (grp, _) = group_of(&groups, d);
        let want: Vec<f32> = grp.iter().flat_map(|&m| cs[m as usize].clone()).collect();
        assert_eq!(g, &want, "device {d}");
    }
    assert_adjoint(&xs, &ys, &cs, &gs);
}

#[test]
fn gradients_of_permute_and_all_to_all() {
    let n = 4;
    let pairs = [(0, 1), (1, 2), (2, 3), (3, 0)];
    let (xs, ys, cs, gs) = vjp_each(n, &[3], &[3], |x| x.collective_permute(&pairs));
    for (d, g) in gs.iter().enumerate() {
        assert_eq!(
            g,
            &cs[(d + 1) % n],
            "the cotangent comes back from the target"
        );
    }
    assert_adjoint(&xs, &ys, &cs, &gs);
    // A partial permutation: sources whose value went nowhere get zeros.
    let (xs, ys, cs, gs) = vjp_each(n, &[3], &[3], |x| x.collective_permute(&[(0, 2)]));
    assert_eq!(gs[0], cs[2]);
    assert_eq!(gs[1], [0.0; 3]);
    assert_adjoint(&xs, &ys, &cs, &gs);
    let groups = vec![(0..n as i64).collect::<Vec<_>>()];
    let (xs, ys, cs, gs) = vjp_each(n, &[4, 2], &[4, 2], |x| x.all_to_all(0, &groups));
    assert_eq!(gs, all_to_all_rust(&cs, &groups, 4, 2));
    assert_adjoint(&xs, &ys, &cs, &gs);
}

// ---- bad groups, dimensions, pairs ---------------------------------------------

/// The build error of `f(x)` on an f32[4, 3] parameter.
fn build_error(f: impl FnOnce(&Op) -> Op) -> String {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    let e = b.build(&f(&x)).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e:?}");
    e.to_string()
}

#[test]
fn bad_groups_dimensions_and_pairs_are_build_errors() {
    let here = file!();
    let e = build_error(|x| x.psum(&[vec![0, 1], vec![1, 2]]));
    assert!(
        e.contains("all-reduce") && e.contains("twice") && e.contains(here),
        "{e}"
    );
    let e = build_error(|x| x.psum(&[vec![0, -1]]));
    assert!(e.contains("negative"), "{e}");
    let e = build_error(|x| x.all_gather(2, &[vec![0, 1]]));
    assert!(e.contains("all-gather") && e.contains("dimension 2"), "{e}");
    let e = build_error(|x| x.all_gather(0, &[]));
    assert!(e.contains("all-gather") && e.contains("groups"), "{e}");
    let e = build_error(|x| x.all_gather(0, &[vec![0, 1, 2], vec![3]]));
    assert!(e.contains("one size"), "{e}");
    let e = build_error(|x| x.reduce_scatter(BinaryOp::Add, 1, &[vec![0, 1]]));
    assert!(e.contains("reduce-scatter") && e.contains("divide"), "{e}");
    let e = build_error(|x| x.all_to_all(1, &[vec![0, 1]]));
    assert!(e.contains("all-to-all") && e.contains("divide"), "{e}");
    let e = build_error(|x| x.collective_permute(&[(0, 1), (0, 2)]));
    assert!(
        e.contains("collective-permute") && e.contains("source 0"),
        "{e}"
    );
    let e = build_error(|x| x.collective_permute(&[(0, 1), (2, 1)]));
    assert!(e.contains("target 1"), "{e}");
    let e = build_error(|x| x.all_reduce(BinaryOp::Subtract, &[]));
    assert!(e.contains("all-reduce"), "{e}");
}

/// The compile error of `m` for `n` replicas.
fn compile_error(c: &Client, m: &Computation, n: i64) -> String {
    match c.compile_with(m, &CompileOptions::new().num_replicas(n)) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn ids_beyond_the_replicas_are_compile_errors_not_aborts() {
    in_child(
        "ids_beyond_the_replicas_are_compile_errors_not_aborts",
        || {
            let c = client(4);
            let m = module(&[4], |x| x.psum(&[vec![0, 5]]));
            let e = compile_error(&c, &m, 4);
            assert!(e.contains("all-reduce") && e.contains("replica 5"), "{e}");
            let m = module(&[4], |x| x.collective_permute(&[(0, 4)]));
            let e = compile_error(&c, &m, 4);
            assert!(
                e.contains("collective-permute") && e.contains("replica 4"),
                "{e}"
            );
            let m = module(&[4], |x| x.all_gather(0, &[vec![0, 1]]));
            let e = compile_error(&c, &m, 4);
            assert!(e.contains("cover"), "{e}");
            let m = module(&[4], |x| x.all_to_all(0, &[vec![3, 4]]));
            assert!(compile_error(&c, &m, 4).contains("replica 4"));
            // Global device ids count replicas times partitions.
            let attrs = xlaclient::ops::collective::CollectiveAttrs::groups(&[vec![0, 1, 2, 3, 4]])
                .channel(1)
                .global_device_ids();
            let m = module(&[4], |x| x.all_reduce_with(&attrs, |a, b| a + b));
            let e = compile_error(&c, &m, 4);
            assert!(e.contains("device 4"), "{e}");
            // Ids within range but more replicas than devices: the runtime's check.
            let m = module(&[4], |x| x.psum(&[]));
            assert!(matches!(
                c.compile_with(&m, &CompileOptions::new().num_replicas(5)),
                Err(RuntimeError::InvalidOption { .. })
            ));
        },
    );
}

#[test]
fn groups_that_leave_replicas_out_are_compile_errors() {
    // Both CPU plugins refuse these in XLA's verifier ("replica groups should
    // contain 4 replicas"); the check here names the op and the line first.
    let c = client(4);
    for m in [
        module(&[2], |x| x.psum(&[vec![0, 1]])),
        module(&[2], |x| x.reduce_scatter(BinaryOp::Add, 0, &[vec![2, 3]])),
        module(&[2], |x| x.all_to_all(0, &[vec![0, 3]])),
    ] {
        let e = compile_error(&c, &m, 4);
        assert!(
            e.contains("cover 2 of the 4 replicas") && e.contains(file!()),
            "{e}"
        );
    }
}

#[test]
fn collectives_print_and_read_back() {
    let b = Builder::new("text");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 2]), "x");
    let attrs = xlaclient::ops::collective::CollectiveAttrs::groups(&[vec![0, 1], vec![2, 3]])
        .channel(3)
        .global_device_ids();
    let y = x
        .all_reduce_with(&attrs, |a, b| a + b)
        .all_gather(1, &[vec![0, 1], vec![2, 3]])
        .reduce_scatter(BinaryOp::Add, 1, &[vec![0, 1], vec![2, 3]])
        .collective_permute(&[(0, 1), (1, 0)])
        .all_to_all(0, &[vec![0, 1, 2, 3]]);
    let m = b.build(&y).unwrap();
    let text = m.to_hlo_text();
    for want in [
        "all-reduce(",
        "channel_id=3",
        "replica_groups={{0,1},{2,3}}",
        "use_global_device_ids=true",
        "all-gather(",
        "reduce-scatter(",
        "source_target_pairs={{0,1},{1,0}}",
        "all-to-all(",
        "dimensions={1}",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    // Read back from the proto: the same structure (names aside) and attributes.
    let raised = Computation::from_hlo_bytes(&m.to_bytes()).unwrap();
    assert_eq!(raised.fingerprint(), m.fingerprint());
    let again = raised.to_hlo_text();
    for want in [
        "channel_id=3",
        "use_global_device_ids=true",
        "source_target_pairs={{0,1},{1,0}}",
    ] {
        assert!(again.contains(want), "{want} not in\n{again}");
    }
}
