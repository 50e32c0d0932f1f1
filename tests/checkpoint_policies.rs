//! Checkpoint policies of loop gradients (`CheckpointPolicy`, JAX's
//! `jax.checkpoint_policies`): every policy gives the same gradient (against each
//! other, tightly, and against central finite differences), and each stores what
//! it says: the stacked residual arrays of the forward loop, read from the emitted
//! module, are pinned per policy, with one forward loop and one backward loop.
//! Also the memory of grad of grad through a loop: its stored rows grow linearly
//! with the steps, not with their square; and `Builder::checkpoint` (`jax.checkpoint`
//! of a function outside loops): the same gradient, recomputed, with less memory.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use xlaclient::{
    Builder, CheckpointPolicy, Comparison, Computation, DotDims, Op, ScanOptions, Shape,
};

/// Steps of the scans below.
const T: i64 = 6;

/// Every policy, named.
fn policies() -> Vec<(&'static str, CheckpointPolicy)> {
    vec![
        ("everything", CheckpointPolicy::Everything),
        ("nothing", CheckpointPolicy::Nothing),
        ("dots", CheckpointPolicy::Dots),
        ("dots_no_batch", CheckpointPolicy::DotsWithNoBatchDims),
        ("names", CheckpointPolicy::names(&["pre"])),
    ]
}

/// Parameters of [`rnn`]: `h0`, `xs`, `w`, `u`.
const RNN: &[&[i64]] = &[&[3], &[T, 2], &[3, 3], &[3, 2]];

/// An RNN: `h' = tanh(w·h + u·x_t)` (the sum tagged "pre"), `y_t = h'²`; the final
/// state and the ys, flattened.
fn rnn(p: &[Op], policy: &CheckpointPolicy) -> Op {
    let (h0, xs, w, u) = (&p[0], &p[1], &p[2], &p[3]);
    let b = h0.builder();
    let opts = ScanOptions::new().policy(policy.clone());
    let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
        let pre = (&w.matmul(&h) + &u.matmul(&x)).checkpoint_name("pre");
        let h2 = pre.tanh();
        (h2.clone(), &h2 * &h2)
    });
    b.concatenate(&[&h, &ys.reshape(&[T * 3])], 0)
}

/// Parameters of [`mixed`]: `h0` (2 rows of 3), `xs`, `a` (a weight shared by the
/// rows), `wb` (one matrix per row).
const MIXED: &[&[i64]] = &[&[2, 3], &[T, 2, 3], &[3, 3], &[2, 3, 3]];

/// A dot without batch dimensions (`h·a`), one batched over the rows (`x_t` by the
/// row's own matrix) and element-wise work around them:
/// `h' = sin(h·a) ⊙ cos(pre) + 0.1·h` with `pre = batched(x_t, wb) ⊙ h` (tagged
/// "pre"); `y_t = Σ h'²` per row.
fn mixed(p: &[Op], policy: &CheckpointPolicy) -> Op {
    let (h0, xs, a, wb) = (&p[0], &p[1], &p[2], &p[3]);
    let b = h0.builder();
    let per_row = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
    };
    let opts = ScanOptions::new().policy(policy.clone());
    let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
        let pre = (&x.dot_general(wb, &per_row) * &h).checkpoint_name("pre");
        let h2 = &(&h.matmul(a).sin() * &pre.cos()) + &(&h * 0.1);
        (h2.clone(), (&h2 * &h2).reduce_sum(&[1]))
    });
    b.concatenate(&[&h.reshape(&[6]), &ys.reshape(&[T * 2])], 0)
}

/// A module's `loss = Σ out ⊙ c` (fixed weights) and its gradients with respect to
/// every parameter.
fn grad_module(
    shapes: &[&[i64]],
    f: &dyn Fn(&[Op], &CheckpointPolicy) -> Op,
    policy: &CheckpointPolicy,
    with_grad: bool,
) -> Computation {
    let b = Builder::new("policy");
    let p: Vec<Op> = shapes
        .iter()
        .enumerate()
        .map(|(i, d)| b.parameter(i, Shape::of::<f64>(d), &format!("p{i}")))
        .collect();
    let out = f(&p, policy);
    let n = out.dims().unwrap()[0] as usize;
    let c: Vec<f64> = (0..n).map(|i| ((i * 7 % 11) as f64 - 5.0) / 5.0).collect();
    let loss = (&out * &b.constant_vec(&c)).reduce_sum(&[0]);
    if with_grad {
        let g = b.grad(&loss, &p);
        let outs: Vec<&Op> = std::iter::once(&loss).chain(&g).collect();
        b.build_tuple(&outs).unwrap()
    } else {
        b.build(&loss).unwrap()
    }
}

