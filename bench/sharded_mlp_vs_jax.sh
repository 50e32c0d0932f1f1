#!/usr/bin/env bash
# The sharded MLP step (examples/sharded_mlp.rs) and JAX's (bench/sharded_mlp_jax.py)
# on 8 host CPU devices, run alternately ROUNDS times (default 3) for each batch
# size given (default 1024 8192). Run from the repository root.
set -euo pipefail
. bench/jax_venv.sh
ROUNDS=${ROUNDS:-3}
BATCHES=${*:-1024 8192}
cargo build --release --example sharded_mlp >/dev/null 2>&1
BIN=${CARGO_TARGET_DIR:-target}/release/examples/sharded_mlp
for b in $BATCHES; do
    for r in $(seq "$ROUNDS"); do
        echo "== batch $b, round $r: xlaclient"
        "$BIN" "$b" 50 2>/dev/null
        echo "== batch $b, round $r: jax"
        XLA_FLAGS=--xla_force_host_platform_device_count=8 "$VENV/bin/python" bench/sharded_mlp_jax.py "$b" 50 2>/dev/null
    done
done
