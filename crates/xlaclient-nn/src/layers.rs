//! Layers and activations: [`Linear`], [`Mlp`], [`flatten`], and `jax.nn`'s
//! activations with JAX's formulas (so gradients at kinks follow JAX's too).
//!
//! A layer is a small configuration value (sizes, initialisers); its parameters are
//! a tree ([`LinearParams`], a `Vec` of them for an [`Mlp`]) that is at once the
//! shape spec (`LinearParams<Shape>`), the traced values (`LinearParams<Op>`) and the
//! device buffers (`LinearParams<Buffer>`).
//!
//! ```
//! use xlaclient_core::{Builder, ElementType, Tree};
//! use xlaclient_nn::{Activation, Mlp};
//!
//! // The Q-network of the Anakin notebook: flatten, 256 hidden units, relu, 3 outputs.
//! let net = Mlp::new(&[50, 256, 3], Activation::Relu);
//! let b = Builder::new("q");
//! let params = net.init(&b.prng_key(42));
//! assert_eq!(params.num_leaves(), 4); // w, b of two layers
//! let obs = b.zeros(ElementType::F32, &[64, 10, 5, 1]);
//! let q = net.apply(&params, &xlaclient_nn::flatten(&obs));
//! assert_eq!(q.dims()?, vec![64, 3]);
//! assert_eq!(net.spec()[0].w.dims(), [50, 256]);
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use super::init::{self, Initializer};
use crate::{Comparison, ElementType, Op, Shape, Tree};

/// The parameters of a [`Linear`] layer: `w` of `[in, out]`, `b` of `[out]`.
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct LinearParams<T> {
    /// The weights, `[in, out]`.
    pub w: T,
    /// The bias, `[out]`.
    pub b: T,
}

/// An affine layer `x · w + b` over the last axis of `x` (`hk.Linear`), `f32`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Linear {
    /// Input features.
    pub input: i64,
    /// Output features.
    pub output: i64,
    /// How `w` is initialised; Haiku's default
    /// ([`init::truncated_normal_fan_in`]).
    pub w_init: Initializer,
    /// How `b` is initialised; zeros by default.
    pub b_init: Initializer,
}

impl Linear {
    /// A layer from `input` to `output` features with Haiku's default initialisers.
    pub fn new(input: i64, output: i64) -> Linear {
        Linear {
            input,
            output,
            w_init: init::truncated_normal_fan_in(),
            b_init: init::zeros(),
        }
    }

    /// The same layer with other initialisers.
    pub fn with_init(self, w_init: Initializer, b_init: Initializer) -> Linear {
        Linear {
            w_init,
            b_init,
            ..self
        }
    }

    /// The parameters' shapes (`f32[in, out]`, `f32[out]`).
    pub fn spec(&self) -> LinearParams<Shape> {
        LinearParams {
            w: Shape::of::<f32>(&[self.input, self.output]),
            b: Shape::of::<f32>(&[self.output]),
        }
    }

    /// Fresh parameters from `key`: `w` is drawn from `key` itself (so it equals
    /// Haiku's `w_init` given the same key); a random `b_init` draws `b` from
    /// `random_fold_in(key, 1)`.
    #[track_caller]
    pub fn init(&self, key: &Op) -> LinearParams<Op> {
        let w = self.w_init.init(key, &[self.input, self.output]);
        LinearParams {
            w,
            b: self.bias(key),
        }
    }

    /// [`init`](Linear::init) of each `(layer, key)`: the same values, bit for bit,
    /// with the weights' random draws batched ([`init::init_many`]: one Threefry
    /// hash per kind of sampler instead of one per layer, which compiles faster).
    ///
    /// ```
    /// use xlaclient_core::Builder;
    /// use xlaclient_nn::{Linear, init};
    /// let b = Builder::new("heads");
    /// let [k0, k1] = b.prng_key(0).split_keys();
    /// let (pi, v) = (Linear::new(64, 2), Linear::new(64, 1));
    /// let (pi, v) = (
    ///     pi.with_init(init::orthogonal(0.01), init::zeros()),
    ///     v.with_init(init::orthogonal(1.0), init::zeros()),
    /// );
    /// let p = Linear::init_many(&[(&pi, &k0), (&v, &k1)]);
    /// assert_eq!(p[1].w.dims()?, vec![64, 1]);
    /// # Ok::<(), xlaclient_nn::Error>(())
    /// ```
    #[track_caller]
    pub fn init_many(layers: &[(&Linear, &Op)]) -> Vec<LinearParams<Op>> {
        let dims: Vec<[i64; 2]> = layers.iter().map(|(l, _)| [l.input, l.output]).collect();
        let ws: Vec<(Initializer, &Op, &[i64])> = layers
            .iter()
            .zip(&dims)
            .map(|((l, k), d)| (l.w_init, *k, &d[..]))
            .collect();
        crate::init::init_many(&ws)
            .into_iter()
            .zip(layers)
            .map(|(w, (l, key))| LinearParams { w, b: l.bias(key) })
            .collect()
    }

