#!/usr/bin/env python3
"""Records JAX 0.10.2's answers for the numpy array functions of issue 24
(tests/ops_parity.rs compares the crate's against them, on both CPU plugins).

    JAX_VENV=/work/main/target/jax-venv; $JAX_VENV/bin/python bench/record_parity_jax.py

Writes tests/data/parity_jax.json: {"cases": [{name, op, args, inputs, outputs}]}
where each array is {dtype, shape, data} (data flattened row-major; floats as
numbers with 9 significant digits, or the strings "nan", "inf", "-inf"; bool as
0/1). `op` and `args` say which function and static arguments the case calls; the
Rust side maps them to its method. Edge cases: NaN, infinities, ties, -0/+0,
negative and out-of-range indices and shifts, empty arrays, integer promotion;
and `tree_paths`: JAX's key paths (`keystr`) of dataclasses holding lists.
CPU backend, 64-bit types off (float32/int32, as the crate's tests).
"""
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
assert jax.__version__ == "0.10.2", jax.__version__


def enc(a):
    a = np.asarray(a)
    if a.dtype == np.bool_:
        data = [int(v) for v in a.ravel()]
    elif np.issubdtype(a.dtype, np.integer):
        data = [int(v) for v in a.ravel()]
    else:
        data = []
        for v in a.ravel().astype(np.float64):
            if math.isnan(v):
                data.append("nan")
            elif math.isinf(v):
                data.append("inf" if v > 0 else "-inf")
            else:
                data.append(float(f"{v:.9g}"))
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


cases = []


def case(name, op, fn, inputs, **args):
    ins = [jnp.asarray(x) for x in inputs]
    out = fn(*ins)
    outs = list(out) if isinstance(out, tuple) else [out]
    cases.append({"name": name, "op": op, "args": args,
                  "inputs": [enc(x) for x in ins], "outputs": [enc(o) for o in outs]})


f32 = np.float32
i32 = np.int32
nan, inf = np.nan, np.inf
x23 = np.array([[1.5, -2, 3], [4, 0, -6]], f32)
x34 = np.arange(12, dtype=f32).reshape(3, 4) * f32(0.5) - 2

# repeat
case("repeat_scalar_axis0", "repeat", lambda x: jnp.repeat(x, 2, axis=0), [x23], repeats=[2], axis=0)
case("repeat_per_element_axis1", "repeat", lambda x: jnp.repeat(x, np.array([1, 0, 3]), axis=1,
                                                                  total_repeat_length=4), [x23], repeats=[1, 0, 3], axis=1)
case("repeat_flat", "repeat", lambda x: jnp.repeat(x, 2), [x23], repeats=[2], axis=None)
case("repeat_int_zero", "repeat", lambda x: jnp.repeat(x, 0, axis=0), [np.array([[1, 2, 3]], i32)], repeats=[0], axis=0)
case("repeat_neg_axis", "repeat", lambda x: jnp.repeat(x, np.array([2, 1]), axis=-2, total_repeat_length=3),
     [x23], repeats=[2, 1], axis=-2)
# tile
case("tile_2d", "tile", lambda x: jnp.tile(x, (2, 1, 2)), [x23], reps=[2, 1, 2])
case("tile_short_reps", "tile", lambda x: jnp.tile(x, 3), [x23], reps=[3])
case("tile_int_zero", "tile", lambda x: jnp.tile(x, (0, 2)), [np.array([1, 2], i32)], reps=[0, 2])
# roll
case("roll_axis1_neg", "roll", lambda x: jnp.roll(x, -7, axis=1), [x34], shift=-7, axis=1)
case("roll_flat", "roll", lambda x: jnp.roll(x, 5), [x34], shift=5, axis=None)
case("roll_int_big", "roll", lambda x: jnp.roll(x, 13, axis=0), [np.arange(5, dtype=i32)], shift=13, axis=0)
case("roll_empty", "roll", lambda x: jnp.roll(x, 2, axis=0), [np.zeros((0, 2), f32)], shift=2, axis=0)
# norm
v = np.array([3, -4, 0, 1.5, -0.5], f32)
for ordname, o in [("default", None), ("p1", 1), ("p2", 2), ("inf", inf), ("neginf", -inf), ("p3", 3), ("p0", 0), ("p05", 0.5)]:
    case(f"norm_vec_{ordname}", "norm", lambda x, o=o: jnp.linalg.norm(x, ord=o), [v], ord=ordname, axes=None, keepdims=False)
