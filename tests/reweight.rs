//! Path-space reweighting (`xlaclient::rl::reweight`): the resampler's distribution
//! against its weights, the divergence estimate against hand-computed values, and the
//! compiled fit step against the same gradient steps computed in plain Rust.

use xlaclient::Client;
use xlaclient::nn::{Activation, Mlp, optim};
use xlaclient::rl::reweight::{self, PolicyFit, Resampling};
use xlaclient::rl::{Error, WeightsError};

const WEIGHTS: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 0.0, 2.5];

fn counts(idx: &[usize], k: usize) -> Vec<usize> {
    let mut c = vec![0; k];
    for &i in idx {
        c[i] += 1;
    }
    c
}

/// Multinomial resampling: Pearson's chi-square statistic of the counts of 100,000
/// draws (seed 1) against `n·w_i/Σw` over the five categories of positive weight
/// (4 degrees of freedom) must be below 18.47, the 0.999 quantile of chi-square(4).
/// The zero-weight index is never drawn.
#[test]
fn multinomial_counts_follow_the_weights() -> xlaclient::rl::Result<()> {
    let n = 100_000;
    let idx = reweight::resample(&WEIGHTS, n, Resampling::Multinomial, 1)?;
    assert_eq!(idx.len(), n);
    let c = counts(&idx, WEIGHTS.len());
    assert_eq!(c[4], 0, "a zero weight was drawn");
    let total: f64 = WEIGHTS.iter().sum();
    let chi2: f64 = WEIGHTS
        .iter()
        .zip(&c)
        .filter(|(w, _)| **w > 0.0)
        .map(|(w, &o)| {
            let e = n as f64 * w / total;
            (o as f64 - e).powi(2) / e
        })
        .sum();
    assert!(chi2 < 18.47, "chi-square {chi2} over counts {c:?}");
    // Another seed gives other indices; the same seed the same ones.
    assert_eq!(
        idx,
        reweight::resample(&WEIGHTS, n, Resampling::Multinomial, 1)?
    );
    assert_ne!(
        idx,
        reweight::resample(&WEIGHTS, n, Resampling::Multinomial, 2)?
    );
    Ok(())
}

/// Systematic resampling: each index's count is `⌊n·p_i⌋` or `⌈n·p_i⌉` (for every
/// seed tried), the counts sum to n and the indices come out sorted.
#[test]
fn systematic_counts_are_floor_or_ceil() -> xlaclient::rl::Result<()> {
    let total: f64 = WEIGHTS.iter().sum();
    for n in [1usize, 7, 10, 1000] {
        for seed in 0..20 {
            let idx = reweight::resample(&WEIGHTS, n, Resampling::Systematic, seed)?;
            assert!(idx.windows(2).all(|w| w[0] <= w[1]));
            let c = counts(&idx, WEIGHTS.len());
            assert_eq!(c.iter().sum::<usize>(), n);
            for (i, w) in WEIGHTS.iter().enumerate() {
                let e = n as f64 * w / total;
                assert!(
                    c[i] as f64 >= e.floor() - 1e-9 && c[i] as f64 <= e.ceil() + 1e-9,
                    "n {n} seed {seed}: index {i} drawn {} times, expected {e}",
                    c[i]
                );
            }
        }
    }
    Ok(())
}

#[test]
fn bad_weights_are_errors() {
    let kind = |r: xlaclient::rl::Result<Vec<usize>>| match r {
        Err(Error::InvalidWeights(k)) => k,
        other => panic!("not a weights error: {other:?}"),
    };
    for (w, want, what) in [
        (vec![], WeightsError::Empty, "no weights"),
        (
            vec![0.0, 0.0, 0.0],
            WeightsError::AllZero { count: 3 },
            "all 3 weights are zero",
        ),
        (
            vec![1.0, -0.5],
            WeightsError::Invalid {
                index: 1,
                value: -0.5,
            },
            "weight 1 is -0.5",
        ),
        (
            vec![1.0, f64::INFINITY, -1.0],
            WeightsError::Invalid {
                index: 1,
                value: f64::INFINITY,
            },
            "weight 1 is inf",
        ),
        (
            vec![f64::MAX, f64::MAX],
            WeightsError::SumOverflows { count: 2 },
            "the sum of the 2 weights overflows",
        ),
    ] {
        for m in [Resampling::Multinomial, Resampling::Systematic] {
            let e = kind(reweight::resample(&w, 4, m, 0));
            assert_eq!(e, want, "{w:?}");
            assert!(e.to_string().contains(what), "{e} lacks {what:?}");
        }
        assert!(matches!(
            reweight::divergence_bits(&w),
            Err(Error::InvalidWeights(k)) if k == want
        ));
    }
    // NaN is not equal to itself: matched by kind and index.
    let e = kind(reweight::resample(
        &[f64::NAN, 1.0],
        4,
        Resampling::Systematic,
        0,
    ));
    assert!(
        matches!(e, WeightsError::Invalid { index: 0, value } if value.is_nan()),
        "{e}"
    );
    assert!(e.to_string().contains("weight 0 is NaN"), "{e}");
}

