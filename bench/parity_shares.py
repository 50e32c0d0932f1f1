#!/usr/bin/env python3
"""The two JAX parity shares of issue 24, from the parity page and the surface list.

    python3 bench/parity_shares.py [guide/16-jax-parity.md] [../shared/jax-surface.tsv]

Reads every table row `| `name` | rust paths | status |` of the page and the
`uses` column of the TSV (one name a line: name, uses, repos, ...), then prints
the share of uses and the share of names whose status is `same`, and the count of
rows per status. Exits 1 if a TSV name has no row or a row names no TSV name.
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
page = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "guide", "16-jax-parity.md")
tsv = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "shared", "jax-surface.tsv")
if not os.path.exists(tsv):
    tsv = "/work/shared/jax-surface.tsv"

uses = {}
for line in open(tsv):
    if line.startswith("#") or not line.strip():
        continue
    f = line.rstrip("\n").split("\t")
    uses[f[0]] = int(f[1])

status = {}
row = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*([^|]+?)\s*\|\s*$")
for line in open(page):
    m = row.match(line)
    if m:
        status[m.group(1)] = m.group(3).split(":")[0].strip()

missing = sorted(set(uses) - set(status))
extra = sorted(set(status) - set(uses))
if missing or extra:
    print("no row for:", missing, "rows not in the TSV:", extra)
    sys.exit(1)

total = sum(uses.values())
same = [n for n in uses if status[n] == "same"]
su = sum(uses[n] for n in same)
print(f"same share of uses:  {su}/{total} = {100 * su / total:.1f}%")
print(f"same share of names: {len(same)}/{len(uses)} = {100 * len(same) / len(uses):.1f}%")
for s in ["same", "differs", "missing", "n/a"]:
    print(f"{s:8} {sum(1 for n in uses if status[n] == s):4} names, {sum(uses[n] for n in uses if status[n] == s):5} uses")
