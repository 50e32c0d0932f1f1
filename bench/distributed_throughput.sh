#!/usr/bin/env bash
# End-to-end env steps/s of the fleet (examples/distributed.rs: actors in
# processes, one learner, NATS JetStream on 127.0.0.1) with 1, 2 and 4 actor
# processes, next to the same actor work in one process with no transport, and
# the policy-lag distribution of each run (stderr's histogram line).
# Each fleet run trains Catch until the greedy evaluation is 1.0; its
# env_steps_per_s counts the trajectories the learner received over that time.
# Usage: bench/distributed_throughput.sh [ROUNDS_IN_PROCESS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-200}
cargo build -q --release --features fleet --example distributed
bin=${CARGO_TARGET_DIR:-target}/release/examples/distributed
echo "in-process stepper (32 envs x 16 steps per round, $rounds rounds):"
"$bin" --in-process "$rounds"
for n in 1 2 4; do
    echo "--actors $n:"
    "$bin" --actors "$n" 2>"/tmp/fleet-bench-$n.err" | tail -n 1
    grep "policy lag histogram" "/tmp/fleet-bench-$n.err"
done
