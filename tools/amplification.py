"""Measure the amplification floor's factor: how far the LSTM-family subjects land from the float64 oracle,
in units of the oracle's own run in the subject's dtype (``noise.<tensor>``, :func:`harness.subjects.oracle`).

For a grid of LSTM and pipeline cases (weights ``lecun``, ``chaotic`` and ``chaotic`` times 4; widths up to 384;
1 to 3 layers; float32, and float16 where small), every LSTM-family subject runs in the campaign's workers and
the oracle runs there too; per tensor it prints ``max|subject - oracle| / max(noise)`` (the factor a subject
needs) and whether the default tolerance without the floor would call it beyond (a false alarm the floor
removes). The factor ``harness.judge.tolerance.AMPLIFICATION`` must stay above the largest ratio measured here.

    PYTHONPATH=. python tools/amplification.py [--seeds 2] [--csv FILE]
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import pandas as pd

from harness.core.cases import Case
from harness.core.devices import CPU
from harness.execute.isolated import Runner
from harness.judge.tolerance import AMPLIFICATION, judge_oracle
from harness.subjects.registry import SUBJECTS

_GRID = [  # (in_size, hidden, n_layers, dtype)
    (8, 8, 1, "float32"), (32, 32, 2, "float32"), (64, 64, 3, "float32"), (128, 256, 2, "float32"),
    (384, 384, 2, "float32"), (8, 8, 2, "float16"), (16, 16, 1, "float16"),
]


#: (weight_kind, w_scale): Chainer's initializer, the chaotic stress weights, and those four times larger.
_WEIGHTS = [("lecun", 1.0), ("chaotic", 1.0), ("chaotic", 4.0)]


def cases(seeds: int) -> list[Case]:
    out = []
    for (i, h, n, dt), (wk, scale), bi, s in itertools.product(_GRID, _WEIGHTS, (False, True), range(seeds)):
        spec = {"n_layers": n, "in_size": i, "hidden": h, "lengths": [12, 7, 3], "dtype": dt, "weight_kind": wk,
                "w_scale": scale, "bidirectional": bi, "initial_state": "given" if s % 2 else "none"}
        out.append(Case("lstm", 1000 + s, spec, tags=("amplification",)))
    return out


def _finite_max(a: np.ndarray) -> float:
    """The largest finite magnitude of ``a`` (0.0 where it has none)."""
    m = np.abs(np.asarray(a, dtype=np.float64))
    m = m[np.isfinite(m)]
    return float(m.max()) if m.size else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="cases per grid point (default %(default)s)")
    ap.add_argument("--csv", help="also write one row per tensor to this file")
    args = ap.parse_args(argv)
    subjects = [s.name for s in SUBJECTS.values() if s.family == "lstm" and s.role == "subject"]
    rows = []
    with Runner(timeout=600) as runner:
        for case in cases(args.seeds):
            oracle = runner.run(case, "oracle.lstm", CPU, "default").arrays or {}
            for name in subjects:
                got = runner.run(case, name, CPU, "default")
                if not got.arrays:
                    continue
                for t, a in got.arrays.items():
                    if t not in oracle or f"noise.{t}" not in oracle or np.asarray(a).dtype.kind != "f":
                        continue
                    e, noise = oracle[t], oracle[f"noise.{t}"]
                    base = judge_oracle(case, t, np.asarray(a), e, text=False)[0]
                    floored = judge_oracle(case, t, np.asarray(a), e, text=False, noise=noise)[0]
                    nmax = _finite_max(noise)
                    ratio = base.max_abs / nmax if nmax > 0 else (0.0 if base.max_abs == 0 else np.inf)
                    rows.append({"subject": name, "case": case.id, "dtype": case.spec["dtype"],
                                 "weights": f"{case.spec['weight_kind']} x{case.spec['w_scale']:g}",
                                 "hidden": case.spec["hidden"], "layers": case.spec["n_layers"],
                                 "tensor": t.split(".")[0], "max_err": base.max_abs, "noise": nmax,
                                 "rel_noise": nmax / (_finite_max(e) or 1.0), "ratio": ratio,
                                 "beyond_without_floor": not base.within_tolerance,
                                 "beyond_with_floor": not floored.within_tolerance})
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"{len(df)} tensors of {df['case'].nunique()} cases x {df['subject'].nunique()} subjects; "
          f"AMPLIFICATION = {AMPLIFICATION:g}")
    g = df.groupby(["dtype", "weights"])
    print(g.agg(tensors=("ratio", "size"), ratio_median=("ratio", "median"),
                ratio_p99=("ratio", lambda r: r.quantile(.99)),
                ratio_max=("ratio", "max"), beyond_without_floor=("beyond_without_floor", "sum"),
                beyond_with_floor=("beyond_with_floor", "sum")).to_string())
    if args.csv:
        df.to_csv(args.csv, index=False)
    worst = df.sort_values("ratio", ascending=False).head(8)
    print(worst[["subject", "case", "dtype", "weights", "hidden", "layers", "tensor", "max_err", "noise", "ratio"]]
          .to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
