"""Record JAX's answers for vmap, jvp, hessian and batched sampling (issue 20).

Writes tests/data/vmap_jax.json, the reference the Rust tests of vmap / jvp /
hessian / per-example gradients / batched samplers compare against. jax 0.10.2,
CPU, jax_enable_x64 off (float32 and int32 everywhere), default threefry2x32 keys
(jax_threefry_partitionable as recorded in the JSON).

Rerun (from the repository root):

    . bench/jax_venv.sh                      # or JAX_VENV=/path/to/venv; VENV=$JAX_VENV
    $VENV/bin/python bench/record_vmap_jax.py

The output is deterministic: rerunning with the same JAX gives the same file.

Inputs are not drawn from jax.random: each float input is a closed form of its
0-based row-major indices i, j, k (its "formula" in the JSON, e.g.
"sin(0.37*i + 0.11*j)"), evaluated element by element in float64 with Python's
math module (the C library's sin/cos, the same functions Rust's f64::sin/cos call
on Linux), then rounded to float32. The script evaluates the formula string itself,
so the string is exactly what was computed. The values are stored too (flattened,
row-major), so a test may simply load them. Literal inputs have the literal as
their formula. Every recorded output comes from a jax.jit-compiled program, except
batched_sampling's 'loop/' outputs (each sampler called eagerly per key, as a user
would; asserted bit-identical to the jitted vmap and to the per-key jitted call).

Numbers: floats are written with 9 significant digits, which reads back to the
same float32 (the script checks that); integers (int32, uint32) as integers;
booleans as 0/1 with dtype "bool". Each entry's "program" is the Python source
of the functions that produced its outputs.

The script asserts what the data is meant to document: vmap of a sampler equals
the sampler called per key (bit for bit), jax.hessian equals jacfwd(grad),
per-example gradients sum to the batch gradient, and the batched while_loop /
cond / switch / scan equal a Python loop over the examples.
"""
import inspect
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
assert not jax.config.jax_enable_x64

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "vmap_jax.json")
SCRIPT = "bench/record_vmap_jax.py"

# ---------------------------------------------------------------------------
# Inputs and the JSON encoding


def closed(name, shape, formula):
    """A float32 input: `formula` of the indices i, j, k, in float64, rounded to f32."""
    names = "ijk"[: len(shape)]
    env = {"sin": math.sin, "cos": math.cos, "exp": math.exp, "__builtins__": {}}
    code = compile(formula, "<formula>", "eval")
    vals = []
    for idx in np.ndindex(*shape):
        env.update({n: float(v) for n, v in zip(names, idx)})
        vals.append(eval(code, env))
    arr = np.asarray(vals, np.float64).astype(np.float32).reshape(shape)
    return name, arr, formula


def literal(name, values, dtype):
    arr = np.asarray(values, dtype)
    return name, arr, repr(list(values))


def enc(name, arr, formula=None):
    """An array as {name, dtype, shape, [formula], data}; data flattened row-major."""
    a = np.asarray(arr)
    if a.dtype == np.float32:
        data = [Float9(v) for v in a.ravel()]
    elif a.dtype == np.bool_:
        data = [int(v) for v in a.ravel().astype(np.uint8)]
    elif a.dtype in (np.int32, np.uint32):
        data = [int(v) for v in a.ravel()]
    else:
        raise TypeError(f"{name}: unexpected dtype {a.dtype} (x64 should be off)")
    out = {"name": name, "dtype": str(a.dtype), "shape": list(a.shape)}
    if formula is not None:
        out["formula"] = formula
    out["data"] = data
    return out


class Float9:
    """A float32 written with 9 significant digits (reads back to the same f32)."""

    def __init__(self, v):
        v = np.float32(v)
        if not np.isfinite(v):
            raise ValueError(f"non-finite value {v}")
        self.text = "%.9g" % float(v)
        assert np.float32(float(self.text)) == v, (self.text, v)
        if "." not in self.text and "e" not in self.text:
            self.text += ".0"