case("norm_whole_3d", "norm", lambda x: jnp.linalg.norm(x), [x34.reshape(3, 2, 2)], ord="default", axes=None, keepdims=False)
case("norm_axis1_keep", "norm", lambda x: jnp.linalg.norm(x, axis=1, keepdims=True), [x34], ord="default", axes=[1], keepdims=True)
case("norm_axis0_p1", "norm", lambda x: jnp.linalg.norm(x, ord=1, axis=0), [x34], ord="p1", axes=[0], keepdims=False)
for ordname, o in [("fro", "fro"), ("p1", 1), ("pm1", -1), ("inf", inf), ("neginf", -inf)]:
    case(f"norm_mat_{ordname}", "norm", lambda x, o=o: jnp.linalg.norm(x, ord=o), [x34], ord=ordname, axes=None, keepdims=False)
case("norm_mat_axes_10_keep", "norm", lambda x: jnp.linalg.norm(x, ord=1, axis=(1, 0), keepdims=True), [x34],
     ord="p1", axes=[1, 0], keepdims=True)
case("norm_int", "norm", lambda x: jnp.linalg.norm(x), [np.array([3, 4], i32)], ord="default", axes=None, keepdims=False)
case("norm_nan", "norm", lambda x: jnp.linalg.norm(x, ord=inf), [np.array([1, nan, -3], f32)], ord="inf", axes=None, keepdims=False)
# var / std
case("var_ddof0", "var", lambda x: jnp.var(x, axis=0), [x34], axes=[0], ddof=0, keepdims=False)
case("var_ddof1_keep", "var", lambda x: jnp.var(x, axis=1, ddof=1, keepdims=True), [x34], axes=[1], ddof=1, keepdims=True)
case("var_all_int", "var", lambda x: jnp.var(x, axis=(0, 1)), [np.array([[1, 2], [3, 7]], i32)], axes=[0, 1], ddof=0, keepdims=False)
case("var_ddof_n", "var", lambda x: jnp.var(x, axis=0, ddof=3), [x34], axes=[0], ddof=3, keepdims=False)
case("std_ddof1", "std", lambda x: jnp.std(x, axis=(0, 1), ddof=1), [x34], axes=[0, 1], ddof=1, keepdims=False)
# cumulative
c = np.array([[1, -2, nan, 4], [0.5, 3, -1, 2]], f32)
case("cumsum_axis1", "cumsum", lambda x: jnp.cumsum(x, axis=1), [x34], axis=1, reverse=False)
case("cumsum_axis0_reverse", "cumsum", lambda x: jax.lax.cumsum(x, axis=0, reverse=True), [x34], axis=0, reverse=True)
case("cumsum_bool", "cumsum", lambda x: jnp.cumsum(x, axis=0), [np.array([True, False, True, True])], axis=0, reverse=False)
case("cumsum_int8", "cumsum", lambda x: jnp.cumsum(x, axis=0), [np.array([100, 100, -7, 120], np.int8)], axis=0, reverse=False)
case("cumsum_nan", "cumsum", lambda x: jnp.cumsum(x, axis=1), [c], axis=1, reverse=False)
case("cumprod_axis1", "cumprod", lambda x: jnp.cumprod(x, axis=1), [x34], axis=1, reverse=False)
case("cumprod_reverse", "cumprod", lambda x: jax.lax.cumprod(x, axis=1, reverse=True), [c], axis=1, reverse=True)
case("cummax_nan", "cummax", lambda x: jax.lax.cummax(x, axis=1), [c], axis=1, reverse=False)
case("cummax_int", "cummax", lambda x: jax.lax.cummax(x, axis=0), [np.array([3, 1, 4, 1, 5, 9, 2, 6], i32)], axis=0, reverse=False)
case("cummin_reverse", "cummin", lambda x: jax.lax.cummin(x, axis=0, reverse=True), [x34], axis=0, reverse=True)
case("cumsum_long", "cumsum", lambda x: jnp.cumsum(x), [np.linspace(-1, 1, 37, dtype=f32)], axis=0, reverse=False)
# eye / tril / triu / diag
case("eye_3_4_k1", "eye", lambda: jnp.eye(3, 4, k=1), [], n=3, m=4, k=1, dtype="f32")
case("eye_3_3_km2_int", "eye", lambda: jnp.eye(3, 3, k=-2, dtype=jnp.int32), [], n=3, m=3, k=-2, dtype="s32")
x234 = np.arange(24, dtype=f32).reshape(2, 3, 4) + 1
case("tril_km1", "tril", lambda x: jnp.tril(x, k=-1), [x234], k=-1)
case("tril_k0", "tril", lambda x: jnp.tril(x), [x34], k=0)
case("triu_k1", "triu", lambda x: jnp.triu(x, k=1), [x234], k=1)
case("triu_nan", "triu", lambda x: jnp.triu(x, k=0), [np.array([[1, nan], [nan, 2]], f32)], k=0)
for k in [0, 1, -2, 5]:
    case(f"diag_extract_k{k}".replace("-", "m"), "diag", lambda x, k=k: jnp.diag(x, k=k), [x34], k=k)