    /// The bias of [`init`](Linear::init) from the layer's key.
    fn bias(&self, key: &Op) -> Op {
        let bkey = if self.b_init.is_random() {
            key.random_fold_in(&key.builder().constant(1u32))
        } else {
            key.clone()
        };
        self.b_init.init(&bkey, &[self.output])
    }

    /// Fresh parameters as flax's `nn.Dense(output)` at `module_path` makes them
    /// from `module.init(root, …)`: `w` (the kernel) from the key flax gives its
    /// first parameter, `b` from the key of its second
    /// ([`flax_param_key`](crate::flax_param_key) with index 0 and 1). With
    /// `w_init` the Dense's `kernel_init` (flax's default is
    /// `lecun_normal`; PureJaxRL's PPO uses [`init::orthogonal`]) the values are
    /// flax's for the same root key.
    ///
    /// ```
    /// use xlaclient_core::Builder;
    /// use xlaclient_nn::{Linear, init};
    /// let b = Builder::new("ppo_critic_head");
    /// // nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0)), 6th in the module
    /// let head = Linear::new(64, 1).with_init(init::orthogonal(1.0), init::zeros());
    /// let p = head.init_flax(&b.prng_key(0), &["Dense_5"]);
    /// assert_eq!(p.w.dims()?, vec![64, 1]);
    /// # Ok::<(), xlaclient_nn::Error>(())
    /// ```
    #[track_caller]
    pub fn init_flax(&self, root: &Op, module_path: &[&str]) -> LinearParams<Op> {
        let w = self.w_init.init(
            &crate::flax::param_key(root, module_path, 0),
            &[self.input, self.output],
        );
        let b = self.b_init.init(
            &crate::flax::param_key(root, module_path, 1),
            &[self.output],
        );
        LinearParams { w, b }
    }

    /// `x · w + b` for `x` of `[..., in]` (any leading axes), giving `[..., out]`.
    #[track_caller]
    pub fn apply(&self, params: &LinearParams<Op>, x: &Op) -> Op {
        &x.matmul(&params.w) + &params.b
    }
}

/// An activation function, as a value (for [`Mlp`]); each is also a function
/// here ([`relu`], [`gelu`], …).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// [`relu`].
    Relu,
    /// `tanh`.
    Tanh,
    /// [`sigmoid`].
    Sigmoid,
    /// [`gelu`] (the tanh approximation).
    Gelu,
    /// [`silu`] (swish).
    Silu,
    /// [`elu`] with `alpha = 1`.
    Elu,
    /// [`leaky_relu`] with the given negative slope (JAX's default 0.01).
    LeakyRelu(f64),
    /// [`softplus`].
    Softplus,
    /// No activation.
    Identity,
}

impl Activation {
    /// The activation of `x`.
    #[track_caller]
    pub fn apply(&self, x: &Op) -> Op {
        match *self {
            Activation::Relu => relu(x),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => sigmoid(x),
            Activation::Gelu => gelu(x),
            Activation::Silu => silu(x),
            Activation::Elu => elu(x, 1.0),
            Activation::LeakyRelu(slope) => leaky_relu(x, slope),
            Activation::Softplus => softplus(x),
            Activation::Identity => x.clone(),
        }
    }
}

/// The parameters of an [`Mlp`]: one [`LinearParams`] per layer.
pub type MlpParams<T> = Vec<LinearParams<T>>;

/// A multi-layer perceptron (`hk.nets.MLP`): [`Linear`] layers through the given
/// sizes, `activation` between them and none after the last.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    /// The layers, in order.
    pub layers: Vec<Linear>,
    /// Applied after every layer but the last.
    pub activation: Activation,
}