/// `log2 N − H(p)` against values computed by hand.
#[test]
fn divergence_matches_hand_values() -> xlaclient::rl::Result<()> {
    // Equal weights: no information, 0 bits.
    assert!(reweight::divergence_bits(&[3.0; 16])?.abs() < 1e-12);
    // One nonzero weight among N: log2 N bits.
    for n in [1usize, 2, 5, 64] {
        let mut w = vec![0.0; n];
        w[n / 2] = 0.7;
        let d = reweight::divergence_bits(&w)?;
        assert!((d - (n as f64).log2()).abs() < 1e-12, "N {n}: {d}");
    }
    // p = (1/4, 1/4, 1/2): H = 1.5 bits, D = log2 3 − 1.5 = 0.0849625007211562.
    let d = reweight::divergence_bits(&[1.0, 1.0, 2.0])?;
    assert!((d - 0.084_962_500_721_156_2).abs() < 1e-12, "{d}");
    // p = (1/4, 3/4): H = 2 − (3/4)·log2 3 = 0.8112781244591328, D = 0.1887218755408672.
    let d = reweight::divergence_bits(&[1.0, 3.0])?;
    assert!((d - 0.188_721_875_540_867_2).abs() < 1e-12, "{d}");
    // Two nonzero weights of four, equal: log2 4 − 1 = 1 bit.
    let d = reweight::divergence_bits(&[0.0, 2.0, 0.0, 2.0])?;
    assert!((d - 1.0).abs() < 1e-12, "{d}");
    Ok(())
}

const OBS: usize = 3;
const ACTIONS: usize = 4;
const BATCH: usize = 5;

fn batch() -> (Vec<f32>, Vec<i32>) {
    let obs: Vec<f32> = (0..BATCH * OBS)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let actions = vec![0, 3, 1, 3, 2];
    (obs, actions)
}

