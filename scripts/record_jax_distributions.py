#!/usr/bin/env python3
"""Record jax.random's distributions (jax 0.10.2, CPU) for tests/distributions.rs.

The samplers beyond those of scripts/record_jax_samplers.py: exponential, laplace,
logistic, cauchy, rademacher, maxwell, double_sided_maxwell, rayleigh, pareto,
weibull_min, lognormal, triangular, geometric, wald, and the gamma family (gamma,
loggamma, beta, dirichlet, chisquare, f, t, generalized_normal, ball) and more. Each
case runs eagerly, as a user would, for a few seeds with the default threefry2x32
keys (x64 off, float32); a second process with jax_enable_x64 records the float64
cases. Array arguments are passed as arrays, and tests/distributions.rs passes them
as parameters, so neither side folds them at compile time. Floats are stored as
their bit patterns (u32 for f32, u64 for f64).

Setup (once):  . bench/jax_venv.sh   (a venv with jax==0.10.2)
Run:           $VENV/bin/python scripts/record_jax_distributions.py
Writes tests/data/jax/distributions.json.
"""
import json
import os
import subprocess
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax",
                   "distributions.json")
SEEDS = [0, 42, 1234]
INF = float("inf")


def enc(a):
    """An array as {dtype, dims, data}: floats by their bits."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        data = a.view(np.uint32)
    elif a.dtype == np.float64:
        data = a.view(np.uint64)
    elif a.dtype == np.bool_:
        data = a.astype(np.uint8)
    else:
        data = a
    return {"dtype": str(a.dtype), "dims": list(a.shape), "data": [int(v) for v in data.ravel()]}


def f32(x):
    return np.asarray(x, np.float32)


def cases_f32(jax, random, jnp):
    """(name, args, fn(key) -> array[, seeds]); the names are matched in
    tests/distributions.rs, which makes the same call."""
    c = []
    one = [0]
    for name in ["exponential", "laplace", "logistic", "cauchy"]:
        fn = getattr(random, name)
        c.append((name, {}, lambda k, fn=fn: fn(k, (2, 5))))
        c.append((name + "_512", {}, lambda k, fn=fn: fn(k, (512,)), one))
    c.append(("rademacher", {}, lambda k: random.rademacher(k, (10,))))
    c.append(("rademacher_f32", {}, lambda k: random.rademacher(k, (6,), jnp.float32)))
    c.append(("maxwell", {}, lambda k: random.maxwell(k, (2, 3))))
    c.append(("maxwell_512", {}, lambda k: random.maxwell(k, (512,)), one))
    c.append(("dsmaxwell", {"loc": 1.5, "scale": 2.0},
              lambda k: random.double_sided_maxwell(k, 1.5, 2.0, (5,))))
    dloc = f32([0.0, -1.0, 10.0])
    c.append(("dsmaxwell_arrays", {"loc": enc(dloc)},
              lambda k: random.double_sided_maxwell(k, dloc, 0.5, (4,))))
    c.append(("rayleigh", {"scale": 2.0}, lambda k: random.rayleigh(k, 2.0, (7,))))
    c.append(("rayleigh_512", {"scale": 1.0}, lambda k: random.rayleigh(k, 1.0, (512,)), one))
    sc = f32([[0.5], [3.0]])
    c.append(("rayleigh_array", {"scale": enc(sc)}, lambda k: random.rayleigh(k, sc, (2, 3))))
    c.append(("pareto", {"b": 3.0}, lambda k: random.pareto(k, 3.0, (7,))))
    c.append(("pareto_512", {"b": 0.7}, lambda k: random.pareto(k, 0.7, (512,)), one))
    pb = f32([0.1, 1.0, 50.0])
    c.append(("pareto_array", {"b": enc(pb)}, lambda k: random.pareto(k, pb, (2, 3))))
    c.append(("weibull", {"scale": 2.0, "concentration": 1.5},
              lambda k: random.weibull_min(k, 2.0, 1.5, (7,))))
    c.append(("weibull_512", {"scale": 1.0, "concentration": 0.3},
              lambda k: random.weibull_min(k, 1.0, 0.3, (512,)), one))
    wc = f32([0.5, 1.0, 4.0])
    c.append(("weibull_arrays", {"scale": enc(sc), "concentration": enc(wc)},
              lambda k: random.weibull_min(k, sc, wc, (2, 3))))
    c.append(("lognormal", {"sigma": 0.5}, lambda k: random.lognormal(k, 0.5, (7,))))
    c.append(("lognormal_512", {"sigma": 2.0}, lambda k: random.lognormal(k, 2.0, (512,)), one))
    ls = f32([0.0, 1.0, 3.0])
    c.append(("lognormal_array", {"sigma": enc(ls)}, lambda k: random.lognormal(k, ls, (2, 3))))
    for name, l, m, r in [("triangular", -1.0, 0.5, 3.0), ("triangular_at_left", 0.0, 0.0, 1.0),
                          ("triangular_at_right", -2.0, 5.0, 5.0)]:
        c.append((name, {"left": l, "mode": m, "right": r},
                  lambda k, l=l, m=m, r=r: random.triangular(k, l, m, r, (9,))))
    tl, tm, tr = f32([[0.0], [-5.0]]), f32([0.5, 0.0, 0.9]), f32([[1.0], [5.0]])
    c.append(("triangular_arrays", {"left": enc(tl), "mode": enc(tm), "right": enc(tr)},
              lambda k: random.triangular(k, tl, tm, tr, (2, 3))))
    c.append(("triangular_512", {"left": 0.0, "mode": 0.25, "right": 1.0},
              lambda k: random.triangular(k, 0.0, 0.25, 1.0, (512,)), one))
    for name, p in [("geometric", 0.3), ("geometric_1", 1.0), ("geometric_0", 0.0),
                    ("geometric_tiny", 1e-6)]:
        c.append((name, {"p": p}, lambda k, p=p: random.geometric(k, p, (10,))))
    gp = f32([0.01, 0.5, 0.999])
    c.append(("geometric_array", {"p": enc(gp)}, lambda k: random.geometric(k, gp, (2, 3))))
    c.append(("geometric_512", {"p": 0.2}, lambda k: random.geometric(k, 0.2, (512,)), one))
    c.append(("wald", {"mean": 1.5}, lambda k: random.wald(k, 1.5, (7,))))
    c.append(("wald_512", {"mean": 0.3}, lambda k: random.wald(k, 0.3, (512,)), one))
    wm = f32([0.01, 1.0, 100.0])
    c.append(("wald_array", {"mean": enc(wm)}, lambda k: random.wald(k, wm, (2, 3))))
    # The gamma family: a rejection loop per element (small and large alphas, the
    # boost below 1).
    for name, a in [("gamma", 2.5), ("gamma_1", 1.0), ("gamma_half", 0.5), ("gamma_tiny", 1e-3),
                    ("gamma_huge", 1e4)]:
        c.append((name, {"a": a}, lambda k, a=a: random.gamma(k, a, (7,))))
    ga = f32([[0.1, 1.0, 10.0], [0.01, 3.0, 300.0]])
    c.append(("gamma_array", {"a": enc(ga)}, lambda k: random.gamma(k, ga, (2, 3))))
    c.append(("gamma_512", {"a": 0.7}, lambda k: random.gamma(k, 0.7, (512,)), one))
    for name, a in [("loggamma", 3.0), ("loggamma_tiny", 1e-3)]:
        c.append((name, {"a": a}, lambda k, a=a: random.loggamma(k, a, (7,))))
    c.append(("loggamma_array", {"a": enc(ga)}, lambda k: random.loggamma(k, ga, (2, 3))))
    c.append(("beta", {"a": 0.5, "b": 2.0}, lambda k: random.beta(k, 0.5, 2.0, (7,))))
    bb = f32([0.1, 1.0, 30.0])
    c.append(("beta_arrays", {"a": enc(ga), "b": enc(bb)}, lambda k: random.beta(k, ga, bb, (2, 3))))
    da = f32([0.5, 1.0, 2.0])
    c.append(("dirichlet", {"alpha": enc(da)}, lambda k: random.dirichlet(k, da)))
    c.append(("dirichlet_batch", {"alpha": enc(ga)}, lambda k: random.dirichlet(k, ga, (4, 2))))
    c.append(("chisquare", {"df": 3.0}, lambda k: random.chisquare(k, 3.0, (7,))))
    c.append(("chisquare_array", {"df": enc(bb)}, lambda k: random.chisquare(k, bb, (2, 3))))
    c.append(("f", {"dfnum": 2.0, "dfden": 5.0}, lambda k: random.f(k, 2.0, 5.0, (7,))))
    c.append(("t", {"df": 4.0}, lambda k: random.t(k, 4.0, (7,))))
    c.append(("t_array", {"df": enc(bb)}, lambda k: random.t(k, bb, (2, 3))))
    for name, pv in [("gennorm", 1.5), ("gennorm_half", 0.5)]:
        c.append((name, {"p": pv}, lambda k, pv=pv: random.generalized_normal(k, pv, (7,))))
    c.append(("ball", {"p": 2.0}, lambda k: random.ball(k, 3, 2.0, (4,))))
    c.append(("ball_p1", {"p": 1.0}, lambda k: random.ball(k, 2, 1.0, (3,))))
    # Poisson: Knuth below 10, rejection (with lgamma) from 10.
    for name, lam in [("poisson", 3.0), ("poisson_0", 0.0), ("poisson_25", 25.0),
                      ("poisson_big", 1e4)]:
        c.append((name, {"lam": lam}, lambda k, lam=lam: random.poisson(k, lam, (7,))))
    pl = f32([[0.5, 9.99, 10.0], [50.0, 0.0, 1000.0]])
    c.append(("poisson_array", {"lam": enc(pl)}, lambda k: random.poisson(k, pl, (2, 3))))
    c.append(("poisson_512", {"lam": 12.0}, lambda k: random.poisson(k, 12.0, (512,)), one))
    # Binomial: inversion where n·min(p, 1-p) <= 10, BTRS elsewhere.
    for name, n, pv in [("binomial", 10.0, 0.3), ("binomial_btrs", 100.0, 0.4),
                        ("binomial_flip", 100.0, 0.8), ("binomial_inv_flip", 5.0, 0.9)]:
        c.append((name, {"n": n, "p": pv},
                  lambda k, n=n, pv=pv: random.binomial(k, n, pv, (7,))))
    bn = f32([[0.0, 1.0, 1000.0], [-1.0, INF, 50.0]])
    bp = f32([[0.5, 0.0, 1.0], [0.3, 0.3, 0.99]])
    c.append(("binomial_arrays", {"n": enc(bn), "p": enc(bp)},
              lambda k: random.binomial(k, bn, bp, (2, 3))))
    c.append(("binomial_512", {"n": 40.0, "p": 0.5},
              lambda k: random.binomial(k, 40.0, 0.5, (512,)), one))
    # Multinomial: a binomial per category of what remains.
    mp = f32([0.2, 0.3, 0.5])
    c.append(("multinomial", {"n": 10.0, "p": enc(mp)}, lambda k: random.multinomial(k, 10.0, mp)))
    mp4 = f32([0.1, 0.0, 0.6, 0.3])
    c.append(("multinomial_4", {"n": 100.0, "p": enc(mp4)},
              lambda k: random.multinomial(k, 100.0, mp4)))
    mn = f32([5.0, 50.0])
    mp23 = f32([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])
    c.append(("multinomial_batch", {"n": enc(mn), "p": enc(mp23)},
              lambda k: random.multinomial(k, mn, mp23)))
    # Through linear algebra (JAX calls LAPACK here: tests/distributions.rs compares
    # these within a tolerance).
    mean = f32([1.0, -2.0, 0.5])
    cov = f32([[2.0, 0.3, -0.2], [0.3, 1.0, 0.4], [-0.2, 0.4, 0.5]])
    c.append(("mvn", {"mean": enc(mean), "cov": enc(cov)},
              lambda k: random.multivariate_normal(k, mean, cov, (4,))))
    mean2 = f32([[0.0, 0.0, 0.0], [10.0, 20.0, 30.0]])
    c.append(("mvn_batch", {"mean": enc(mean2), "cov": enc(cov)},
              lambda k: random.multivariate_normal(k, mean2, cov)))
    c.append(("orthogonal_3", {}, lambda k: random.orthogonal(k, 3)))
    c.append(("orthogonal_4x2", {}, lambda k: random.orthogonal(k, 4, (2,), m=2)))
    c.append(("orthogonal_2x4", {}, lambda k: random.orthogonal(k, 2, m=4)))
    return c


def cases_f64(jax, random, jnp):
    F = jnp.float64
    gp = np.asarray([0.01, 0.5, 0.999])
    return [
        ("exponential_f64", {}, lambda k: random.exponential(k, (2, 5), F)),
        ("laplace_f64", {}, lambda k: random.laplace(k, (2, 5), F)),
        ("logistic_f64", {}, lambda k: random.logistic(k, (2, 5), F)),
        ("cauchy_f64", {}, lambda k: random.cauchy(k, (2, 5), F)),
        ("rayleigh_f64", {"scale": 2.0}, lambda k: random.rayleigh(k, 2.0, (7,), F)),
        ("pareto_f64", {"b": 3.0}, lambda k: random.pareto(k, 3.0, (7,), F)),
        ("weibull_f64", {"scale": 2.0, "concentration": 1.5},
         lambda k: random.weibull_min(k, 2.0, 1.5, (7,), F)),
        ("triangular_f64", {"left": -1.0, "mode": 0.5, "right": 3.0},
         lambda k: random.triangular(k, -1.0, 0.5, 3.0, (9,), F)),
        ("geometric_f64", {"p": enc(gp)}, lambda k: random.geometric(k, gp, (2, 3), jnp.int32)),
    ]


def record(x64):
    import jax
    if x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import random
    assert jax.__version__ == "0.10.2", jax.__version__
    assert jax.default_backend() == "cpu"
    out = []
    table = (cases_f64 if x64 else cases_f32)(jax, random, jnp)
    for name, args, fn, *seeds in table:
        for seed in (seeds[0] if seeds else SEEDS):
            key = random.key(seed)
            # Python floats as their repr ('-inf', '2.5'): JSON has no infinities.
            enc_args = {k: (repr(v) if isinstance(v, float) else v) for k, v in args.items()}
            out.append({"name": name, "seed": seed, "args": enc_args,
                        "key": [int(v) for v in np.asarray(random.key_data(key)).ravel()],
                        "out": enc(fn(key))})
    return out


def main():
    if "--x64" in sys.argv:
        json.dump(record(True), sys.stdout)
        return
    import jax
    cases = record(False)
    cases += json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--x64"],
                                       check=True, capture_output=True, text=True).stdout)
    with open(OUT, "w") as fh:
        json.dump({"jax_version": jax.__version__, "cases": cases}, fh, separators=(",", ":"),
                  allow_nan=False)
        fh.write("\n")
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
