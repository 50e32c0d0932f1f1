#!/usr/bin/env bash
# Leak check: 1,000,000 execute calls (upload, execute, download), 10,000
# compile-and-drop cycles and 100,000 pending executions polled once and dropped
# on the plugin under test (PJRT_PLUGIN_PATH or the default CPU plugin), resident
# memory sampled after a warm-up and at the end. Exits non-zero if any phase grew
# by more than 1% after its warm-up.
#
#   scripts/leak_check.sh                   # full run (minutes)
#   scripts/leak_check.sh 20000 200 20000   # quick run: CALLS COMPILES DROPS
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q --release --example leak_check -- "$@"