/// Softmax probabilities of `x·w + b` for each row, in f64.
fn probs(w: &[f64], b: &[f64], obs: &[f32]) -> Vec<Vec<f64>> {
    (0..BATCH)
        .map(|r| {
            let logits: Vec<f64> = (0..ACTIONS)
                .map(|a| {
                    b[a] + (0..OBS)
                        .map(|i| obs[r * OBS + i] as f64 * w[i * ACTIONS + a])
                        .sum::<f64>()
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = logits.iter().map(|l| (l - m).exp()).sum();
            logits.iter().map(|l| (l - m).exp() / z).collect()
        })
        .collect()
}

/// One plain-gradient step on the mean NLL of a linear softmax policy:
/// `∂L/∂logits = (softmax − onehot(a)) / B`, `∂L/∂w = xᵀ · that`, `∂L/∂b = Σ_rows`.
/// Returns the loss before the step.
fn sgd_step(w: &mut [f64], b: &mut [f64], obs: &[f32], actions: &[i32], lr: f64) -> f64 {
    let p = probs(w, b, obs);
    let mut gw = vec![0.0; OBS * ACTIONS];
    let mut gb = vec![0.0; ACTIONS];
    let mut loss = 0.0;
    for r in 0..BATCH {
        loss -= p[r][actions[r] as usize].ln() / BATCH as f64;
        for a in 0..ACTIONS {
            let d = (p[r][a] - f64::from(u8::from(a == actions[r] as usize))) / BATCH as f64;
            gb[a] += d;
            for i in 0..OBS {
                gw[i * ACTIONS + a] += obs[r * OBS + i] as f64 * d;
            }
        }
    }
    for (x, g) in w.iter_mut().zip(&gw) {
        *x -= lr * g;
    }
    for (x, g) in b.iter_mut().zip(&gb) {
        *x -= lr * g;
    }
    loss
}

/// The compiled fit step (SGD, K = 1 and K = 3 steps per call) on a one-layer
/// (linear) softmax policy equals the same steps computed in plain f64 Rust from the
/// downloaded initial parameters; so does the reported loss and the forward pass.
#[test]
fn fit_step_matches_plain_rust_gradient_steps() -> xlaclient::rl::Result<()> {
    let client = Client::cpu()?;
    let lr = 0.5;
    let (obs, actions) = batch();
    for k in [1u32, 3] {
        let net = Mlp::new(&[OBS as i64, ACTIONS as i64], Activation::Tanh);
        let fit = PolicyFit::new(&client, net, optim::sgd(lr, 0.0, false), BATCH, k, BATCH)?;
        let state = fit.init(3)?;
        let mut w: Vec<f64> = state.params[0]
            .w
            .to_vec::<f32>()?
            .into_iter()
            .map(f64::from)
            .collect();
        // The bias starts at zero (Haiku's default); the first call's update makes it
        // nonzero, so the second call's comparison covers a nonzero bias too.
        let mut b: Vec<f64> = state.params[0]
            .b
            .to_vec::<f32>()?
            .into_iter()
            .map(f64::from)
            .collect();
        assert!(w.iter().any(|x| *x != 0.0), "random init expected");

        // The forward pass against plain Rust.
        let got = fit.probs(&state.params, &obs)?;
        let want = probs(&w, &b, &obs);
        for r in 0..BATCH {
            for a in 0..ACTIONS {
                assert!((got[r * ACTIONS + a] as f64 - want[r][a]).abs() < 1e-6);
            }
        }

        let mut state = state;
        for _call in 0..2 {
            state = fit.fit(state, &obs, &actions)?;
            let mut last_loss = 0.0;
            for _ in 0..k {
                last_loss = sgd_step(&mut w, &mut b, &obs, &actions, lr);
            }
            let gw = state.params[0].w.to_vec::<f32>()?;
            let gb = state.params[0].b.to_vec::<f32>()?;
            for (g, r) in gw.iter().zip(&w) {
                assert!((*g as f64 - r).abs() < 1e-5, "K {k}: w {g} vs {r}");
            }
            for (g, r) in gb.iter().zip(&b) {
                assert!((*g as f64 - r).abs() < 1e-5, "K {k}: b {g} vs {r}");
            }
            let loss = state.loss.to_scalar::<f32>()? as f64;
            assert!(
                (loss - last_loss).abs() < 1e-5,
                "K {k}: loss {loss} vs {last_loss}"
            );
        }
    }
    Ok(())
}

#[test]
fn fit_refuses_bad_batches() -> xlaclient::rl::Result<()> {
    let client = Client::cpu()?;
    let net = Mlp::new(&[OBS as i64, ACTIONS as i64], Activation::Tanh);
    let fit = PolicyFit::new(&client, net, optim::sgd(0.1, 0.0, false), BATCH, 1, BATCH)?;
    let (obs, actions) = batch();
    let state = fit.init(0)?;
    let e = fit.probs(&state.params, &obs[1..]).unwrap_err();
    assert!(matches!(e, Error::Length { .. }), "{e}");
    let mut bad = actions.clone();
    bad[2] = ACTIONS as i32;
    let e = fit.fit(state, &obs, &bad).unwrap_err();
    assert!(matches!(e, Error::InvalidAction { action: 4, .. }), "{e}");
    assert!(matches!(
        PolicyFit::new(
            &client,
            Mlp::new(&[2, 2], Activation::Tanh),
            optim::sgd(0.1, 0.0, false),
            0,
            1,
            1
        ),
        Err(Error::InvalidArgument { .. })
    ));
    // A network with no layer: the error its init records, not a panic.
    let e = PolicyFit::new(
        &client,
        Mlp::new(&[2], Activation::Tanh),
        optim::sgd(0.1, 0.0, false),
        1,
        1,
        1,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Core(xlaclient::Error::Graph { .. }))
            && e.to_string().contains("Mlp has no layer"),
        "{e}"
    );
    Ok(())
}
