# Sourced (from the repository root) by the side-by-side scripts: sets VENV to a
# virtual environment with the JAX the anchors were measured with, pinned here
# once. It is target/jax-venv, made on first use; JAX_VENV=/path/to/venv uses
# another one.
VENV=${JAX_VENV:-target/jax-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import jax' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet jax==0.10.2
fi
# gymnasium, for scripts/record_gymnasium.py (the classic-control recordings in
# tests/data/gymnasium_*.json), added to a venv that lacks it.
if ! "$VENV/bin/python" -c 'import gymnasium' 2>/dev/null; then
    "$VENV/bin/pip" install --quiet gymnasium==1.4.0
fi
# flatbuffers, jax.export's optional dependency (serialize/deserialize), for
# scripts/run_stablehlo_in_jax.py's round trip, added to a venv that lacks it.
if ! "$VENV/bin/python" -c 'import flatbuffers' 2>/dev/null; then
    "$VENV/bin/pip" install --quiet flatbuffers==25.12.19
fi
