#!/usr/bin/env bash
# Concurrency soak on both CPU plugins: the default (lammps-jax-pjrt-cpu 0.11.2,
# PJRT C API 0.115) and the legacy one (xla-cpu-pjrt 0.0.1, API 0.81, fetched by
# the crate like .ci/run does). Each run is a child process, so a crash of the
# plugin is counted; the example prints one line per run and a final
# `soak: plugin=… runs=R calls=C crashes=K failures=F …` line per plugin.
# Exits non-zero if any run on either plugin crashed, hung or failed.
#
#   scripts/soak.sh                                  # --runs 8 --calls 8000 --threads 8
#   scripts/soak.sh --runs 20 --calls 64000 --seed 7 # arguments go to the example
set -uo pipefail
cd "$(dirname "$0")/.."

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(--runs 8 --calls 8000 --threads 8)
fi

cargo build -q --release --example soak || exit 1
legacy=$(cargo run -q --example fetch_plugin -- cpu-legacy) || exit 1

status=0
echo "== soak on the default CPU plugin"
env -u PJRT_PLUGIN_PATH cargo run -q --release --example soak -- "${args[@]}" || status=1
echo "== soak on the legacy CPU plugin ($legacy)"
PJRT_PLUGIN_PATH="$legacy" cargo run -q --release --example soak -- "${args[@]}" || status=1
exit $status