def dump(obj, indent=0):
    """JSON with every number array on one line (keeps the file small and diffable)."""
    pad = " " * indent
    if isinstance(obj, dict):
        items = [f'{pad}  {json.dumps(k)}: {dump(v, indent + 2).lstrip()}' for k, v in obj.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(isinstance(v, (int, Float9)) for v in obj):
            return pad + "[" + ", ".join(v.text if isinstance(v, Float9) else str(v) for v in obj) + "]"
        return pad + "[\n" + ",\n".join(dump(v, indent + 2) for v in obj) + "\n" + pad + "]"
    if isinstance(obj, Float9):
        return pad + obj.text
    return pad + json.dumps(obj)


def entry(description, funcs, inputs, outputs, **extra):
    e = {"description": description,
         "program": "\n".join(inspect.getsource(f) for f in funcs)}
    e.update(extra)
    e["inputs"] = [enc(n, a, f) for n, a, f in inputs]
    e["outputs"] = [enc(n, a) for n, a in outputs]
    return e


def np_(x):
    return np.asarray(jax.device_get(x))


def same_bits(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), f"{what}: vmap != per-example loop:\n{a}\n{b}"


ENTRIES = {}

# ---------------------------------------------------------------------------
# 1. Per-example gradients of a small MLP


def mlp_loss(params, x, t):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    y = h @ w2 + b2
    return 0.5 * jnp.sum((y - t) ** 2)


def per_example_grads(params, xs, ts):
    return jax.vmap(jax.grad(mlp_loss), in_axes=(None, 0, 0))(params, xs, ts)


def per_example_losses(params, xs, ts):
    return jax.vmap(mlp_loss, in_axes=(None, 0, 0))(params, xs, ts)


MLP_INPUTS = [
    closed("w1", (3, 8), "0.6*sin(0.37*i + 0.11*j + 0.1)"),
    closed("b1", (8,), "0.1*cos(0.7*i)"),
    closed("w2", (8, 2), "0.5*sin(0.23*i - 0.31*j + 0.5)"),
    closed("b2", (2,), "0.05*(i + 1)"),
    closed("x", (5, 3), "sin(0.37*i + 0.11*j)"),
    closed("t", (5, 2), "3*sin(0.4*i + 0.2) + 0.6*cos(1.3*i + 0.7*j)"),
]
MLP_PARAMS = tuple(jnp.asarray(a) for _, a, _ in MLP_INPUTS[:4])
MLP_X, MLP_T = (jnp.asarray(a) for _, a, _ in MLP_INPUTS[4:])


def record_mlp():
    grads = jax.jit(per_example_grads)(MLP_PARAMS, MLP_X, MLP_T)
    losses = jax.jit(per_example_losses)(MLP_PARAMS, MLP_X, MLP_T)
    # The per-example gradients sum to the gradient of the summed loss.
    batch = jax.grad(lambda p: jnp.sum(per_example_losses(p, MLP_X, MLP_T)))(MLP_PARAMS)
    for g, b in zip(grads, batch):
        np.testing.assert_allclose(np_(g).sum(0), np_(b), rtol=1e-5, atol=1e-6)
    # ... and each equals the gradient for that example alone.
    for n in range(MLP_X.shape[0]):
        one = jax.jit(jax.grad(mlp_loss))(MLP_PARAMS, MLP_X[n], MLP_T[n])
        for g, o in zip(grads, one):
            np.testing.assert_allclose(np_(g)[n], np_(o), rtol=1e-5, atol=1e-6)
    names = ["grad_w1", "grad_b1", "grad_w2", "grad_b2"]
    ENTRIES["mlp_per_example_grads"] = entry(
        "Per-example gradients of an MLP (tanh hidden layer, loss 0.5*sum((y - t)^2) per example): "
        "jax.vmap(jax.grad(mlp_loss), in_axes=(None, 0, 0))(params, x, t). Outputs have the batch axis "
        "first; per_example_loss is jax.vmap(mlp_loss, in_axes=(None, 0, 0)).",
        [mlp_loss, per_example_grads, per_example_losses],
        MLP_INPUTS,
        [(n, np_(g)) for n, g in zip(names, grads)] + [("per_example_loss", np_(losses))],
    )
    return grads


# ---------------------------------------------------------------------------
# 2. Hessian, jacfwd(grad), jacrev


def hess_f(w, a):
    return jnp.sum(jnp.tanh(a @ w) ** 2) + 0.1 * jnp.sum(w ** 4)


def hess_g(w, a):
    return jnp.tanh(a @ w)


def record_hessian():
    (_, a, _) = a_in = closed("A", (4, 3), "sin(0.5*i + 0.3*j + 0.2)")
    (_, w, _) = w_in = closed("w", (3,), "0.8*cos(0.9*i + 0.4)")
    a, w = jnp.asarray(a), jnp.asarray(w)
    f_val = jax.jit(hess_f)(w, a)
    grad = jax.jit(jax.grad(hess_f))(w, a)
    hess = jax.jit(jax.hessian(hess_f))(w, a)
    fwd_grad = jax.jit(jax.jacfwd(jax.grad(hess_f)))(w, a)
    jrev = jax.jit(jax.jacrev(hess_g))(w, a)
    jfwd = jax.jit(jax.jacfwd(hess_g))(w, a)
    np.testing.assert_allclose(np_(hess), np_(fwd_grad), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np_(hess), np_(hess).T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(jrev), np_(jfwd), rtol=1e-6, atol=1e-6)
    ENTRIES["hessian_small"] = entry(
        "f(w) = sum(tanh(A @ w)^2) + 0.1*sum(w^4), differentiated with respect to w only (A is a "
        "constant argument): f, jax.grad(f), jax.hessian(f) [3,3], jax.jacfwd(jax.grad(f)) [3,3] "
        "(equal to the hessian), and jax.jacrev(g) [4,3] for g(w) = tanh(A @ w).",
        [hess_f, hess_g],
        [a_in, w_in],
        [("f", np_(f_val)), ("grad", np_(grad)), ("hessian", np_(hess)),
         ("jacfwd_grad", np_(fwd_grad)), ("jacrev_g", np_(jrev))],
    )


# ---------------------------------------------------------------------------
# 3. jvp


def jvp_h(x, b):
    return jnp.log(1 + jnp.exp(x @ b)) * jnp.cos(x).sum()


def jvp_program(x, b, v):
    return jax.jvp(lambda x: jvp_h(x, b), (x,), (v,))


def record_jvp():
    ins = [closed("x", (2, 3), "sin(0.37*i + 0.11*j)"),
           closed("B", (3, 4), "0.7*cos(0.21*i + 0.43*j + 0.3)"),
           closed("v", (2, 3), "cos(1.3*i - 0.7*j)")]
    x, b, v = (jnp.asarray(a) for _, a, _ in ins)
    primal, tangent = jax.jit(jvp_program)(x, b, v)
    # The tangent is the directional derivative: compare to the Jacobian-vector product.
    jac = jax.jacrev(lambda x: jvp_h(x, b))(x)
    np.testing.assert_allclose(np_(tangent), np.einsum("abij,ij->ab", np_(jac), np_(v)), rtol=1e-5,
                               atol=1e-6)
    ENTRIES["jvp_program"] = entry(
        "jax.jvp of h(x) = log(1 + exp(x @ B)) * cos(x).sum() (written literally, no softplus/log1p) at "
        "x [2,3] along the tangent v [2,3]; B is a constant argument. Outputs: primal h(x) [2,4] and "
        "tangent [2,4].",
        [jvp_h, jvp_program],
        ins,
        [("primal", np_(primal)), ("tangent", np_(tangent))],
    )


# ---------------------------------------------------------------------------
# 4. vmap of while_loop with per-example trip counts


def while_trips(x, n):
    def cond(c):
        return c[1] < n

    def body(c):
        return (c[0] * 1.5 + 1, c[1] + 1)

    return jax.lax.while_loop(cond, body, (x, 0))


def record_while():
    x_in = literal("x", [1, 2, 3, 4, 5], np.float32)
    n_in = literal("n", [0, 1, 3, 5, 2], np.int32)
    x, n = jnp.asarray(x_in[1]), jnp.asarray(n_in[1])
    val, count = jax.jit(jax.vmap(while_trips))(x, n)
    for i in range(5):
        v1, c1 = jax.jit(while_trips)(x[i], n[i])
        same_bits(np_(val)[i], np_(v1), "while value")
        same_bits(np_(count)[i], np_(c1), "while count")
    assert np_(count).tolist() == [0, 1, 3, 5, 2]
    ENTRIES["vmap_while_trips"] = entry(
        "jax.vmap(while_trips)(x, n): a while_loop whose trip count n differs per example (the batched "
        "loop runs max(n) times and keeps finished examples unchanged). Carry (value f32, count int32) "
        "starts at (x_i, 0); outputs the final value and count per example.",
        [while_trips],
        [x_in, n_in],
        [("value", np_(val)), ("count", np_(count))],
    )


# ---------------------------------------------------------------------------
# 5. vmap of cond and switch


def cond_fn(p, x):
    return jax.lax.cond(p, lambda x: x * 2, lambda x: x - 1, x)


def switch_fn(i, x):
    return jax.lax.switch(i, [lambda x: x + 1, lambda x: x * x, lambda x: -x], x)


def record_cond():
    p_in = literal("p", [True, False, True], np.bool_)
    x_in = literal("x", [1, 2, 3], np.float32)
    idx_in = literal("index", [0, 2, 1, 2], np.int32)
    xs_in = literal("x_switch", [1, 2, 3, 4], np.float32)
    p, x, idx, xs = (jnp.asarray(a[1]) for a in (p_in, x_in, idx_in, xs_in))
    c = jax.jit(jax.vmap(cond_fn))(p, x)
    s = jax.jit(jax.vmap(switch_fn))(idx, xs)
    same_bits(np_(c), np.stack([np_(cond_fn(p[i], x[i])) for i in range(3)]), "cond")
    same_bits(np_(s), np.stack([np_(switch_fn(idx[i], xs[i])) for i in range(4)]), "switch")
    ENTRIES["vmap_cond"] = entry(
        "jax.vmap(cond_fn)(p, x) with a batched predicate (lax.cond: x*2 if p else x-1), and "
        "jax.vmap(switch_fn)(index, x_switch) with a batched branch index over 3 branches "
        "(x+1, x*x, -x).",
        [cond_fn, switch_fn],
        [p_in, x_in, idx_in, xs_in],
        [("cond", np_(c)), ("switch", np_(s))],
    )


# ---------------------------------------------------------------------------
# 6. vmap of scan


def scan_fn(c0, xs):
    return jax.lax.scan(lambda c, x: (c * 0.9 + x, c), c0, xs)


def record_scan():
    c0_in = closed("c0", (3,), "cos(0.6*i)")
    xs_in = closed("xs", (3, 4), "sin(0.37*i + 0.11*j)")
    c0, xs = jnp.asarray(c0_in[1]), jnp.asarray(xs_in[1])
    carry, ys = jax.jit(jax.vmap(scan_fn))(c0, xs)
    for i in range(3):
        c1, y1 = jax.jit(scan_fn)(c0[i], xs[i])
        np.testing.assert_allclose(np_(carry)[i], np_(c1), rtol=1e-6)
        np.testing.assert_allclose(np_(ys)[i], np_(y1), rtol=1e-6)
    ENTRIES["vmap_scan"] = entry(
        "jax.vmap(scan_fn)(c0, xs): per example i a scan over xs[i] (length 4) with carry c0[i], "
        "body (c, x) -> (c*0.9 + x, c) (so ys holds the carry before each step). Outputs: final carry "
        "[3] and ys [3,4].",
        [scan_fn],
        [c0_in, xs_in],
        [("carry", np_(carry)), ("ys", np_(ys))],
    )


# ---------------------------------------------------------------------------
# 7. Batched sampling


def samplers(k):
    return {
        "normal": jax.random.normal(k, (3,)),
        "uniform": jax.random.uniform(k, (3,)),
        "bernoulli": jax.random.bernoulli(k, 0.3, (5,)),
        "randint": jax.random.randint(k, (4,), 0, 10),
        "categorical": jax.random.categorical(k, logits=jnp.array([0.0, 1.0, 2.0])),
        "bits": jax.random.bits(k, (2,)),
        "split": jax.random.key_data(jax.random.split(k)),
        "fold_in_7": jax.random.key_data(jax.random.fold_in(k, 7)),
    }


def batched_samplers(keys):
    return jax.vmap(samplers)(keys)


def record_sampling():
    root = jax.random.PRNGKey(42)
    keys = jax.random.split(root, 4)
    key_data = np_(jax.random.key_data(keys))
    assert key_data.dtype == np.uint32 and key_data.shape == (4, 2)
    batched = {k: np_(v) for k, v in jax.jit(batched_samplers)(keys).items()}
    # Unbatched: the sampler called per key, eagerly (as a user would), and under jit.
    loop = {name: np.stack([np_(samplers(keys[i])[name]) for i in range(4)]) for name in batched}
    loop_jit = {name: np.stack([np_(jax.jit(samplers)(keys[i])[name]) for i in range(4)])
                for name in batched}
    for name in batched:
        same_bits(batched[name], loop[name], name)
        same_bits(batched[name], loop_jit[name], name + " (jit)")
    # The three spellings named in the brief, checked separately.
    same_bits(np_(jax.vmap(lambda k: jax.random.normal(k, (3,)))(keys)), batched["normal"], "normal")
    same_bits(np_(jax.random.key_data(jax.vmap(jax.random.split)(keys))), batched["split"], "split")
    same_bits(np_(jax.vmap(lambda k: jax.random.fold_in(k, 7))(keys)), batched["fold_in_7"], "fold_in")
    shapes = {"normal": (4, 3), "uniform": (4, 3), "bernoulli": (4, 5), "randint": (4, 4),
              "categorical": (4,), "bits": (4, 2), "split": (4, 2, 2), "fold_in_7": (4, 2)}
    for name, shape in shapes.items():
        assert batched[name].shape == shape, (name, batched[name].shape)
    outputs = [("root_key", np_(root)), ("keys", key_data)]
    outputs += [("vmap/" + n, batched[n]) for n in shapes]
    outputs += [("loop/" + n, loop[n]) for n in shapes]
    ENTRIES["batched_sampling"] = entry(
        "keys = jax.random.split(jax.random.PRNGKey(42), 4) (threefry2x32, raw uint32 key data [4,2], "
        "output 'keys'; 'root_key' is PRNGKey(42)). 'vmap/NAME' is jax.vmap(samplers)(keys)[NAME] "
        "(jitted), 'loop/NAME' stacks samplers(keys[i])[NAME] called per key, eagerly; the script "
        "asserts they are bit-identical (and equal to the per-key sampler under jit), i.e. vmap of a "
        "sampler is the per-key sampler. bernoulli is bool (0/1); randint and categorical are int32; "
        "bits, split and fold_in_7 are uint32 key data (split: [4,2,2], the 2 new keys of each key).",
        [samplers, batched_samplers],
        [("seed", np.asarray(42, np.int32), "42"),
         ("keys", key_data, "jax.random.key_data(jax.random.split(jax.random.PRNGKey(seed), 4))")],
        outputs,
        threefry_partitionable=bool(jax.config.jax_threefry_partitionable),
        prng_impl=str(jax.config.jax_default_prng_impl),
    )


# ---------------------------------------------------------------------------
# 8. Collectives over a vmap axis name


def center(x):
    return x - jax.lax.pmean(x, "b")


def total(x):
    return jax.lax.psum(x, "b")


def record_axis_name():
    x_in = closed("x", (4, 3), "sin(0.37*i + 0.11*j)")
    x = jnp.asarray(x_in[1])
    c = jax.jit(jax.vmap(center, axis_name="b"))(x)
    s = jax.jit(jax.vmap(total, axis_name="b"))(x)
    np.testing.assert_allclose(np_(c), np_(x) - np_(x).mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(s), np.broadcast_to(np_(x).sum(0), (4, 3)), rtol=1e-6)
    ENTRIES["vmap_mean_axis_name"] = entry(
        "Collectives over a vmap axis name: jax.vmap(center, axis_name='b')(x) with "
        "center(x) = x - pmean(x, 'b') (each column minus its mean over the batch), and "
        "jax.vmap(total, axis_name='b')(x) with total(x) = psum(x, 'b') (every row is the column sums).",
        [center, total],
        [x_in],
        [("pmean_centered", np_(c)), ("psum", np_(s))],
    )


# ---------------------------------------------------------------------------
# 9. Per-example gradient clipping (DP-SGD without the noise)

CLIP_NORM = 1.0


def clipped_mean_grad(params, xs, ts):
    grads = jax.vmap(jax.grad(mlp_loss), in_axes=(None, 0, 0))(params, xs, ts)
    # Global norm of each example's gradient over all parameter arrays.
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in grads))
    scale = 1.0 / jnp.maximum(1.0, norms / CLIP_NORM)
    clipped = [g * scale.reshape((-1,) + (1,) * (g.ndim - 1)) for g in grads]
    return [c.mean(axis=0) for c in clipped], norms, scale


