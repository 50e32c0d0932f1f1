#!/usr/bin/env bash
# The fleet (examples/distributed.rs --bench: actor processes, one learner, NATS
# JetStream on 127.0.0.1) against its Ray twin (bench/ray_catch_actors.py: the
# same Catch rollouts, network and learner in JAX on Ray's actor pool), at equal
# actor counts, alternated in one run. Both train for SECONDS at each count and
# print env_steps_per_s over their measuring window.
# Usage: bench/distributed_vs_ray.sh [SECONDS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
repeats=${2:-1}
cargo build -q --release --features fleet --example distributed
bin=${CARGO_TARGET_DIR:-target}/release/examples/distributed
. bench/ray_venv.sh
for r in $(seq "$repeats"); do
    for n in 1 2 4; do
        echo "== repeat $r, $n actors; load $(cut -d' ' -f1 /proc/loadavg)"
        ray=$("$RAY_PY" bench/ray_catch_actors.py --actors "$n" --seconds "$seconds" 2>/dev/null \
            | grep -o 'env_steps_per_s=[0-9.]*' | head -1 | cut -d= -f2)
        fleet=$("$bin" --actors "$n" --bench "$seconds" 2>/dev/null \
            | grep -o 'env_steps_per_s=[0-9.]*' | cut -d= -f2)
        echo "ray_env_steps_per_s=$ray fleet_env_steps_per_s=$fleet ratio=$(python3 -c "print(f'{$fleet/$ray:.2f}')")"
    done
done
