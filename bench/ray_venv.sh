# Sourced (from the repository root) by the Ray side of issue 26's throughput
# comparison (bench/ray_catch_actors.py): sets RAY_VENV to a virtual environment
# with Ray and the JAX the other anchors use (the pin of bench/jax_venv.sh), and
# RAY_PY to its python. It is target/ray-venv, made on first use; RAY_VENV=/path
# uses another one. Idempotent: a venv that already imports every pinned version
# is left as it is.
#
#   . bench/ray_venv.sh && "$RAY_PY" bench/ray_catch_actors.py --actors 2 --seconds 20
#
# Only these four are asked for (their own dependencies come with them); no Ray
# extras (no dashboard, no ray[default]).
RAY_VENV=${RAY_VENV:-target/ray-venv}
RAY_PINS="ray==2.60.0 jax==0.10.2 optax==0.2.8 numpy==2.4.6"
_ray_venv_ok() {
    "$RAY_VENV/bin/python" - 2>/dev/null <<'EOF'
import importlib.metadata as m
want = {"ray": "2.60.0", "jax": "0.10.2", "optax": "0.2.8", "numpy": "2.4.6"}
raise SystemExit(any(m.version(k) != v for k, v in want.items()))
EOF
}
if [ ! -x "$RAY_VENV/bin/python" ] || ! _ray_venv_ok; then
    [ -x "$RAY_VENV/bin/python" ] || python3 -m venv "$RAY_VENV"
    # shellcheck disable=SC2086 # RAY_PINS is a list of requirements
    "$RAY_VENV/bin/pip" install --quiet $RAY_PINS
fi
unset -f _ray_venv_ok
RAY_PY="$RAY_VENV/bin/python"
echo "RAY_PY=$RAY_PY"