for k in [0, 2, -1]:
    case(f"diag_build_k{k}".replace("-", "m"), "diag", lambda x, k=k: jnp.diag(x, k=k), [np.array([1, -2, 3], f32)], k=k)
# linspace
for name, a, b, n, ep, dt in [("basic", 0, 1, 5, True, "f32"), ("noend", 0, 1, 5, False, "f32"), ("one", 2, 3, 1, True, "f32"),
                               ("zero", 2, 3, 0, True, "f32"), ("int", 0, 10, 4, True, "s32"), ("neg", 3, -2.5, 7, True, "f32"),
                               ("third", 0, 1, 4, True, "f32")]:
    dtype = jnp.int32 if dt == "s32" else jnp.float32
    case(f"linspace_{name}", "linspace", lambda a=a, b=b, n=n, ep=ep, dtype=dtype: jnp.linspace(a, b, n, endpoint=ep, dtype=dtype),
         [], start=a, stop=b, num=n, endpoint=ep, dtype=dt)
# isnan / isinf / nan_to_num
sp = np.array([nan, inf, -inf, 0, -0.0, 1, -1e30], f32)
case("isnan", "isnan", jnp.isnan, [sp])
case("isinf", "isinf", jnp.isinf, [sp])
case("isnan_int", "isnan", jnp.isnan, [np.array([1, 2], i32)])
case("nan_to_num_default", "nan_to_num", jnp.nan_to_num, [sp], nan=0.0, posinf=None, neginf=None)
case("nan_to_num_given", "nan_to_num", lambda x: jnp.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), [sp], nan=-1.0, posinf=9.0, neginf=-9.0)
# floor division and modulo
xi = np.array([-7, 7, -7, 7, 0, 6, -6, 5, -5, 2147483647, -2147483648], i32)
yi = np.array([2, 2, -2, -2, 3, -3, 3, 0, 0, -1, 3], i32)
case("divmod_int", "divmod", jnp.divmod, [xi, yi])
case("floor_divide_int", "floor_divide", jnp.floor_divide, [xi, yi])
case("remainder_int", "remainder", jnp.remainder, [xi, yi])
xf = np.array([-7.5, 7.5, -7.5, 7.5, 0, -0.0, 6, 5, inf, nan, 1e-30, -3, 3], f32)
yf = np.array([2, 2, -2, -2, 3, 3, -3, 0, 2, 2, -1, inf, -inf], f32)
case("divmod_float", "divmod", jnp.divmod, [xf, yf])
case("floor_divide_float", "floor_divide", jnp.floor_divide, [xf, yf])
case("remainder_float", "remainder", jnp.remainder, [xf, yf])
xu = np.array([7, 0, 9, 4294967295], np.uint32)
yu = np.array([2, 3, 0, 10], np.uint32)
case("divmod_uint", "divmod", jnp.divmod, [xu, yu])
# count_nonzero / isin / array_equal
cz = np.array([[0, 1, -0.0, nan], [2, 0, 0, 3]], f32)
case("count_nonzero_axis1", "count_nonzero", lambda x: jnp.count_nonzero(x, axis=1), [cz], axes=[1], keepdims=False)
case("count_nonzero_all_keep", "count_nonzero", lambda x: jnp.count_nonzero(x, axis=(0, 1), keepdims=True), [cz], axes=[0, 1], keepdims=True)
case("isin_int", "isin", jnp.isin, [np.array([[1, 2, 3], [4, 5, 2]], i32), np.array([2, 2, 5, 9], i32)])
case("isin_nan", "isin", jnp.isin, [np.array([1, nan, 3], f32), np.array([nan, 3], f32)])
case("isin_empty", "isin", jnp.isin, [np.array([1, 2], i32), np.zeros((0,), i32)])
case("array_equal_yes", "array_equal", jnp.array_equal, [x23, x23.copy()], equal_nan=False)
case("array_equal_no", "array_equal", jnp.array_equal, [x23, x23 + np.array([0, 0, 1e-6], f32)], equal_nan=False)
an = np.array([1, nan, 3], f32)
case("array_equal_nan", "array_equal", jnp.array_equal, [an, an.copy()], equal_nan=False)
case("array_equal_nan_equal", "array_equal", lambda a, b: jnp.array_equal(a, b, equal_nan=True), [an, an.copy()], equal_nan=True)
case("array_equal_shapes", "array_equal", jnp.array_equal, [x23, x23.reshape(3, 2)], equal_nan=False)
case("array_equal_empty", "array_equal", jnp.array_equal, [np.zeros((0, 2), f32), np.zeros((0, 2), f32)], equal_nan=False)
# argsort
s = np.array([3, 1, nan, -0.0, 0.0, 1, -inf, 2, 1, inf], f32)
case("argsort", "argsort", lambda x: jnp.argsort(x), [s], axis=-1, descending=False)
case("argsort_desc", "argsort", lambda x: jnp.argsort(x, descending=True), [s], axis=-1, descending=True)
case("argsort_int_axis0", "argsort", lambda x: jnp.argsort(x, axis=0), [np.array([[3, 1], [1, 1], [2, 0]], i32)], axis=0, descending=False)
case("argsort_int_desc", "argsort", lambda x: jnp.argsort(x, axis=0, descending=True),
     [np.array([[3, 1], [1, 1], [2, 0], [3, 1]], i32)], axis=0, descending=True)