#[test]
fn every_policy_gives_the_same_gradient_as_finite_differences() {
    for (model, shapes, f) in [
        ("rnn", RNN, &rnn as &dyn Fn(&[Op], &CheckpointPolicy) -> Op),
        ("mixed", MIXED, &mixed),
    ] {
        let mut rng = Rng(17);
        let inputs: Vec<Vec<f64>> = shapes
            .iter()
            .map(|d| fd::rand_vec(&mut rng, count(d), -1.0, 1.0))
            .collect();
        let bufs: Vec<_> = inputs
            .iter()
            .zip(shapes)
            .map(|(v, d)| upload(v, d))
            .collect();
        let refs: Vec<_> = bufs.iter().collect();
        let mut first: Option<Vec<Vec<f64>>> = None;
        for (name, policy) in policies() {
            // Against central differences of the loss alone.
            fd::check_at(&format!("{model}_{name}"), shapes, &inputs, |p| {
                f(p, &policy)
            });
            // Against each other: the same values up to rounding.
            let outs = run(&grad_module(shapes, f, &policy, true), &refs);
            let got: Vec<Vec<f64>> = outs.iter().map(|o| o.to_vec().unwrap()).collect();
            match &first {
                None => first = Some(got),
                Some(want) => {
                    for (k, (g, w)) in got.iter().zip(want).enumerate() {
                        for (x, y) in g.iter().zip(w) {
                            assert!(
                                (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                                "{model}, {name}: output {k}: {g:?} vs everything's {w:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The arrays of a tuple shape's text (`(s32[], f64[6,3]{1,0})`), as element type
/// and dimensions.
fn arrays(shape: &str) -> Vec<(String, Vec<i64>)> {
    let mut out = Vec::new();
    let mut rest = shape;
    while let Some(open) = rest.find('[') {
        let ty = rest[..open]
            .rsplit(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap()
            .to_string();
        let close = open + rest[open..].find(']').unwrap();
        let dims = rest[open + 1..close]
            .split(',')
            .filter(|d| !d.trim().is_empty())
            .map(|d| d.trim().parse::<i64>().unwrap())
            .collect();
        out.push((ty, dims));
        rest = &rest[close + 1..];
        // Skip the layout.
        if rest.starts_with('{') {
            rest = &rest[rest.find('}').unwrap() + 1..];
        }
    }
    out
}

/// Bytes of an array.
fn bytes((ty, dims): &(String, Vec<i64>)) -> i64 {
    let size = match ty.as_str() {
        "f64" | "s64" | "u64" => 8,
        "f32" | "s32" | "u32" => 4,
        "pred" | "s8" | "u8" => 1,
        _ => 2,
    };
    dims.iter().product::<i64>() * size
}

/// The carry of each while loop of the module's entry computation, in order.
fn entry_loops(m: &Computation) -> Vec<Vec<(String, Vec<i64>)>> {
    let text = m.to_hlo_text();
    let entry = &text[text.find("ENTRY").expect("an entry")..];
    let entry = &entry[..entry.find("\n}").unwrap_or(entry.len())];
    entry
        .lines()
        .filter(|l| l.contains(" while("))
        .map(|l| {
            let shape = &l[l.find("= ").unwrap() + 2..l.find(" while(").unwrap()];
            arrays(shape)
        })
        .collect()
}

/// The number of while instructions anywhere in the module.
fn whiles(m: &Computation) -> usize {
    m.to_hlo_text().matches(" while(").count()
}

/// The residual stacks of a gradient module: the arrays of `steps` rows in its
/// forward (first) loop's carry that the plain forward loop does not have (its xs
/// and ys), sorted.
fn residuals(grad: &Computation, forward: &Computation, steps: i64) -> Vec<(String, Vec<i64>)> {
    let stacks = |m: &Computation| -> Vec<(String, Vec<i64>)> {
        entry_loops(m)[0]
            .iter()
            .filter(|(_, d)| d.first() == Some(&steps))
            .cloned()
            .collect()
    };
    let mut out = stacks(grad);
    for a in stacks(forward) {
        let at = out
            .iter()
            .position(|x| *x == a)
            .expect("the forward loop's stacks stay");
        out.remove(at);
    }
    out.sort();
    out
}

#[test]
fn each_policy_stores_what_it_says_and_the_forward_loop_runs_once() {
    let f64s = |d: &[i64]| ("f64".to_string(), d.to_vec());
    for (model, shapes, f, state, dots, no_batch) in [
        (
            "rnn",
            RNN,
            &rnn as &dyn Fn(&[Op], &CheckpointPolicy) -> Op,
            vec![T, 3],
            // w·h and u·x_t, neither batched.
            vec![vec![T, 3], vec![T, 3]],
            vec![vec![T, 3], vec![T, 3]],
        ),
        (
            "mixed",
            MIXED,
            &mixed,
            vec![T, 2, 3],
            // h·a, and x_t by each row's matrix (batched).
            vec![vec![T, 2, 3], vec![T, 2, 3]],
            vec![vec![T, 2, 3]],
        ),
    ] {
        let forward = grad_module(shapes, f, &CheckpointPolicy::Everything, false);
        assert_eq!(whiles(&forward), 1, "{model}");
        let mut sizes = Vec::new();
        for (name, policy) in policies() {
            let m = grad_module(shapes, f, &policy, true);
            // One forward loop (serving the loss too), one backward loop.
            assert_eq!(whiles(&m), 2, "{model}, {name}:\n{}", m.to_hlo_text());
            let got = residuals(&m, &forward, T);
            // The carry entering each step: the state (the scan's counter is
            // computed again from the step, not stacked).
            let mut want = vec![f64s(&state)];
            match &policy {
                CheckpointPolicy::Everything => {}
                CheckpointPolicy::Nothing => {}
                CheckpointPolicy::Dots => want.extend(dots.iter().map(|d| f64s(d))),
                CheckpointPolicy::DotsWithNoBatchDims => {
                    want.extend(no_batch.iter().map(|d| f64s(d)))
                }
                CheckpointPolicy::Names(_) => want.push(f64s(&state)),
            }
            want.sort();
            let total: i64 = got.iter().map(bytes).sum();
            if policy == CheckpointPolicy::Everything {
                // Everything: the carry and every value the body computes, more
                // than any other policy (checked below).
                for w in &want {
                    assert!(got.contains(w), "{model}, {name}: {got:?} lacks {w:?}");
                }
                assert!(got.len() > 5, "{model}, {name}: {got:?}");
            } else {
                assert_eq!(got, want, "{model}, {name}:\n{}", m.to_hlo_text());
            }
            sizes.push((name, total));
        }
        eprintln!("{model}: residual bytes per policy {sizes:?}");
        let of = |n: &str| sizes.iter().find(|(m, _)| *m == n).unwrap().1;
        assert!(of("everything") > of("dots"), "{model}: {sizes:?}");
        assert!(of("dots") >= of("dots_no_batch"), "{model}: {sizes:?}");
        assert!(of("dots") > of("names"), "{model}: {sizes:?}");
        assert!(of("names") > of("nothing"), "{model}: {sizes:?}");
    }
}

#[test]
fn fori_loop_and_bounded_loops_take_policies_too() {
    // The same machinery: a fori_loop and a while_loop_bounded (which stops early)
    // under every policy, against finite differences; storing only the dots keeps
    // one stack of dot results beside the carry's.
    for (name, policy) in policies() {
        fd::check(&format!("fori_{name}"), &[&[3], &[3, 3]], -1.0, 1.0, |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            b.fori_loop_with(0, 5, x.clone(), &policy, |_, h| {
                (w.matmul(&h).checkpoint_name("pre") + &h).sin()
            })
        });
        fd::check_at(
            &format!("bounded_{name}"),
            &[&[2], &[2, 2]],
            &[vec![0.3, 0.2], vec![1.2, 0.1, -0.2, 1.1]],
            |p| {
                let (x, w) = (&p[0], &p[1]);
                let b = x.builder();
                b.while_loop_bounded_with(
                    x.clone(),
                    50,
                    &policy,
                    |v| {
                        (v * v)
                            .reduce_sum(&[0])
                            .compare(&v.builder().constant(4f64), xlaclient::Comparison::Lt)
                    },
                    |v| &w.matmul(&v).checkpoint_name("pre") + &(&v.tanh() * 0.1),
                )
            },
        );
    }
    let b = Builder::new("fori_counts");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let w = b.parameter(1, Shape::of::<f64>(&[3, 3]), "w");
    let stacks = |policy: &CheckpointPolicy| {
        let y = b.fori_loop_with(0, 5, x.clone(), policy, |_, h| (w.matmul(&h) + &h).sin());
        let g = b.grad(&y.reduce_sum(&[0]), &w);
        let m = b.build(&g).unwrap();
        assert_eq!(whiles(&m), 2, "{}", m.to_hlo_text());
        let mut s: Vec<_> = entry_loops(&m)[0]
            .iter()
            .filter(|(_, d)| d.first() == Some(&5))
            .cloned()
            .collect();
        s.sort();
        s
    };
    // The state entering each step; the loop's counter is computed again from
    // the step (`init + t`), not stacked.
    let carry = vec![("f64".to_string(), vec![5, 3])];
    assert_eq!(stacks(&CheckpointPolicy::Nothing), carry);
    let mut dots = carry.clone();
    dots.push(("f64".to_string(), vec![5, 3]));
    dots.sort();
    assert_eq!(stacks(&CheckpointPolicy::Dots), dots);
    assert!(stacks(&CheckpointPolicy::Everything).len() > dots.len());
}

#[test]
fn policies_with_unrolling_reversal_and_weights_summed_after_the_loop() {
    // Unrolled and reversed scans under the partial policies, and a scan where no
    // float cotangent chains the steps (each step starts from h0), so a dot with
    // the loop-invariant weight gets its weight's cotangent as one product after
    // the loop: against finite differences, and the same under every policy.
    for (name, policy) in policies() {
        fd::check(&format!("unrolled_{name}"), RNN, -1.0, 1.0, |p| {
            let (h0, xs, w, u) = (&p[0], &p[1], &p[2], &p[3]);
            let b = h0.builder();
            let opts = ScanOptions::new()
                .reverse(true)
                .unroll(4)
                .policy(policy.clone());
            let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
                let pre = (&w.matmul(&h) + &u.matmul(&x)).checkpoint_name("pre");
                let h2 = pre.tanh();
                (h2.clone(), &h2 * &h2)
            });
            b.concatenate(&[&h, &ys.reshape(&[T * 3])], 0)
        });
        fd::check(
            &format!("summed_after_{name}"),
            &[&[3], &[T, 2], &[2, 3], &[3, 3]],
            -1.0,
            1.0,
            |p| {
                let (h0, xs, w, v) = (&p[0], &p[1], &p[2], &p[3]);
                let b = h0.builder();
                let opts = ScanOptions::new().policy(policy.clone());
                let (_, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
                    let pre = (&x.matmul(w) + &h).checkpoint_name("pre");
                    let y = v.matmul(&pre.tanh());
                    (h, y)
                });
                ys.reshape(&[T * 3])
            },
        );
    }
}

/// `grad(grad(f))` of a scalar scan of `steps` steps, `f(w) = Σ_t h_t` with
/// `h_{t+1} = sin(w·h_t + x_t)`: the module and the bytes of every while loop's
/// carry in its entry computation (the stacked rows are most of it).
fn second_order(steps: i64) -> (Computation, i64) {
    let b = Builder::new("hessian");
    let w = b.parameter(0, Shape::of::<f64>(&[]), "w");
    let xs: Vec<f64> = (0..steps).map(|t| (t as f64 * 0.37).sin()).collect();
    let xs = b.constant_vec(&xs);
    let h0 = b.constant(0.5f64);
    let (_, hs) = b.scan(h0, xs, |h, x| {
        let h2 = (&(&w * &h) + &x).sin();
        (h2.clone(), h2)
    });
    let f = hs.reduce_sum(&[0]);
    let g = b.grad(&f, &w);
    let gg = b.grad(&g, &w);
    let m = b.build_tuple(&[&f, &g, &gg]).unwrap();
    let total = entry_loops(&m)
        .iter()
        .map(|l| l.iter().map(bytes).sum::<i64>())
        .sum();
    (m, total)
}

/// The plain-Rust loss of [`second_order`].
fn scalar_scan_loss(w: f64, steps: i64) -> f64 {
    let mut h = 0.5f64;
    let mut sum = 0.0;
    for t in 0..steps {
        h = (w * h + (t as f64 * 0.37).sin()).sin();
        sum += h;
    }
    sum
}

#[test]
fn grad_of_grad_through_a_loop_stores_rows_linear_in_the_steps() {
    let w = 0.8f64;
    let mut bytes_at = Vec::new();
    for steps in [10i64, 20, 40] {
        let (m, total) = second_order(steps);
        bytes_at.push((steps, total));
        // Values: the loss, its first and second derivatives against central
        // differences of the plain-Rust loss.
        let out = run(&m, &[&upload(&[w], &[])]);
        let got: Vec<f64> = out.iter().map(|o| o.to_vec::<f64>().unwrap()[0]).collect();
        let l = |v: f64| scalar_scan_loss(v, steps);
        let (h1, h2) = (1e-6, 1e-4);
        let d1 = (l(w + h1) - l(w - h1)) / (2.0 * h1);
        let d2 = (l(w + h2) - 2.0 * l(w) + l(w - h2)) / (h2 * h2);
        assert!(
            (got[0] - l(w)).abs() <= 1e-12 * (1.0 + l(w).abs()),
            "{got:?}"
        );
        assert!(
            (got[1] - d1).abs() <= 1e-6 * (1.0 + d1.abs()),
            "{got:?} vs {d1}"
        );
        assert!(
            (got[2] - d2).abs() <= 1e-4 * (1.0 + d2.abs()),
            "{got:?} vs {d2}"
        );
    }
    eprintln!("grad of grad, loop carry bytes by steps: {bytes_at:?}");
    let (b10, b40) = (bytes_at[0].1, bytes_at[2].1);
    assert!(
        b40 as f64 <= 4.5 * b10 as f64,
        "memory grows faster than the steps: {bytes_at:?}"
    );
}

/// [`second_order`] with the xs differentiated too: `g = ∇_(w, xs) f`, then the
/// gradient with respect to `w` of `g_w + Σ_t c_t·g_xs[t]` (a Hessian-vector
/// product's row). Returns the module and the loops' carry bytes.
fn second_order_xs(steps: i64) -> (Computation, i64) {
    let b = Builder::new("hessian_xs");
    let w = b.parameter(0, Shape::of::<f64>(&[]), "w");
    let xs = b.parameter(1, Shape::of::<f64>(&[steps]), "xs");
    let h0 = b.constant(0.5f64);
    let (_, hs) = b.scan(h0, xs.clone(), |h, x| {
        let h2 = (&(&w * &h) + &x).sin();
        (h2.clone(), h2)
    });
    let f = hs.reduce_sum(&[0]);
    let (gw, gxs) = b.grad(&f, &(w.clone(), xs.clone()));
    let c: Vec<f64> = (0..steps).map(|t| 1.0 / (1.0 + t as f64)).collect();
    let mixed = &gw + &(&gxs * &b.constant_vec(&c)).reduce_sum(&[0]);
    let gg = b.grad(&mixed, &w);
    let m = b.build_tuple(&[&f, &gw, &gxs, &gg]).unwrap();
    let total = entry_loops(&m)
        .iter()
        .map(|l| l.iter().map(bytes).sum::<i64>())
        .sum();
    (m, total)
}

#[test]
fn grad_of_grad_with_the_xs_differentiated_stores_rows_linear_in_the_steps() {
    // The xs' cotangent is written row by row (a stack the backward loop only
    // writes), not added into a whole array every step: so the second-order pass
    // stores no whole array per step either.
    let w = 0.8f64;
    let loss = |w: f64, xs: &[f64]| {
        let mut h = 0.5f64;
        let mut sum = 0.0;
        for x in xs {
            h = (w * h + x).sin();
            sum += h;
        }
        sum
    };
    let mut bytes_at = Vec::new();
    for steps in [10i64, 20, 40] {
        let (m, total) = second_order_xs(steps);
        bytes_at.push((steps, total));
        let xs: Vec<f64> = (0..steps).map(|t| (t as f64 * 0.37).sin()).collect();
        let c: Vec<f64> = (0..steps).map(|t| 1.0 / (1.0 + t as f64)).collect();
        let out = run(&m, &[&upload(&[w], &[]), &upload(&xs, &[steps])]);
        let got = |k: usize| -> Vec<f64> { out[k].to_vec::<f64>().unwrap() };
        // First derivatives by central differences of the plain-Rust loss.
        let h1 = 1e-6;
        let d_w = |w: f64, xs: &[f64]| (loss(w + h1, xs) - loss(w - h1, xs)) / (2.0 * h1);
        let d_x = |w: f64, xs: &[f64], t: usize| {
            let (mut up, mut down) = (xs.to_vec(), xs.to_vec());
            up[t] += h1;
            down[t] -= h1;
            (loss(w, &up) - loss(w, &down)) / (2.0 * h1)
        };
        assert!((got(1)[0] - d_w(w, &xs)).abs() <= 1e-6 * (1.0 + d_w(w, &xs).abs()));
        for t in 0..steps as usize {
            let want = d_x(w, &xs, t);
            assert!((got(2)[t] - want).abs() <= 1e-6 * (1.0 + want.abs()), "{t}");
        }
        // The second derivative: central differences (in w) of the exact first
        // derivatives' combination, computed by differences of differences.
        let mixed = |w: f64| {
            let h = 1e-4;
            let dw = (loss(w + h, &xs) - loss(w - h, &xs)) / (2.0 * h);
            let dx: f64 = (0..steps as usize)
                .map(|t| {
                    let (mut up, mut down) = (xs.clone(), xs.clone());
                    up[t] += h;
                    down[t] -= h;
                    c[t] * (loss(w, &up) - loss(w, &down)) / (2.0 * h)
                })
                .sum();
            dw + dx
        };
        let h2 = 1e-4;
        let want = (mixed(w + h2) - mixed(w - h2)) / (2.0 * h2);
        assert!(
            (got(3)[0] - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "{steps}: {} vs {want}",
            got(3)[0]
        );
    }
    eprintln!("grad of grad with xs, loop carry bytes by steps: {bytes_at:?}");
    let (b10, b40) = (bytes_at[0].1, bytes_at[2].1);
    assert!(
        b40 as f64 <= 4.5 * b10 as f64,
        "memory grows faster than the steps: {bytes_at:?}"
    );
}

/// Blocks of [`chain`].
const BLOCKS: usize = 12;

/// A block with an inner value the backward pass needs: `tanh(tanh(x·w1)·w2)`.
fn block(x: &Op, w1: &Op, w2: &Op) -> Op {
    x.matmul(w1).tanh().matmul(w2).tanh()
}

/// `BLOCKS` blocks, each checkpointed (`jax.checkpoint`) or not.
fn chain(p: &[Op], remat: bool) -> Op {
    let b = p[0].builder();
    let (w1, w2) = (&p[1], &p[2]);
    let mut x = p[0].clone();
    for k in 0..BLOCKS {
        x = if remat {
            b.checkpoint(&format!("block{k}"), &[&x], |_, a| {
                vec![block(&a[0], w1, w2)]
            })
            .remove(0)
        } else {
            block(&x, w1, w2)
        };
    }
    x
}

#[test]
fn a_checkpointed_function_gives_the_same_gradient_and_recomputes() {
    // Against central differences (f64), both forms.
    let shapes: &[&[i64]] = &[&[2, 3], &[3, 3], &[3, 3]];
    fd::check("remat_chain", shapes, -1.0, 1.0, |p| chain(p, true));
    fd::check("plain_chain", shapes, -1.0, 1.0, |p| chain(p, false));
    // The recomputation sits behind a barrier, so XLA cannot merge it back: the
    // optimized module runs each block's matmuls again in the backward pass. (The
    // 0.81 plugin's XLA expands opt-barriers away before CSE, merging the
    // recomputation back into the forward pass: same values, no memory saved;
    // checked below as such.)
    let n = 128;
    let dots = |remat: bool| {
        let b = Builder::new("chain");
        let p: Vec<Op> = [[n, n], [n, n], [n, n]]
            .iter()
            .enumerate()
            .map(|(i, d)| b.parameter(i, Shape::of::<f32>(d), "p"))
            .collect();
        let loss = chain(&p, remat).reduce_sum(&[0, 1]);
        let g = b.grad(&loss, &p[1]);
        let m = b.build(&g).unwrap();
        // The checkpoints' barriers (the weights' products over the rows have
        // their own, `linalg::rows_layout`, in both forms).
        let barriers = m.to_hlo_text().matches("opt-barrier(").count();
        let exe = client().compile(&m).unwrap();
        let optimized = exe.optimized_module().unwrap();
        let count = optimized
            .computations
            .iter()
            .flat_map(|c| &c.instructions)
            .filter(|i| i.opcode == "dot")
            .count();
        let temp = exe.memory_stats().unwrap().temp_bytes;
        (count, temp, barriers)
    };
    let ((plain_dots, plain_temp, plain_barriers), (remat_dots, remat_temp, remat_barriers)) =
        (dots(false), dots(true));
    assert!(
        remat_barriers >= plain_barriers + BLOCKS,
        "barriers: checkpointed {remat_barriers}, plain {plain_barriers}"
    );
    eprintln!("dots: checkpointed {remat_dots}, plain {plain_dots}");
    if remat_dots == plain_dots {
        // This XLA (0.81) merged the recomputation back: no memory is saved (the
        // barrier's copies even cost some: 2.2 vs 1.5 MiB), only the values and
        // gradients above hold.
        return;
    }
    assert!(remat_dots > plain_dots);
    // Only each block's input is kept for the backward pass, not its inner value:
    // 12 blocks of 64 KiB fewer (2.25 MiB plain, 0.88 MiB checkpointed on 0.115,
    // the weights' transposed rows included).
    eprintln!("temp bytes: plain {plain_temp}, checkpointed {remat_temp}");
    assert!(
        remat_temp < plain_temp,
        "temp bytes: checkpointed {remat_temp}, plain {plain_temp}"
    );
}

/// Parameters of [`independent`]: `h` (a float carry the steps pass through),
/// `xs`, `w`, `v`.
const INDEPENDENT: &[&[i64]] = &[&[3], &[T, 2], &[2, 3], &[3, 3]];

/// A scan whose steps no float cotangent chains, as an RL rollout's: the float
/// part of the carry passes through unchanged, the state that changes is an
/// integer (`k' = (3k + 1) mod 5`, as a discrete environment's); each step reads
/// its row of `xs` and writes a row of ys: `y_t = v·tanh(x_t·w + k_t·h)` (the sum
/// tagged "pre").
fn independent(p: &[Op], policy: &CheckpointPolicy) -> Op {
    let (h0, xs, w, v) = (&p[0], &p[1], &p[2], &p[3]);
    let b = h0.builder();
    let opts = ScanOptions::new().policy(policy.clone());
    let init = (h0.clone(), b.constant(2i32));
    let (_, ys) = b.scan_with(init, xs.clone(), &opts, |(h, k), x| {
        let kf = k.convert(xlaclient::ElementType::F64);
        let pre = (&x.matmul(w) + &(&h * &kf)).checkpoint_name("pre");
        let y = v.matmul(&pre.tanh());
        let k3 = &(&k * 3) + 1;
        let k2 = &k3 - &(&(&k3 / 5) * 5);
        ((h, k2), y)
    });
    ys.reshape(&[T * 3])
}

/// Where no float cotangent chains the steps, the backward steps run batched over
/// the steps instead of in a loop: under `Everything` (the default) the gradient
/// module holds the forward loop only (the one that stores); the other policies
/// keep their backward loop, which recomputes one step at a time (their point is
/// memory). Every policy gives the same gradient, and it agrees with central
/// differences.
#[test]
fn independent_steps_are_reversed_in_one_batched_pass_without_a_backward_loop() {
    let mut rng = Rng(29);
    let inputs: Vec<Vec<f64>> = INDEPENDENT
        .iter()
        .map(|d| fd::rand_vec(&mut rng, count(d), -1.0, 1.0))
        .collect();
    let bufs: Vec<_> = inputs
        .iter()
        .zip(INDEPENDENT)
        .map(|(v, d)| upload(v, d))
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let forward = grad_module(
        INDEPENDENT,
        &independent,
        &CheckpointPolicy::Everything,
        false,
    );
    assert_eq!(whiles(&forward), 1);
    let mut first: Option<Vec<Vec<f64>>> = None;
    for (name, policy) in policies() {
        fd::check_at(&format!("independent_{name}"), INDEPENDENT, &inputs, |p| {
            independent(p, &policy)
        });
        let m = grad_module(INDEPENDENT, &independent, &policy, true);
        let loops = if policy == CheckpointPolicy::Everything {
            1
        } else {
            2
        };
        assert_eq!(whiles(&m), loops, "{name}:\n{}", m.to_hlo_text());
        let outs = run(&m, &refs);
        let got: Vec<Vec<f64>> = outs.iter().map(|o| o.to_vec().unwrap()).collect();
        match &first {
            None => first = Some(got),
            Some(want) => {
                for (k, (g, w)) in got.iter().zip(want).enumerate() {
                    for (x, y) in g.iter().zip(w) {
                        assert!(
                            (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                            "{name}: output {k}: {g:?} vs everything's {w:?}"
                        );
                    }
                }
            }
        }
    }
}

/// The gradient of the batched backward steps (no backward loop) differentiated
/// again: `w ↦ ∂L/∂w` of [`independent`]'s loss, against central differences of
/// that gradient.
#[test]
fn grad_of_grad_through_independent_steps() {
    fd::check("independent_second_order", INDEPENDENT, -1.0, 1.0, |p| {
        let b = p[0].builder();
        let out = independent(p, &CheckpointPolicy::Everything);
        let n = out.dims().unwrap()[0] as usize;
        let c: Vec<f64> = (0..n).map(|i| ((i * 5 % 7) as f64 - 3.0) / 3.0).collect();
        let loss = (&out * &b.constant_vec(&c)).reduce_sum(&[0]);
        let (gw, gv) = b.grad(&loss, &(p[2].clone(), p[3].clone()));
        b.concatenate(&[&gw.reshape(&[6]), &gv.reshape(&[9])], 0)
    });
}

/// A rollout-like scan with a batch of rows per step: `y_t = Σ tanh(x_t · w + h)`,
/// `x_t: [B, k]`, the float carry `h` passing through unchanged (no float
/// cotangent chains the steps); the loss is `Σ_t y_t`.
fn rows_scan(h: &Op, xs: &Op, w: &Op) -> Op {
    let b = h.builder();
    let (_, ys) = b.scan(h.clone(), xs.clone(), |h, x| {
        let y = (&x.matmul(w) + &h).tanh().reduce_sum(&[0, 1]);
        (h, y)
    });
    ys.reduce_sum(&[0])
}

/// The weight's cotangent of [`rows_scan`] sums over every step's rows after the
/// loop, one product over all `T · B` rows. XLA's CPU backend runs a product that
/// contracts both operands' leading axis outside its fast matrix kernels (up to 5
/// times slower at Anakin's sizes) and on one core, so the engine writes it
/// (`linalg::rows_layout`) with the narrow side of a head transposed, the left
/// operand's last axis contracted with the right one's first (`k < n` and
/// `k > n`, 4 steps of 64 rows), and over many rows (64 steps of 64) as one
/// batched product over chunks of the rows, summed. Checked: the gradient against
/// plain Rust, no product in the optimized module contracts the left operand's
/// axis 0, and the chunked one is a batched product.
#[test]
fn weight_products_over_the_rows_take_the_fast_layout() {
    for (t, rows, k, n, chunked) in [
        (4i64, 64i64, 20i64, 3i64, false),
        (4, 64, 3, 20, false),
        (64, 64, 8, 8, true),
    ] {
        let b = Builder::new("rows");
        let h = b.parameter(0, Shape::of::<f32>(&[]), "h");
        let xs = b.parameter(1, Shape::of::<f32>(&[t, rows, k]), "xs");
        let w = b.parameter(2, Shape::of::<f32>(&[k, n]), "w");
        let gw = b.grad(&rows_scan(&h, &xs, &w), &w);
        let m = b.build(&gw).unwrap();

        let mut rng = Rng(31 + k as u64);
        let hv = 0.1f32;
        let xv: Vec<f32> = fd::rand_vec(&mut rng, (t * rows * k) as usize, -1.0, 1.0)
            .into_iter()
            .map(|v| v as f32)
            .collect();
        let wv: Vec<f32> = fd::rand_vec(&mut rng, (k * n) as usize, -1.0, 1.0)
            .into_iter()
            .map(|v| v as f32)
            .collect();
        let got: Vec<f32> = run1(
            &m,
            &[
                &upload(&[hv], &[]),
                &upload(&xv, &[t, rows, k]),
                &upload(&wv, &[k, n]),
            ],
        );
        // ∂L/∂w[i, j] = Σ_t Σ_r x[t, r, i] · (1 − tanh²(pre[t, r, j])).
        let (k, n) = (k as usize, n as usize);
        let mut want = vec![0f64; k * n];
        for tr in 0..(t * rows) as usize {
            let x = &xv[tr * k..(tr + 1) * k];
            for j in 0..n {
                let pre: f64 = (0..k)
                    .map(|i| x[i] as f64 * wv[i * n + j] as f64)
                    .sum::<f64>()
                    + hv as f64;
                let d = 1.0 - pre.tanh().powi(2);
                for i in 0..k {
                    want[i * n + j] += x[i] as f64 * d;
                }
            }
        }
        let want: Vec<f32> = want.into_iter().map(|v| v as f32).collect();
        assert_close(&got, &want, 1e-5);

        let leading = leading_axis_products(&m);
        assert!(leading.is_empty(), "k={k} n={n}: {leading:?}");
        assert_eq!(
            batched_products(&m) > 0,
            chunked,
            "t={t} rows={rows} k={k} n={n}"
        );
    }
}

/// The backward step of a loop whose body multiplies by a matrix the loop does not
/// change (`h · W`) computes `ct · Wᵀ` every step. The engine transposes `W` once
/// before the backward loop, behind an optimization barrier, and the step's
/// product contracts the transpose's first axis, a layout XLA's CPU backend runs
/// faster than contracting `W`'s second axis (`benches/scan_grad.rs`: the backward
/// chain 2.23× → 2.03× the forward pass). Pinned: no product of the optimized
/// gradient module contracts its right operand's axis 1 (the old form had one per
/// backward step); the gradient through that path, and the gradient of that
/// gradient, against central differences.
#[test]
fn a_loop_weight_is_transposed_once_for_the_backward_steps() {
    let (steps, batch, width) = (20i64, 3i64, 4i64);
    let b = Builder::new("rnn_twin");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let (_, ys) = b.scan(h0.clone(), xs, |h, x| {
        let h2 = (&h.matmul(&w) + &x).tanh();
        (h2.clone(), h2.reduce_sum(&[0, 1]))
    });
    let (gw, gh) = b.grad(&ys.reduce_sum(&[0]), &(w.clone(), h0.clone()));
    let m = b.build_tuple(&[&gw, &gh]).unwrap();
    let dots = optimized_products(&m);
    assert!(!dots.is_empty(), "the gradient has products");
    assert!(
        dots.iter()
            .all(|(_, d)| d.rhs_contracting_dimensions != [1]),
        "a product contracts its right operand's axis 1: {dots:?}"
    );

    let rnn_twin = |h0: &Op, w: &Op, xs: &Op| -> (Op, Op) {
        let b = h0.builder();
        b.scan(h0.clone(), xs.clone(), |h, x| {
            let h2 = (&h.matmul(w) + &x).tanh();
            (h2.clone(), h2.reduce_sum(&[0, 1]))
        })
    };
    fd::check(
        "twin_first_order",
        &[&[2, 3], &[3, 3], &[5, 2, 3]],
        -1.0,
        1.0,
        |p| {
            let (h, ys) = rnn_twin(&p[0], &p[1], &p[2]);
            let b = h.builder();
            b.concatenate(&[&h.reshape(&[6]), &ys], 0)
        },
    );
    fd::check("twin_second_order", &[&[3, 3]], -1.0, 1.0, |p| {
        let w = &p[0];
        let b = w.builder();
        let h0 = b
            .constant_vec(&[0.3f64, -0.2, 0.1, 0.5, -0.4, 0.2])
            .reshape(&[2, 3]);
        let xs = b
            .constant_vec(&[
                0.1f64, 0.2, -0.3, 0.4, -0.1, 0.0, 0.2, -0.2, 0.3, 0.1, 0.0, -0.4,
            ])
            .reshape(&[2, 2, 3]);
        let (_, ys) = rnn_twin(&h0, w, &xs);
        b.grad(&(&ys * &ys).reduce_sum(&[0]), w)
    });
}

/// A state whose next value is a value the backward step reads anyway (an RNN's
/// `h' = tanh(h·W + x_t)`: tanh's derivative reads its result) is not stacked a
/// second time: the forward loop stores that value once per step, and the backward
/// step reads the state entering step `t` as its row `t - 1` (the initial state at
/// step 0). Pinned by XLA's temporary buffers for the gradient of such a scan
/// (`benches/scan_grad.rs`'s program, smaller): one `[steps, batch, width]` stack
/// (the tanh's), where storing the state too took two; the gradients through that
/// path against central differences in a loop that stops early (rows past the last
/// step stay unread), a reversed, unrolled scan, and a second derivative.
#[test]
fn a_state_whose_next_value_is_stored_is_not_stacked_again() {
    let (steps, batch, width) = (200i64, 8i64, 32i64);
    let b = Builder::new("rnn_f32");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let (_, ys) = b.scan(h0.clone(), xs, |h, x| {
        let h2 = (&h.matmul(&w) + &x).tanh();
        let y = h2.reduce_sum(&[0, 1]);
        (h2, y)
    });
    let loss = ys.reduce_sum(&[0]);
    let (gw, gh) = b.grad(&loss, &(w.clone(), h0.clone()));
    let m = b.build_tuple(&[&loss, &gw, &gh]).unwrap();
    let exe = client().compile(&m).unwrap();
    let temp = exe.memory_stats().unwrap().temp_bytes;
    let stack = steps * batch * width * 4;
    eprintln!("rnn gradient: temp {temp} bytes, one stack {stack}");
    assert!(
        temp >= stack && temp < stack + stack / 2,
        "temp {temp} bytes against one stack of {stack}"
    );
    let optimized = exe.optimized_module().unwrap();
    let whiles = optimized
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| i.opcode == "while")
        .count();
    assert_eq!(whiles, 2, "one forward loop, one backward loop");
    fd::check(
        "shifted_bounded",
        &[&[2, 2], &[2, 2], &[2, 2]],
        -0.5,
        0.5,
        |p| {
            let (x, w, u) = (&p[0], &p[1], &p[2]);
            let b = x.builder();
            let (v, acc) = b.while_loop_bounded(
                (x.clone(), b.constant(0f64)),
                40,
                |(_, acc)| acc.compare(&acc.builder().constant(1.5f64), Comparison::Lt),
                |(v, acc)| {
                    let v2 = (&(&v.matmul(w) + u) * 2.0).tanh();
                    let acc2 = &acc + &(&v2 * &v2).reduce_sum(&[0, 1]);
                    (v2, acc2)
                },
            );
            b.concatenate(&[&v.reshape(&[4]), &acc.reshape(&[1])], 0)
        },
    );
    fd::check("shifted_reversed_unrolled", RNN, -1.0, 1.0, |p| {
        let (h0, xs, w, u) = (&p[0], &p[1], &p[2], &p[3]);
        let b = h0.builder();
        let opts = ScanOptions::new().reverse(true).unroll(2);
        let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
            let h2 = (&w.matmul(&h) + &u.matmul(&x)).tanh();
            (h2.clone(), h2.reduce_sum(&[0]))
        });
        b.concatenate(&[&h, &ys], 0)
    });
    fd::check(
        "shifted_second_order",
        &[&[2, 2], &[4, 2]],
        -1.0,
        1.0,
        |p| {
            let (w, xs) = (&p[0], &p[1]);
            let b = w.builder();
            let h0 = b.constant_vec(&[0.3f64, -0.2]);
            let (h, _) = b.scan(h0, xs.clone(), |h, x| {
                let h2 = (&w.matmul(&h) + &x).tanh();
                (h2, ())
            });
            let g = b.grad(&h.reduce_sum(&[0]), w);
            g.reshape(&[4])
        },
    );
}
