#!/usr/bin/env python3
"""Record optax's learning-rate schedules (optax 0.2.8, float64 on the host) for
tests/nn.rs (the `nn::Schedule` values, on the host and in the program).

Setup (once):  python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax==0.10.2 optax==0.2.8
Run:           /tmp/jaxenv/bin/python scripts/record_optax_schedules.py
Writes tests/data/jax/schedules.json: per schedule its parameters and its value at
steps 0..=STEPS.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
import optax  # noqa: E402

STEPS = 60
cases = [
    ("constant", {"value": 0.01}, optax.constant_schedule(0.01)),
    ("exponential_decay", {"init": 0.1, "transition_steps": 7, "decay_rate": 0.5, "staircase": False},
     optax.exponential_decay(0.1, 7, 0.5, staircase=False)),
    ("exponential_decay", {"init": 0.1, "transition_steps": 7, "decay_rate": 0.5, "staircase": True},
     optax.exponential_decay(0.1, 7, 0.5, staircase=True)),
    ("cosine_decay", {"init": 0.2, "decay_steps": 40, "alpha": 0.1},
     optax.cosine_decay_schedule(0.2, 40, alpha=0.1)),
    ("linear", {"init": 1e-3, "end": 1e-4, "transition_steps": 25},
     optax.linear_schedule(1e-3, 1e-4, 25)),
    ("warmup_cosine_decay", {"init": 0.0, "peak": 1e-2, "warmup_steps": 10, "decay_steps": 50, "end": 1e-4},
     optax.warmup_cosine_decay_schedule(0.0, 1e-2, 10, 50, 1e-4)),
    ("polynomial", {"init": 1e-2, "end": 1e-4, "power": 2.0, "transition_steps": 30, "transition_begin": 5},
     optax.polynomial_schedule(1e-2, 1e-4, 2.0, 30, 5)),
    ("polynomial", {"init": 3e-4, "end": 0.0, "power": 1.0, "transition_steps": 40, "transition_begin": 0},
     optax.polynomial_schedule(3e-4, 0.0, 1.0, 40, 0)),
    ("piecewise_constant", {"init": 0.1, "boundaries_and_scales": [[10, 0.5], [30, 0.1], [20, 0.5]]},
     optax.piecewise_constant_schedule(0.1, {10: 0.5, 30: 0.1, 20: 0.5})),
]
out = [{"kind": k, "params": p, "values": [float(f(i)) for i in range(STEPS + 1)]} for k, p, f in cases]
path = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "jax", "schedules.json")
with open(path, "w") as fh:
    json.dump({"optax": optax.__version__, "cases": out}, fh, indent=1)
print("wrote", path)
