//! Losses with optax's definitions (`optax/losses/_regression.py`,
//! `_classification.py`): each returns per-example (or per-element) values, as
//! optax's do; [`mean`] reduces them to the scalar a gradient needs.
//!
//! ```
//! use xlaclient_core::{Builder, Shape};
//! use xlaclient_nn::losses;
//!
//! let b = Builder::new("loss");
//! let logits = b.parameter(0, Shape::of::<f32>(&[32, 10]), "logits");
//! let labels = b.parameter(1, Shape::of::<i32>(&[32]), "labels");
//! let ce = losses::softmax_cross_entropy_with_integer_labels(&logits, &labels);
//! assert_eq!(ce.dims()?, vec![32]); // one value per example
//! let loss = losses::mean(&ce);
//! assert_eq!(loss.dims()?, Vec::<i64>::new());
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use crate::Op;

/// The mean over every axis: a scalar (`jnp.mean`).
#[track_caller]
pub fn mean(x: &Op) -> Op {
    let rank = x.dims().map(|d| d.len()).unwrap_or(0) as i64;
    let axes: Vec<i64> = (0..rank).collect();
    x.mean(&axes, false)
}

/// `(predictions − targets)²` element-wise (`optax.squared_error`).
#[track_caller]
pub fn squared_error(predictions: &Op, targets: &Op) -> Op {
    let e = predictions - targets;
    &e * &e
}

/// `½ (predictions − targets)²` element-wise (`optax.l2_loss`).
#[track_caller]
pub fn l2_loss(predictions: &Op, targets: &Op) -> Op {
    &squared_error(predictions, targets) * 0.5
}

/// The mean squared error over all elements: `mean(squared_error(p, t))`, a scalar.
#[track_caller]
pub fn mse(predictions: &Op, targets: &Op) -> Op {
    mean(&squared_error(predictions, targets))
}

/// `optax.huber_loss` element-wise: `½ e²` where `|e| ≤ delta`, else
/// `½ delta² + delta·(|e| − delta)`, for `e = predictions − targets`; computed as
/// optax does (`q = min(|e|, delta)`, `½ q² + delta·(|e| − q)`), which gives the
/// gradient `clip(e, −delta, delta)`.
#[track_caller]
pub fn huber_loss(predictions: &Op, targets: &Op, delta: f64) -> Op {
    let abs = (predictions - targets).abs();
    let ty = abs.element_type().unwrap_or(crate::ElementType::F32);
    let quadratic = abs.min(&abs.builder().constant_of_type(ty, delta));
    let linear = &abs - &quadratic;
    &(&(&quadratic * &quadratic) * 0.5) + &(&linear * delta)
}

/// `optax.softmax_cross_entropy`: `−Σ labels · log_softmax(logits)` over the last
/// axis, for `labels` of the logits' shape (one-hot vectors or any probabilities);
/// gives `[...]` for logits `[..., classes]`.
#[track_caller]
pub fn softmax_cross_entropy(logits: &Op, labels: &Op) -> Op {
    -&(labels * &logits.log_softmax(-1)).sum(&[-1], false)
}

/// `optax.softmax_cross_entropy_with_integer_labels`: `logsumexp(logits) −
/// logits[label]` over the last axis, for integer `labels` of `[...]` and logits of
/// `[..., classes]`; gives `[...]`. (Labels outside `0..classes` are clamped into
/// range, as XLA's gather does; optax leaves them undefined.)
#[track_caller]
pub fn softmax_cross_entropy_with_integer_labels(logits: &Op, labels: &Op) -> Op {
    let label_logits = logits
        .take_along_axis(&labels.expand_dims(-1), -1)
        .squeeze(&[-1]);
    &logits.logsumexp(-1, false) - &label_logits
}