# unique with a static size
ux = np.array([3, 1, nan, 1, -0.0, 0, nan, 2], f32)
case("unique_pad_default", "unique", lambda x: jnp.unique(x, size=8), [ux], size=8, fill=None)
case("unique_cut", "unique", lambda x: jnp.unique(x, size=3), [ux], size=3, fill=None)
case("unique_fill", "unique", lambda x: jnp.unique(x, size=9, fill_value=-1.0), [ux], size=9, fill=-1.0)
case("unique_int_2d", "unique", lambda x: jnp.unique(x, size=5), [np.array([[2, 1], [2, 5]], i32)], size=5, fill=None)
case("unique_empty_fill", "unique", lambda x: jnp.unique(x, size=2, fill_value=7), [np.zeros((0,), i32)], size=2, fill=7)
case("unique_one", "unique", lambda x: jnp.unique(x, size=3), [np.array([4], i32)], size=3, fill=None)
# einsum in full (ellipsis, repeated letters, several operands, implicit output)
r = np.random.default_rng(24)
q = r.standard_normal((2, 3, 2, 4)).astype(f32)
k = r.standard_normal((2, 5, 2, 4)).astype(f32)
m3 = r.standard_normal((3, 3)).astype(f32)
m34 = r.standard_normal((3, 4)).astype(f32)
m45 = r.standard_normal((4, 5)).astype(f32)
for name, spec, ops in [("attention", "...qhd,...khd->...hqk", [q, k]), ("trace", "ii", [m3]),
                        ("diagonal", "ii->i", [m3]), ("chain", "ij,jk,kl->il", [m34, m45, m45.T.copy()]),
                        ("implicit", "ij,jk", [m34, m45]), ("sum_all", "ij->", [m34]),
                        ("outer", "i,j->ij", [m3[0], m34[0]]), ("transpose", "ij->ji", [m34]),
                        ("batch_diag", "bii->bi", [np.stack([m3, 2 * m3])]),
                        ("three_shared", "ij,ij,ij->i", [m34, m34 * 2, m34 - 1]),
                        ("ellipsis_implicit", "...ij,...jk", [q[:, :, 0], k[:, :4, 0].transpose(0, 2, 1)])]:
    case(f"einsum_{name}", "einsum", lambda *xs, spec=spec: jnp.einsum(spec, *xs), ops, spec=spec)
