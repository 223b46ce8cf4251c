#!/usr/bin/env bash
# The one device check for a session that is lent the GPU machine (see DEVELOPERS.md):
#   here:  bash .ci/gpu-session.sh prepare      (builds wheels/ with chainer and espnet, no GPU needed)
#   there: bash .ci/gpu-session.sh run          (through the device tool, carrying wheels/)
# `run` installs the wheels the machine lacks beside its own NumPy and CuPy, then runs a smoke check,
# a GPU report, the GPU suites and an audit, each with its own time limit, and returns one archive.
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
  W=/tmp/gpu-session && rm -rf "$W" /tmp/site && mkdir -p "$W" /tmp/site
  # The machine's python3 is itself a venv that holds NumPy and CuPy (a venv made from it would not see
  # them): install only the distributions it lacks, into a folder on PYTHONPATH.
  missing=()
  for w in wheels/*.whl; do
    python3 -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$(basename "$w" | cut -d- -f1)" \
      2>/dev/null || missing+=("$w")
  done
  { echo "installing: ${missing[*]##*/}"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${missing[@]}"
  } > "$W/install.txt" 2>&1
  export PYTHONPATH="$PWD:/tmp/site" HARNESS_PROFILE=ci PYTHONUNBUFFERED=1
  # Each step has its own limit and its own log; whatever ran comes back in one archive ($OUT takes 8 files).
  step() {
    local name=$1 limit=$2 t0=$SECONDS rc; shift 2
    timeout -k 5 "$limit" "$@" > "$W/$name.txt" 2>&1; rc=$?
    echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$W/summary.txt"
  }
  # GPU_STEPS picks the steps and their order (a rerun with what the first run could not finish).
  for s in ${GPU_STEPS:-env smoke trajectory report suites audit export}; do
    case $s in
      env) step env 30 python3 -m harness env --json ;;
      smoke) step smoke 60 python3 .ci/gpu_smoke.py ;;
      report) step report "${GPU_REPORT_S:-240}" python3 -m harness report --devices all \
                --shrink-budget 20 --quiet --out "$W/report" ;;
      suites) step suites "${GPU_SUITES_S:-100}" python3 -m pytest -p no:cacheprovider -q -rfEs --durations=15 \
                -m gpu --device gpu -n 4 suites/ ;;
      # A short training trajectory of each LM run to run on the GPU: L.EmbedID's atomicAdd backward against
      # ESPnet's deterministic one (the first differing step, or bit-identical). TRAJECTORY_DEVICE=cpu: a dry run.
      trajectory) for lm in chainer_lm espnet_rnnlm; do
                    python3 -c "import sys; from harness.generate.model_cases import model_case as m
print(m(sys.argv[1], 'ci', seed=7).to_json())" "$lm" > "$W/$lm.json"
                    step "trajectory-$lm" 90 python3 -c "import sys; from harness.verbs.trajectory import \
TrajectoryOptions as O, trajectory; sys.exit(trajectory(O(sys.argv[1], 'model.' + sys.argv[2], device=sys.argv[3],
out=sys.argv[4])))" "$W/$lm.json" "$lm" "${TRAJECTORY_DEVICE:-gpu}" "$W/trajectory-$lm"
                  done ;;
      audit) step audit "${GPU_AUDIT_S:-45}" python3 -m harness audit --devices all --out "$W/audit-gpu.json" --quiet ;;
      # The ignore-label defect of the H200 report, exported here (the export runs its script before it writes)
      # and run again as a maintainer would: exit 1 while the defect is there.
      export) mkdir -p "$W/export"
              step export 120 python3 -m harness export reports/gpu/h200-20261204/cases/891d9788398e.json \
                --subject espnet.EmbedID --device gpu --kind 'known library defect' \
                --out "$W/export/reproduce-espnet-ignore-label.py" --markdown "$W/export/issue.md"
              step export-run 60 python3 "$W/export/reproduce-espnet-ignore-label.py" ;;
      *) echo "GPU_STEPS: unknown step '$s'" | tee -a "$W/summary.txt" ;;
    esac
  done
  rm -rf "$W/report/arrays"  # the cases stay: the findings' printed commands read them
  tar czf "$OUT/gpu-session.tgz" -C "$W" . && cp "$W/summary.txt" "$OUT/" ;;
*) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