def record_clip():
    means, norms, scale = jax.jit(clipped_mean_grad)(MLP_PARAMS, MLP_X, MLP_T)
    norms_np = np_(norms)
    # The data should exercise both sides of the clip.
    assert (norms_np > CLIP_NORM).any() and (norms_np < CLIP_NORM).any(), norms_np
    grads = [np_(g) for g in per_example_grads(MLP_PARAMS, MLP_X, MLP_T)]
    ref_norms = np.sqrt(sum((g.reshape(5, -1).astype(np.float64) ** 2).sum(1) for g in grads))
    np.testing.assert_allclose(norms_np, ref_norms, rtol=1e-5)
    for m, g in zip(means, grads):
        s = np.minimum(1.0, CLIP_NORM / ref_norms).reshape((-1,) + (1,) * (g.ndim - 1))
        np.testing.assert_allclose(np_(m), (g * s).mean(0), rtol=1e-5, atol=1e-6)
    names = ["mean_clipped_grad_w1", "mean_clipped_grad_b1", "mean_clipped_grad_w2",
             "mean_clipped_grad_b2"]
    ENTRIES["per_example_grad_clip"] = entry(
        "DP-SGD's clipping (no noise) on the inputs of mlp_per_example_grads: each example's gradient "
        "(all 4 arrays together) is scaled by 1/max(1, norm/1.0), norm its global L2 norm, then the "
        "clipped gradients are averaged over the batch of 5. Outputs: the 4 averaged arrays, the "
        "per-example norms and scales.",
        [mlp_loss, clipped_mean_grad],
        MLP_INPUTS,
        [(n, np_(m)) for n, m in zip(names, means)] + [("norms", norms_np), ("scale", np_(scale))],
        clip_norm=CLIP_NORM,
    )


def main():
    record_mlp()
    record_hessian()
    record_jvp()
    record_while()
    record_cond()
    record_scan()
    record_sampling()
    record_axis_name()
    record_clip()
    doc = {
        "jax_version": jax.__version__,
        "script": SCRIPT,
        "backend": jax.default_backend(),
        "x64": bool(jax.config.jax_enable_x64),
        "encoding": "arrays are {name, dtype, shape, [formula], data}: data flattened row-major; float32 "
                    "with 9 significant digits (reads back exactly); int32/uint32 as integers; bool as "
                    "0/1. formula: float64 closed form of the 0-based indices i, j, k (C library "
                    "sin/cos), rounded to float32; or the literal values.",
        "entries": ENTRIES,
    }
    text = dump(doc) + "\n"
    # The file must read back to the same arrays.
    back = json.loads(text)
    for name, e in back["entries"].items():
        for arr in e["inputs"] + e["outputs"]:
            assert len(arr["data"]) == int(np.prod(arr["shape"], dtype=np.int64)), (name, arr["name"])
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT)}: {len(text)} bytes, {len(ENTRIES)} entries")


if __name__ == "__main__":
    main()
