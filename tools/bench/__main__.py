"""``python -m tools.bench [--out DIR] [--quick | --level LEVEL] [--sections A,B]`` (what ``make bench`` runs).

The bench lives beside the harness, not in it: it imports ``harness``, and nothing in ``harness`` imports it.
Exit codes: 0 measured and written; 2 a usage error (one line on stderr, nothing run).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from harness.core.errors import HarnessError
from tools.bench.runner import LEVELS, SECTIONS, headlines, run_bench


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.bench", description="Measure what the harness costs, as "
                                "ratios of things measured side by side in one run; write bench.csv, bench.md, "
                                "bench.json and plots.")
    p.add_argument("--out", metavar="DIR", help="output directory (default reports/bench/<run-id>)")
    p.add_argument("--level", choices=LEVELS, default="full", help="full, quick (smaller sizes) or smoke (tiny "
                                                                   "inputs, a few seconds) (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="the same as --level quick")
    p.add_argument("--sections", metavar="A,B", help=f"comma list of sections to run (default all: "
                                                       f"{', '.join(SECTIONS)})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = "quick" if args.quick else args.level
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip()) if args.sections else SECTIONS
    try:
        if args.out is not None:
            from harness.core import argcheck

            argcheck.writable_dir("out", args.out)
        res = run_bench(args.out, level=level, sections=sections)
    except HarnessError as exc:
        print(f"tools.bench: error: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print("\n".join(headlines(res["frame"])))
    print(f"\nbench: {res['files']['bench.md']} ({res['wall']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