impl Mlp {
    /// Layers `sizes[0] → sizes[1] → … → sizes[n]` with Haiku's default initialisers.
    ///
    /// Fewer than two sizes give a network with no layer, which
    /// [`init`](Self::init) and [`apply`](Self::apply) refuse: they record an
    /// [`Error::Graph`](xlaclient_core::Error::Graph) at their caller's line (returned
    /// by `build` or `jit`), never a panic.
    pub fn new(sizes: &[i64], activation: Activation) -> Mlp {
        Mlp {
            layers: sizes.windows(2).map(|w| Linear::new(w[0], w[1])).collect(),
            activation,
        }
    }

    /// The same network with other initialisers for every layer.
    pub fn with_init(self, w_init: Initializer, b_init: Initializer) -> Mlp {
        Mlp {
            layers: self
                .layers
                .into_iter()
                .map(|l| l.with_init(w_init, b_init))
                .collect(),
            ..self
        }
    }

    /// The parameters' shapes.
    pub fn spec(&self) -> MlpParams<Shape> {
        self.layers.iter().map(Linear::spec).collect()
    }

    /// Fresh parameters: layer `i` is initialised from the `i`-th key of
    /// `random_split(key, layers)` (as [`Linear::init`] would, the layers' draws
    /// batched by [`Linear::init_many`]).
    ///
    /// A network with no layer records an [`Error::Graph`](xlaclient_core::Error::Graph)
    /// at the caller's line and gives one layer of failed parameters (so that an
    /// optimizer's state built on them fails with the same error).
    #[track_caller]
    pub fn init(&self, key: &Op) -> MlpParams<Op> {
        if self.layers.is_empty() {
            let failed = key.builder().error(NO_LAYERS);
            return vec![LinearParams {
                w: failed.clone(),
                b: failed,
            }];
        }
        let keys = split_keys(key, self.layers.len() as i64);
        let layers: Vec<(&Linear, &Op)> = self.layers.iter().zip(&keys).collect();
        Linear::init_many(&layers)
    }

    /// The network's output for `x` of `[..., in]`.
    ///
    /// A network with no layer, or `params` with another number of layers than the
    /// network, records an [`Error::Graph`](xlaclient_core::Error::Graph) at the
    /// caller's line and gives a failed op carrying it.
    #[track_caller]
    pub fn apply(&self, params: &MlpParams<Op>, x: &Op) -> Op {
        let Some(last) = self.layers.len().checked_sub(1) else {
            return x.builder().error(NO_LAYERS);
        };
        if params.len() != self.layers.len() {
            return x.builder().error(format!(
                "Mlp::apply: {} layer(s) of parameters for a network of {}",
                params.len(),
                self.layers.len()
            ));
        }
        let mut h = x.clone();
        for (i, (layer, p)) in self.layers.iter().zip(params).enumerate() {
            h = layer.apply(p, &h);
            if i < last {
                h = self.activation.apply(&h);
            }
        }
        h
    }
}

/// What [`Mlp::init`] and [`Mlp::apply`] say of a network with no layer.
const NO_LAYERS: &str = "Mlp has no layer: Mlp::new needs at least an input and an output \
                         size (`&[in, out]` or `&[in, hidden.., out]`)";

/// The `n` keys of `jax.random.split(key, n)`, each as its own key. A negative `n`
/// is the error [`Op::random_split`] records (and no key).
#[track_caller]
pub fn split_keys(key: &Op, n: i64) -> Vec<Op> {
    let keys = key.random_split(n);
    (0..n).map(|i| key_at(&keys, i)).collect()
}

/// Key `i` of the `[n, width]` array of keys `keys` (a failed `keys` gives itself).
fn key_at(keys: &Op, i: i64) -> Op {
    let width = keys
        .dims()
        .ok()
        .and_then(|d| d.get(1).copied())
        .unwrap_or(2);
    keys.slice(&[i, 0], &[i + 1, width], &[1, 1])
        .reshape(&[width])
}

/// A sequence of fresh keys from one key (`hk.PRNGSequence`): each
/// [`next`](KeySequence::next) splits the current key into a new current key and
/// the key it returns (`key, subkey = jax.random.split(key)`), so initialisers
/// and samplers can each take their own key without splitting by hand.
///
/// ```
/// use xlaclient_core::Builder;
/// use xlaclient_nn::KeySequence;
/// let b = Builder::new("keys");
/// let keys = KeySequence::new(&b.prng_key(0));
/// let (k1, k2) = (keys.next(), keys.next());
/// assert_eq!(k1.dims()?, vec![2]);
/// # let _ = k2;
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
#[derive(Debug)]
pub struct KeySequence {
    key: std::cell::RefCell<Op>,
}

