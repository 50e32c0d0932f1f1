#!/usr/bin/env python3
"""Records XLA's default DebugOptions, serialized, into src/pjrt/xla_debug_defaults.bin.

A CompileOptionsProto that carries a DebugOptions message makes XLA use that message
in place of all its defaults (unset fields read as zero, and then every CPU compile
fails), so xlaclient sends the complete default set first and its own settings after
it. The set comes from jaxlib's `CompileOptions()`, which fills the build options
with XLA's defaults (XLA_FLAGS must be unset, or it would record them too).

Run with the JAX venv (python3 -m venv .jaxenv && .jaxenv/bin/pip install jax==0.10.2):
    .jaxenv/bin/python scripts/record_debug_options.py
"""
import os
import sys

import jax
from jax._src.lib import xla_client as xc


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def field(message, number):
    """The bytes of the first length-delimited field `number` of a serialized message."""
    i = 0
    while i < len(message):
        key, i = varint(message, i)
        wire = key & 7
        if wire == 0:
            _, i = varint(message, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(message, i)
            if key >> 3 == number:
                return message[i : i + n]
            i += n
        else:
            sys.exit(f"unexpected wire type {wire}")
    sys.exit(f"field {number} not found")


if os.environ.get("XLA_FLAGS"):
    sys.exit("unset XLA_FLAGS first: it would be recorded as a default")
options = xc.CompileOptions().SerializeAsString()
# CompileOptionsProto.executable_build_options = 3; ExecutableBuildOptionsProto.debug_options = 3.
debug = field(field(options, 3), 3)
out = os.path.join(os.path.dirname(__file__), "..", "src", "pjrt", "xla_debug_defaults.bin")
with open(out, "wb") as f:
    f.write(debug)
print(f"jax {jax.__version__}: {len(debug)} bytes of DebugOptions -> {os.path.normpath(out)}")
