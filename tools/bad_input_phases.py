"""Where each bad input fails on the installed libraries: error type and phase per kind, subject and context.

The measurement behind the ``phase`` of every ``[[bad_input]]`` rule in contracts.toml (and the known
defects). Runs each subject once per case in this process on the CPU (the libraries, not the harness, are
measured here; the gate judges the same cases in worker processes)::

    python tools/bad_input_phases.py --examples 1200 --seed 5 [--family embed|lstm|pipeline]

prints one line per kind x context x subject: the outcomes seen and how many cases had each.
"""

from __future__ import annotations

import argparse
import collections
import warnings

from harness.core.vocabulary import FAMILIES


def measure(examples: int, seed: int, family: str | None) -> dict[tuple[str, str, str], collections.Counter]:
    from harness.core.contexts import get_context
    from harness.core.devices import CPU
    from harness.generate.sampler import bad_corpus, corpus
    from harness.subjects.base import execute
    from harness.subjects.registry import SUBJECTS

    cases = bad_corpus(examples=examples, seed=seed, family=family)
    if family in (None, "embed"):  # the empty id batch: a valid input, tagged ids:empty
        cases += [c for c in corpus("embed", examples=max(examples // 4, 50), seed=seed) if "ids:empty" in c.tags]
    out: dict[tuple[str, str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for case in cases:
        kinds = [t for t in case.tags if t.startswith("bad:") or t == "ids:empty"]
        for name, s in SUBJECTS.items():
            if s.role != "subject" or not s.applies_to(case):
                continue
            for ctx in ("default", "debug"):
                r = execute(s, case, CPU, get_context(ctx))
                what = "no error" if r.error is None else f"{r.error.type} in {r.error.phase}"
                for k in kinds:
                    out[(k, ctx, name)][what] += 1
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=300, help="bad cases to draw (default %(default)s)")
    p.add_argument("--seed", type=int, default=5, help="corpus seed (default %(default)s)")
    p.add_argument("--family", choices=FAMILIES, default=None,
                   help="only this family (default all)")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    for key, counts in sorted(measure(args.examples, args.seed, args.family).items()):
        print(" ".join(key), ", ".join(f"{k}: {n}" for k, n in counts.most_common()))


if __name__ == "__main__":
    main()
