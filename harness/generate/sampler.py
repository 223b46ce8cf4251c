"""The seeded corpus sampler: the same cases for the same arguments, in any process, without Hypothesis.

:func:`corpus` and :func:`bad_corpus` run the builders behind the strategies on a
:class:`~harness.generate.choices.RandomSource` seeded from the kind, the family and the seed
(:func:`seeded_random`), keeping distinct cases in draw order (:func:`sample_distinct`). Corpora do not go
through Hypothesis because Hypothesis's generation, even under ``@seed``, mixes in integer and float constants
that it collects from every non-site-packages module in ``sys.modules``: two fresh processes with the same
imports agree, but a corpus drawn inside pytest (where the test modules are loaded) differs from one drawn by
the command line, and editing any constant in the harness would change every corpus.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from harness.core.cases import FAMILIES, Case
from harness.generate.bad_kinds import bad_pairs, build_bad
from harness.generate.case_builders import FAMILY_BUILDERS
from harness.generate.choices import RandomSource, Source
from harness.generate.profile_sizes import SIZE_BOUNDS, bounds_for
from harness.generate.strategy_bounds import FAMILY_VALIDATORS, check_family, check_int

__all__ = ["corpus", "bad_corpus", "seeded_random", "sample_distinct"]


def seeded_random(kind: str, family: str, seed: int) -> random.Random:
    """The ``random.Random`` of one corpus: ``kind`` (``corpus``, ``bad``, ``recipe``), family and seed."""
    # A str seed goes through SHA-512 (random's version 2 seeding): stable across processes,
    # platforms and Python versions, and independent of PYTHONHASHSEED.
    return random.Random(f"harness.{kind}:{family}:{seed}")


def sample_distinct(draw_one: Callable[[Source], Case], src: Source, examples: int) -> list[Case]:
    """Up to ``examples`` cases of distinct ids drawn by ``draw_one`` from ``src``, in draw order (it gives up
    after ``20 * examples + 100`` draws, where a small space holds fewer distinct cases)."""
    seen: set[str] = set()
    out: list[Case] = []
    attempts = 0
    while len(out) < examples and attempts < 20 * examples + 100:
        attempts += 1
        case = draw_one(src)
        if case.id not in seen:
            seen.add(case.id)
            out.append(case)
    return out


def _check_corpus_args(examples: Any, seed: Any) -> None:
    check_int("examples", examples, 0)
    check_int("seed", seed, 0)


def corpus(family: str, *, examples: int, seed: int, profile: str = "ci") -> list[Case]:
    """``examples`` distinct valid cases of ``family``, the same list for the same arguments anywhere.

    Drawn by the builders behind the strategies from ``random.Random`` seeded with the family and
    ``seed`` (not through Hypothesis: see the module docstring), within ``bounds_for(profile,
    family)``; deduplicated by case id, in draw order. ``family="all"`` mixes the three families
    in equal shares (the first families take the remainder), interleaved embed, lstm, pipeline.
    """
    check_family("family", family, FAMILIES + ("all",))
    _check_corpus_args(examples, seed)
    check_family("profile", profile, tuple(SIZE_BOUNDS))
    if family == "all":
        shares = [examples // 3 + (1 if i < examples % 3 else 0) for i in range(3)]
        parts = [corpus(f, examples=n, seed=seed, profile=profile) for f, n in zip(FAMILIES, shares)]
        mixed: list[Case] = []
        for i in range(max(map(len, parts), default=0)):
            mixed.extend(p[i] for p in parts if i < len(p))
        return mixed
    bounds = FAMILY_VALIDATORS[family](**bounds_for(profile, family))
    builder = FAMILY_BUILDERS[family]
    src = RandomSource(seeded_random("corpus", family, seed))
    return sample_distinct(lambda s: builder(s, bounds), src, examples)


def bad_corpus(*, examples: int, seed: int, family: str | None = None) -> list[Case]:
    """``examples`` distinct bad-input cases, deterministic like :func:`corpus`.

    Kinds go round-robin over :data:`~harness.generate.bad_kinds.BAD_KINDS` (restricted to ``family``), so
    every kind appears once ``examples`` reaches the number of (kind, family) pairs.
    """
    if family is not None:
        check_family("family", family, FAMILIES)
    _check_corpus_args(examples, seed)
    pairs = bad_pairs(family)
    counter = iter(range(10**12))

    def draw_one(src: Source) -> Case:
        kind, fam = pairs[next(counter) % len(pairs)]
        return build_bad(src, kind, fam)

    return sample_distinct(draw_one, RandomSource(seeded_random("bad", family or "all", seed)), examples)
