#!/usr/bin/env bash
# The one device check for a session that is lent the GPU machine (see DEVELOPERS.md):
#   here:  bash .ci/gpu-session.sh prepare      (builds wheels/ with chainer and espnet, no GPU needed)
#   there: bash .ci/gpu-session.sh run          (through the device tool, carrying wheels/)
# `run` installs the two pure-Python wheels into a venv that sees the machine's NumPy and CuPy,
# runs the GPU suites, a GPU report, an audit, and writes everything under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
  rm -rf wheels && mkdir -p wheels
  .venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w wheels chainer==7.8.1
  .venv/bin/python -m pip download -q --no-deps -d wheels espnet==202511
  # The GPU machine has Python 3.12, NumPy and CuPy but maybe not the rest, and no network.
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d wheels \
    pandas python-dateutil tzdata six hypothesis attrs sortedcontainers threadpoolctl tabulate jinja2 \
    markupsafe matplotlib contourpy cycler fonttools kiwisolver packaging pillow pyparsing pytest \
    iniconfig pluggy pygments filelock typing_extensions protobuf setuptools xxhash blake3 \
    jsonschema jsonschema-specifications referencing rpds-py
  du -sh wheels; ls wheels | wc -l ;;
run)
  : "${OUT:?OUT must be set (the device tool sets it)}"
  python3 -m venv --system-site-packages /tmp/hv && . /tmp/hv/bin/activate
  # Only what the machine lacks: its own NumPy and CuPy stay as they are.
  for w in wheels/*.whl; do
    name=$(basename "$w" | cut -d- -f1 | tr _ -)
    python -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$name" 2>/dev/null || \
      pip install -q --no-deps --no-index "$w" 2>&1 | tail -1
  done
  export PYTHONPATH="$PWD" HARNESS_PROFILE=ci
  python -m harness env --json > "$OUT/env.json" 2> "$OUT/env.err"
  python -c "import pandas, hypothesis, threadpoolctl" 2> "$OUT/missing.txt" || echo "missing python packages: see missing.txt"
  timeout 240 python -m pytest -p no:cacheprovider -q -m gpu --device gpu suites/ > "$OUT/gpu-suites.txt" 2>&1
  echo "gpu suites rc=$?" | tee -a "$OUT/summary.txt"
  timeout 200 python -m harness report --devices all --quiet --out "$OUT/report" > "$OUT/report.txt" 2>&1
  echo "report rc=$?" | tee -a "$OUT/summary.txt"
  timeout 100 python -m harness audit --devices all --out "$OUT/audit-gpu.json" --quiet > "$OUT/audit.txt" 2>&1
  echo "audit rc=$?" | tee -a "$OUT/summary.txt"
  rm -rf "$OUT/report/arrays" ;;
*) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
