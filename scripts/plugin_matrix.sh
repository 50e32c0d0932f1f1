#!/usr/bin/env bash
# Runs the whole test suite against each CPU plugin and prints one summary line
# per plugin: the default (PJRT C API 0.115), the legacy one (0.81, fetched by
# the crate itself through the fetch_plugin example), then any plugin paths
# given as arguments.
#
#   scripts/plugin_matrix.sh [/path/to/other_plugin.so ...]
#
# Exits non-zero if the suite failed on any plugin. Full logs go to
# target/plugin-matrix/<n>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=target/plugin-matrix
mkdir -p "$logs"

cargo test --no-run -q 2>&1 | tail -n 20 || { echo "the suite does not build"; exit 1; }

default=$(cargo run -q --example fetch_plugin -- cpu 2>/dev/null || echo "?")
names=("default (cpu, API 0.115) $default")
paths=("")
if legacy=$(cargo run -q --example fetch_plugin -- cpu-legacy); then
  names+=("legacy (cpu-legacy, API 0.81) $legacy")
  paths+=("$legacy")
else
  echo "could not fetch the legacy plugin; skipped"
fi
for p in "$@"; do
  names+=("$p")
  paths+=("$p")
done

summary=()
failed=0
for i in "${!paths[@]}"; do
  log="$logs/$i.log"
  start=$(date +%s)
  if [ -z "${paths[$i]}" ]; then
    env -u PJRT_PLUGIN_PATH cargo test >"$log" 2>&1
  else
    PJRT_PLUGIN_PATH="${paths[$i]}" cargo test >"$log" 2>&1
  fi
  rc=$?
  secs=$(( $(date +%s) - start ))
  passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s+=$1} END {print s+0}')
  fails=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s+=$1} END {print s+0}')
  ignored=$(grep -Eo '[0-9]+ ignored' "$log" | awk '{s+=$1} END {print s+0}')
  if [ $rc -eq 0 ]; then status=ok; else status="FAILED (exit $rc)"; failed=1; fi
  summary+=("$(printf '%-8s passed %5s  failed %3s  ignored %3s  %4ss  log %s  plugin %s' \
    "$status" "$passed" "$fails" "$ignored" "$secs" "$log" "${names[$i]}")")
done

echo
echo "== plugin matrix"
for line in "${summary[@]}"; do echo "$line"; done
exit $failed
