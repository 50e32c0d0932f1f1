#!/usr/bin/env python3
"""Records Catch trajectories from the anchor's own numpy Catch (`NumpyCatch` in
shared/bench-anchors/jax_hostloop_catch.py) for tests/rl.rs.

The anchor file imports jax at its top; only its constants and the `NumpyCatch` class
are taken (parsed with `ast`, executed with numpy alone), so numpy is the only
requirement. The reset columns come from a recording stand-in for the anchor's
generator, so the Rust test can replay exactly the columns the anchor used.

Usage: python3 scripts/record_catch_anchor.py [ANCHOR] > tests/data/catch_anchor.json
(ANCHOR defaults to /work/shared/bench-anchors/jax_hostloop_catch.py).
"""
import ast
import json
import sys

import numpy as np

ENVS, STEPS, SEED = 8, 60, 20261122


def load_anchor(path):
    tree = ast.parse(open(path).read())
    keep = [
        node for node in tree.body
        if (isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Tuple) and "ROWS" in [e.id for e in t.elts] for t in node.targets))
        or (isinstance(node, ast.ClassDef) and node.name == "NumpyCatch")
    ]
    if len(keep) != 2:
        sys.exit(f"{path}: expected the ROWS/COLS assignment and class NumpyCatch")
    module = ast.Module(body=keep, type_ignores=[])
    namespace = {"np": np}
    exec(compile(module, path, "exec"), namespace)
    return namespace


class RecordingRng:
    """Stands in for the anchor's numpy generator and records every draw."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.columns = []

    def integers(self, low, high, size):
        out = self.rng.integers(low, high, size)
        self.columns.extend(int(c) for c in out)
        return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/bench-anchors/jax_hostloop_catch.py"
    ns = load_anchor(path)
    rows, cols = ns["ROWS"], ns["COLS"]
    rng = RecordingRng(SEED)
    env = ns["NumpyCatch"](ENVS, rng)
    actions_rng = np.random.default_rng(SEED + 1)
    steps = []
    initial = {"ball_y": env.ball_y.tolist(), "ball_x": env.ball_x.tolist(),
               "paddle_x": env.paddle_x.tolist(),
               "board_ones": [np.flatnonzero(b).tolist() for b in env.render().copy()]}
    for _ in range(STEPS):
        action = actions_rng.integers(0, 3, ENVS)
        reward, term = env.step(action)
        board = env.render().copy()
        steps.append({
            "actions": action.tolist(),
            "reward": reward.tolist(),
            "terminal": term.tolist(),
            "ball_y": env.ball_y.tolist(),
            "ball_x": env.ball_x.tolist(),
            "paddle_x": env.paddle_x.tolist(),
            "board_ones": [np.flatnonzero(b).tolist() for b in board],
        })
    json.dump({"source": "NumpyCatch of jax_hostloop_catch.py", "rows": rows, "columns": cols,
               "envs": ENVS, "seed": SEED, "numpy": np.__version__,
               "columns_drawn": rng.columns, "initial": initial, "steps": steps},
              sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