# lax.conv_transpose (JAX's default layouts: NHC/HIO/NHC, NHWC/HWIO/NHWC)
x1 = r.standard_normal((2, 5, 3)).astype(f32)
k1 = r.standard_normal((3, 3, 4)).astype(f32)
x2 = r.standard_normal((1, 4, 3, 2)).astype(f32)
k2 = r.standard_normal((3, 2, 2, 5)).astype(f32)
k2t = r.standard_normal((3, 2, 5, 2)).astype(f32)
for name, xx, kk, st, pad, dil, tk in [
        ("1d_same_s2", x1, k1, (2,), "SAME", None, False),
        ("1d_valid_s2", x1, k1, (2,), "VALID", None, False),
        ("1d_valid_s1_dil2", x1, k1, (1,), "VALID", (2,), False),
        ("1d_explicit_s3", x1, k1, (3,), [(1, 0)], None, False),
        ("2d_same_s21", x2, k2, (2, 1), "SAME", None, False),
        ("2d_valid_s2_transposed", x2, k2t, (2, 2), "VALID", None, True),
        ("2d_same_s3_dil2_transposed", x2, k2t, (3, 2), "SAME", (2, 1), True)]:
    args = dict(strides=list(st), padding=pad if isinstance(pad, str) else [list(p) for p in pad],
                rhs_dilation=list(dil) if dil else [], transpose_kernel=tk)
    case(f"conv_transpose_{name}", "conv_transpose",
         lambda a, b, st=st, pad=pad, dil=dil, tk=tk: jax.lax.conv_transpose(a, b, st, pad, rhs_dilation=dil, transpose_kernel=tk),
         [xx, kk], **args)
# jnp.vectorize: `function` names the function; tests/ops_parity.rs writes the same one
vec_fns = {
    "where_sub_mul": ("", lambda x, y: jnp.where(x > y, x - y, x * y)),
    "dot_scaled": ("(n),(n)->()", lambda a, b: jnp.sum(a * b) / (1 + jnp.max(a))),
    "normalize": ("(n)->(n)", lambda a: a / jnp.sum(a)),
    "matvec": ("(m,n),(n)->(m)", lambda m, v: m @ v),
}
for name, ins in [("where_sub_mul", [r.standard_normal((4, 1)).astype(f32), r.standard_normal((3,)).astype(f32)]),
                  ("dot_scaled", [r.standard_normal((2, 1, 3)).astype(f32), r.standard_normal((4, 3)).astype(f32)]),
                  ("normalize", [r.uniform(0.5, 2, (3, 4)).astype(f32)]),
                  ("matvec", [r.standard_normal((2, 3, 4)).astype(f32), r.standard_normal((4,)).astype(f32)])]:
    sig, fn = vec_fns[name]
    case(f"vectorize_{name}", "vectorize", jnp.vectorize(fn, signature=sig or None), ins, function=name, signature=sig)
