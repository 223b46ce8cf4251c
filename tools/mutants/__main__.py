"""Run every mutant of :mod:`tools.mutants.plugin` against the gate and write the kill table.

For each family a corpus is written (the cases of that family in the corpus ``harness gate`` runs: the edge
set, anchors, random cases and generated bad inputs) and the pristine subjects are gated on it once (the
findings they already have -- library defects the edge set reaches -- are the baseline of what is not a kill).
Then per mutant, in order, until one kills it:

1. ``gate``: ``python -m harness gate --devices cpu --subject-plugin tools.mutants.plugin:NAME`` on the family's
   corpus; killed when it reports a finding the pristine run did not.
2. ``gate --baseline``: the same against the pristine run directory (digests compared).
3. ``pytest``: the family's gate suite with the mutant registered (``-p tools.mutants.pytest_mutant``).

Writes ``reports/mutants/mutants.csv`` and ``mutants.md`` (mutant, subject, bug, killed by, first dossier line,
seconds) and prints the kill rate.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tools.mutants.plugin import MUTANTS

ROOT = Path(__file__).resolve().parents[2]
_SUITES = {"embed": "suites/gate/test_embed.py", "lstm": "suites/gate/test_lstm.py",
           "pipeline": "suites/gate/test_pipeline.py"}
_FINDING = re.compile(r"^FINDING \d+ of \d+: (.*)$")


def _family(subject: str) -> str:
    from harness.subjects.registry import get_subject

    return get_subject(subject).family


def _findings(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _FINDING.match(line))]


_HEAD = re.compile(r"^\[(?P<kind>[^\]]*)\] (?P<subjects>.+?) \[(?P<device>[^\]]*)\] (?P<rest>.*)$")


def _keys(line: str) -> set[str]:
    """One key per subject of a dossier's first line: a group names its subjects in any order (``A (and B)``)."""
    m = _HEAD.match(line)
    if m is None:
        return {line}
    names = re.split(r" \(and |, |\)", m["subjects"])
    return {f"[{m['kind']}] {n} [{m['device']}] {m['rest']}" for n in names if n}


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out = 124, f"timeout after {timeout}s: {exc}"
    return rc, out, time.perf_counter() - t0


def _gate(out: Path, corpus: Path, plugin: str | None = None, baseline: Path | None = None) -> tuple[int, str, float]:
    cmd = [sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--corpus", str(corpus), "--repeats", "2",
           "--fresh", "0", "--no-shrink", "--quiet", "--out", str(out)]
    if plugin:
        cmd += ["--subject-plugin", plugin]
    if baseline:
        cmd += ["--baseline", str(baseline)]
    return _run(cmd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="reports/mutants", help="where the table goes (default %(default)s)")
    ap.add_argument("--mutants", help="comma list of mutant names (default: all %(default)s)")
    args = ap.parse_args(argv)
    names = {m.name for m in MUTANTS}
    chosen = [m for m in MUTANTS if args.mutants is None or m.name in args.mutants.split(",")]
    unknown = set((args.mutants or "").split(",")) - names - {""}
    if unknown:
        ap.error(f"mutants={args.mutants!r}: unknown {', '.join(sorted(unknown))}")
    out = ROOT / args.out
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    from harness.core.corpus_files import write_corpus
    from harness.generate.corpora import gate_corpus

    t_all = time.perf_counter()
    families = sorted({_family(m.subject) for m in chosen})
    corpora, pristine = {}, {}
    for fam in families:
        corpora[fam] = out / f"corpus-{fam}.jsonl"
        write_corpus([c for c in gate_corpus() if c.family == fam], str(corpora[fam]))
        d = runs / f"pristine-{fam}"
        rc, text, secs = _gate(d, corpora[fam])
        pristine[fam] = (d, {k for f in _findings(text) for k in _keys(f)})
        print(f"pristine {fam}: gate rc {rc}, {len(pristine[fam][1])} finding(s) already, {secs:.0f}s", flush=True)
    rows = []
    for m in chosen:
        fam = _family(m.subject)
        plugin = f"tools.mutants.plugin:{m.name}"
        base_dir, known = pristine[fam]
        t0 = time.perf_counter()
        killed, line = "", ""
        for check in ("gate", "gate --baseline", "pytest"):
            if check == "pytest":
                rc, text, _ = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                                    "tools.mutants.pytest_mutant", "-x", "-q", _SUITES[fam]],
                                   env={"HARNESS_MUTANT": plugin, "HARNESS_PROFILE": "ci"})
                if rc == 1:
                    killed = check
                    line = next((ln for ln in text.splitlines() if ln.startswith(("E ", "FAILED"))), "")
            else:
                d = runs / f"{m.name}-{'baseline' if 'baseline' in check else 'gate'}"
                rc, text, _ = _gate(d, corpora[fam], plugin, base_dir if "baseline" in check else None)
                new = [f for f in _findings(text) if not _keys(f) <= known]
                if new:
                    killed, line = check, new[0]
            if killed:
                break
        secs = time.perf_counter() - t0
        rows.append({"mutant": m.name, "subject": m.subject, "bug": m.bug, "killed by": killed or "SURVIVED",
                     "first dossier line": line[:200], "seconds": f"{secs:.0f}"})
        print(f"{m.name}: {killed or 'SURVIVED'} ({secs:.0f}s) {line[:120]}", flush=True)
    with open(out / "mutants.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    n_killed = sum(r["killed by"] != "SURVIVED" for r in rows)
    md = [f"Kill rate: {n_killed} of {len(rows)} ({time.perf_counter() - t_all:.0f}s in all)", "",
          "| mutant | subject | imitates | killed by | first dossier line | s |", "|---|---|---|---|---|---|"]
    md += [f"| {r['mutant']} | {r['subject']} | {r['bug']} | {r['killed by']} | "
           f"{r['first dossier line'].replace('|', '/')} | {r['seconds']} |" for r in rows]
    (out / "mutants.md").write_text("\n".join(md) + "\n")
    print(md[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
