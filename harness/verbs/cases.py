"""``harness cases``: write a corpus of generated cases (the same seed writes the same bytes), or say which
edge kinds a corpus reaches (``coverage``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import opt
from harness.core.vocabulary import FAMILIES, PROFILES

__all__ = ["CasesOptions", "cases", "FAMILY", "EXAMPLES", "SEED"]

#: What ``cases`` generates where the options say nothing.
FAMILY = "all"
EXAMPLES = 20
SEED = 0


@dataclass(frozen=True)
class CasesOptions:
    family: str | None = opt("--family", "which family of cases (default {default})", default=None, shown=FAMILY,
                             choices=(*FAMILIES, "all"))
    examples: int | None = opt("--examples", "generated examples per family, >= 1 (default {default}; not with "
                               "--corpus)", default=None, shown=EXAMPLES, check=argcheck.count(1))
    seed: int | None = opt("--seed", "the corpus seed (default {default}; not with --corpus)", default=None,
                           shown=SEED, check=argcheck.count(0))
    profile: str | None = opt(
        "--profile", "sizes and counts of the generated cases, the pytest profiles' names: ci (the default corpus), "
        "dev, audit (more and larger cases), realistic (real model shapes from published recipes; fewer repeats); "
        "not with --corpus; cases --coverage: the profile's default corpus (default {default})", default=None,
        shown="ci", choices=PROFILES)
    #: the corpus file (None or "-": stdout)
    out: str | None = opt(
        "--out", "where to write: report and gate, a new (absent or empty) run directory (default reports/<run-id>); "
        "compare and merge, the directory of their tables; cases, the corpus file (default or '-': stdout); shrink, "
        "the minimal case (default: beside CASE.json, named by its id); audit, the audit file (JSON); export, the "
        "script; trajectory, the directory of its table and figure", default=None,
        check=argcheck.kept(argcheck.file_or_stdout), metavar="PATH", role="output")
    coverage: bool = opt("--coverage", "print which edge kinds, size boundaries and recipe configurations a corpus "
                         "reaches (the profile's default corpus, or --corpus FILE) instead of writing cases",
                         default=False, switch=True)
    corpus: str | None = opt("--corpus", "a corpus .jsonl to run instead of generating one (cases --coverage: to "
                             "read; default: the verb's own corpus)", default=None,
                             check=argcheck.kept(argcheck.readable_file), metavar="FILE", role="input")

    def __post_init__(self) -> None:
        # None is "not given": coverage reads no generation option, so one given with it is refused, not ignored.
        if self.coverage:
            extra = [f"--{k}" for k in ("out", "examples", "family", "seed") if getattr(self, k) is not None]
            if extra:
                raise InvalidArgument(f"coverage: --coverage ignores {', '.join(extra)}; leave "
                                      f"{'them' if len(extra) > 1 else 'it'} out")
        argcheck.profile_or_corpus(self.profile, self.corpus)
        if self.corpus is not None and not self.coverage:
            raise InvalidArgument(f"corpus={self.corpus!r} is read only with --coverage")


def cases(opts: CasesOptions) -> int:
    """0: written (or, with ``coverage``, the tables printed)."""
    from harness.core.corpus_files import write_corpus
    from harness.generate.corpora import profile_corpus

    if opts.coverage:
        return _coverage(opts.corpus, opts.profile or "ci")
    made = profile_corpus(opts.family or FAMILY, examples=EXAMPLES if opts.examples is None else opts.examples,
                          seed=SEED if opts.seed is None else opts.seed, profile=opts.profile or "ci")
    if opts.out in (None, "-"):
        for c in made:
            print(c.to_json())
    else:
        n = write_corpus(made, opts.out)
        print(f"wrote {n} cases to {opts.out}", file=sys.stderr)
    return 0


def _coverage(path: str | None, profile: str) -> int:
    """The edge kinds, size boundaries and recipe configurations a corpus reaches (the ``profile``'s default
    corpus, or the file ``path``), one row each; exit 0 (a kind no case reaches is a row with 0, a size boundary
    says what it would need, so the tables say what is missing)."""
    from harness.core import argcheck
    from harness.core.corpus_files import load_corpus
    from harness.generate.corpora import default_corpus
    from harness.generate.coverage import coverage_text

    if path is not None:
        argcheck.readable_file("corpus", path)
    found = load_corpus(path) if path is not None else default_corpus(profile=profile)
    print(coverage_text(found))
    return 0