# moveaxis / swapaxes
case("moveaxis_0_m1", "moveaxis", lambda x: jnp.moveaxis(x, 0, -1), [x234], source=0, destination=-1)
case("moveaxis_m1_1", "moveaxis", lambda x: jnp.moveaxis(x, -1, 1), [x234], source=-1, destination=1)
case("swapaxes_0_2", "swapaxes", lambda x: jnp.swapaxes(x, 0, 2), [x234], a=0, b=2)
case("swapaxes_same", "swapaxes", lambda x: jnp.swapaxes(x, 1, -2), [x234], a=1, b=-2)
# cumulative reductions and norms of empty arrays
case("cumsum_empty", "cumsum", lambda x: jnp.cumsum(x, axis=1), [np.zeros((2, 0), f32)], axis=1, reverse=False)
case("norm_empty", "norm", lambda x: jnp.linalg.norm(x), [np.zeros((0,), f32)], ord="default", axes=None, keepdims=False)
# promotion of two element types in the binary functions (x64 off: these pairs
# promote to the same types with it on)
i8a = np.array([-7, 7, 5, -128], np.int8)
u8a = np.array([2, 3, 255, 4], np.uint8)
case("divmod_u8_i8", "divmod", jnp.divmod, [u8a, i8a])
case("remainder_i32_f32", "remainder", jnp.remainder, [np.array([-7, 7, 5], i32), np.array([2.5, -2.5, 0.5], f32)])
case("isin_i32_f32", "isin", jnp.isin, [np.array([1, 2, 3], i32), np.array([2.0, 2.5], f32)])
case("array_equal_i32_f32", "array_equal", jnp.array_equal, [np.array([1, 2], i32), np.array([1.0, 2.0], f32)], equal_nan=False)
case("logaddexp_i32_f32", "logaddexp", jnp.logaddexp, [np.array([0, 1, -3], i32), np.array([0.5, -1, 2], f32)])
case("outer_i8_f32", "outer", jnp.outer, [i8a, np.array([0.5, -2], f32)])
case("vdot_i8_i32", "vdot", jnp.vdot, [i8a, np.array([1, -2, 3, 1000], i32)])
# logaddexp / log_sigmoid
la = np.array([0, 1, -1, 100, -100, inf, -inf, inf, nan, 3, -inf], f32)
lb = np.array([0, 2, -1, 99, -101, inf, -inf, -inf, 1, -50, 5], f32)
case("logaddexp", "logaddexp", jnp.logaddexp, [la, lb])
case("log_sigmoid", "log_sigmoid", jax.nn.log_sigmoid, [np.array([0, 1, -1, 30, -30, 100, -100, inf, -inf, nan], f32)])
# outer / vdot
case("outer", "outer", jnp.outer, [x23, np.array([1, -1, 2], f32)])
case("vdot", "vdot", jnp.vdot, [x23, x23.reshape(3, 2) * 2])
case("vdot_int", "vdot", jnp.vdot, [np.array([1, 2, 3], i32), np.array([4, -5, 6], i32)])
# unravel_index
case("unravel_index", "unravel_index", lambda i: jnp.unravel_index(i, (2, 3, 4)),
     [np.array([0, 5, 23, -1, -24, 24, 100, -25, -100], i32)], shape=[2, 3, 4])
# any / all
case("any_axis1", "any", lambda x: jnp.any(x, axis=1), [cz], axes=[1], keepdims=False)
case("all_axis0_keep", "all", lambda x: jnp.all(x, axis=0, keepdims=True), [cz], axes=[0], keepdims=True)
case("any_empty", "any", lambda x: jnp.any(x, axis=0), [np.zeros((0, 3), f32)], axes=[0], keepdims=False)
case("all_empty", "all", lambda x: jnp.all(x, axis=0), [np.zeros((0, 3), f32)], axes=[0], keepdims=False)

# Key paths (jax.tree.leaves_with_path + keystr) of dataclasses holding lists, as
# the crate's derived structs hold Vecs: tests/ops_parity.rs builds the same trees.
import dataclasses
from jax.tree_util import keystr


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: float
    b: float


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Model:
    layers: list
    step: float


m = Model(layers=[Layer(1., 2.), Layer(3., 4.)], step=5.)
tree_paths = {
    "model": [keystr(p) for p, _ in jax.tree.leaves_with_path(m)],
    "model_simple_slash": [keystr(p, simple=True, separator="/") for p, _ in jax.tree.leaves_with_path(m)],
    "tuple_model_list": [keystr(p) for p, _ in jax.tree.leaves_with_path((m, [6.]))],
}

# jnp.promote_types for every pair of the crate's element types, with 64-bit
# types enabled (the crate has them): the lattice itself.
jax.config.update("jax_enable_x64", True)
ptypes = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "bfloat16", "float16", "float32", "float64", "complex64", "complex128"]
pdt = {t: (jnp.bfloat16 if t == "bfloat16" else np.dtype(t)) for t in ptypes}
promote = {a: {b: str(jnp.promote_types(pdt[a], pdt[b])) for b in ptypes} for a in ptypes}
jax.config.update("jax_enable_x64", False)

out = {
    "jax_version": jax.__version__,
    "promote_types_x64": promote,
    "tree_paths": tree_paths,
    "script": "bench/record_parity_jax.py",
    "backend": "cpu",
    "x64": False,
    "cases": cases,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "parity_jax.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print(f"wrote {len(cases)} cases to {os.path.normpath(path)}")