impl KeySequence {
    /// The sequence that starts from `key` (a threefry or rbg key).
    pub fn new(key: &Op) -> KeySequence {
        KeySequence {
            key: std::cell::RefCell::new(key.clone()),
        }
    }

    /// The next key.
    #[track_caller]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self) -> Op {
        let mut key = self.key.borrow_mut();
        let pair = key.random_split(2);
        *key = key_at(&pair, 0);
        key_at(&pair, 1)
    }

    /// The current key (what the next split starts from).
    pub fn key(&self) -> Op {
        self.key.borrow().clone()
    }
}

/// All axes but the first (the batch axis) flattened into one (`hk.Flatten`):
/// `[b, d1, d2, …]` becomes `[b, d1·d2·…]`; a vector `[b]` becomes `[b, 1]`.
#[track_caller]
pub fn flatten(x: &Op) -> Op {
    match x.dims() {
        Ok(d) if !d.is_empty() => x.reshape(&[d[0], d[1..].iter().product()]),
        _ => x.reshape(&[-1]),
    }
}

/// A scalar of `x`'s element type.
fn k(x: &Op, v: f64) -> Op {
    let ty = x.element_type().unwrap_or(ElementType::F32);
    x.builder().constant_of_type(ty, v)
}

/// `max(x, 0)` (`jax.nn.relu`; gradient 0 at 0).
#[track_caller]
pub fn relu(x: &Op) -> Op {
    x.relu()
}

/// `1 / (1 + exp(-x))` (`jax.nn.sigmoid`, XLA's `logistic`).
#[track_caller]
pub fn sigmoid(x: &Op) -> Op {
    x.logistic()
}

/// `jax.nn.gelu` with its default `approximate=True`:
/// `x · ½(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
#[track_caller]
pub fn gelu(x: &Op) -> Op {
    let sqrt_2_over_pi = (2.0 / std::f64::consts::PI).sqrt();
    let cube = &(x * x) * x;
    let inner = &(x + &(&cube * 0.044715)) * sqrt_2_over_pi;
    let cdf = &(&inner.tanh() + 1.0) * 0.5;
    x * &cdf
}

/// `x · sigmoid(x)` (`jax.nn.silu`).
#[track_caller]
pub fn silu(x: &Op) -> Op {
    x * &sigmoid(x)
}

/// Swish, another name of [`silu`] (`jax.nn.swish`).
#[track_caller]
pub fn swish(x: &Op) -> Op {
    silu(x)
}

/// `x` where `x > 0`, else `alpha · (exp(x) − 1)` (`jax.nn.elu`; the exponential
/// sees only non-positive values, so no overflow reaches the gradient).
#[track_caller]
pub fn elu(x: &Op, alpha: f64) -> Op {
    let b = x.builder();
    let zero = k(x, 0.0);
    let pos = x.compare(&zero, Comparison::Gt);
    let safe = b.select(&pos, &zero, x);
    b.select(&pos, x, &(&safe.expm1() * alpha))
}

/// `x` where `x ≥ 0`, else `negative_slope · x` (`jax.nn.leaky_relu`, default slope
/// 0.01).
#[track_caller]
pub fn leaky_relu(x: &Op, negative_slope: f64) -> Op {
    let nonneg = x.compare(&k(x, 0.0), Comparison::Ge);
    x.builder().select(&nonneg, x, &(x * negative_slope))
}

/// `log(1 + exp(x))` computed stably as `max(x, 0) + log1p(exp(−|x|))`
/// (`jax.nn.softplus`, which is `logaddexp(x, 0)`).
#[track_caller]
pub fn softplus(x: &Op) -> Op {
    &x.max(&k(x, 0.0)) + &(-&x.abs()).exp().log1p()
}

/// `jax.nn.softmax` along `axis` (see [`Op::softmax`]).
#[track_caller]
pub fn softmax(x: &Op, axis: i64) -> Op {
    x.softmax(axis)
}

/// `jax.nn.log_softmax` along `axis` (see [`Op::log_softmax`]).
#[track_caller]
pub fn log_softmax(x: &Op, axis: i64) -> Op {
    x.log_softmax(axis)
}
