"""Runs StableHLO text printed by xlaclient (`Computation::to_stablehlo`) in JAX
and compares its outputs with the ones the PJRT plugin gave (issue 22, item 3's
reverse direction).

Usage (JAX 0.10.2: `. bench/jax_venv.sh`):

    $VENV/bin/python scripts/run_stablehlo_in_jax.py DIR

DIR holds `program.mlir` and `case.json` (`{"inputs": [...], "outputs": [...]}`,
each array `{"dtype", "dims", "data"}`), as `examples/stablehlo_to_jax.rs` writes
them. The text is parsed in JAX's MLIR context, serialized as a StableHLO portable
artifact (as `jax.export` does), wrapped in a `jax.export.Exported` with the
input and output avals read from `case.json`, and called under `jax.jit`. The
outputs must equal xlaclient's: integers exactly, floats within 1e-6 (relative);
the last line is `max_abs_err=…`, the exit status 1 on a mismatch.
"""

import json
import sys
from pathlib import Path

import jax
import numpy as np
from jax import export
from jax._src.export import _export
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir


def arrays(entries):
    return [
        np.asarray(e["data"], dtype=e["dtype"]).reshape(e["dims"]) for e in entries
    ]


def exported(text, inputs, outputs):
    """A `jax.export.Exported` of the module `text` (its `@main` taking `inputs`'
    types and giving `outputs`')."""
    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        serialized = _export._module_to_bytecode(module)
    in_avals = tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in inputs)
    out_avals = tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in outputs)
    n, m = len(in_avals), len(out_avals)
    return export.Exported(
        fun_name="main",
        in_tree=jax.tree.structure((tuple(range(n)), {})),
        in_avals=in_avals,
        out_tree=jax.tree.structure(tuple(range(m))),
        out_avals=out_avals,
        _has_named_shardings=False,
        _in_named_shardings=(None,) * n,
        _out_named_shardings=(None,) * m,
        in_shardings_hlo=(None,) * n,
        out_shardings_hlo=(None,) * m,
        nr_devices=1,
        platforms=("cpu",),
        ordered_effects=(),
        unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=serialized,
        calling_convention_version=export.maximum_supported_calling_convention_version,
        module_kept_var_idx=tuple(range(n)),
        uses_global_constants=False,
        _get_vjp=None,
    )


def main():
    d = Path(sys.argv[1] if len(sys.argv) > 1 else "target/stablehlo_to_jax")
    text = (d / "program.mlir").read_text()
    case = json.loads((d / "case.json").read_text())
    inputs = arrays(case["inputs"])
    want = arrays(case["outputs"])
    exp = exported(text, inputs, want)
    # Round-trip through jax.export's own serialization too, where the venv has
    # `flatbuffers` (jax.export's optional dependency).
    try:
        exp = export.deserialize(exp.serialize())
        print("jax.export serialize/deserialize: round-tripped")
    except (ImportError, ValueError) as e:
        # JAX 0.10.2 serializes only an Exported with named shardings, which one
        # built from text has not: the text itself is what JAX runs below.
        print(f"jax.export serialize/deserialize: skipped ({e})")
    got = jax.jit(exp.call)(*inputs)
    worst = 0.0
    ok = True
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            print(f"output {i}: JAX {g.dtype}{list(g.shape)}, xlaclient {w.dtype}{list(w.shape)}")
            ok = False
            continue
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
        worst = max(worst, err)
        if np.issubdtype(w.dtype, np.integer):
            same = np.array_equal(g, w)
        else:
            same = np.allclose(g, w, rtol=1e-6, atol=1e-6)
        exact = np.array_equal(g.view(np.uint8), w.view(np.uint8))
        print(f"output {i}: {w.dtype}{list(w.shape)} max_abs_err={err:.3g} bitwise_equal={exact}")
        ok &= bool(same)
    print(f"jax {jax.__version__}, {len(text.splitlines())} lines of StableHLO")
    print(f"max_abs_err={worst:.3g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
