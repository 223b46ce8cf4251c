"""Hypothesis strategies for :class:`~harness.core.cases.Case` objects.

``embed_cases``, ``lstm_cases``, ``pipeline_cases``, ``cases(family, **bounds)``, ``any_case(**bounds)`` and
``bad_inputs(family=None)``. Each validates its bounds when it is called (:mod:`harness.generate.strategy_bounds`) and
runs the builders of :mod:`harness.generate.case_builders` (bad inputs: :mod:`harness.generate.bad_kinds`) on
a source backed by Hypothesis's ``draw`` (:class:`~harness.generate.choices.HypothesisSource`), so the cases
shrink and explore like any strategy; every case drawn inside a test is reported with :func:`hypothesis.note`.
The seeded corpora run the same builders without Hypothesis (:mod:`harness.generate.sampler`); the sizes of
each profile are :data:`harness.generate.profile_sizes.SIZE_BOUNDS`.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from harness.core.cases import FAMILIES, FLOAT_DTYPES, Case
from harness.core.errors import InvalidArgument
from harness.generate.bad_kinds import bad_pairs, build_bad
from harness.generate.case_builders import build_embed, build_lstm, build_pipeline
from harness.generate.choices import HypothesisSource, Source
from harness.generate.strategy_bounds import SIGNED_ID_DTYPES, check_family, embed_bounds, lstm_bounds, pipeline_bounds

if TYPE_CHECKING:
    from hypothesis import strategies as st

# Hypothesis is imported where a strategy is made or drawn from: the seeded corpora (what ``harness report``
# runs) do not use it, and its import is a sixth of a second at every report's start.

__all__ = ["embed_cases", "lstm_cases", "pipeline_cases", "cases", "any_case", "bad_inputs"]


def _strategy(builder: Callable[[Source, Any], Case], bounds: Any) -> st.SearchStrategy[Case]:
    from hypothesis import currently_in_test_context, note
    from hypothesis import strategies as st

    @st.composite
    def draw_case(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Case:
        case = builder(HypothesisSource(draw), bounds)
        if currently_in_test_context():
            note(f"{case!r}: {case.to_json()}")
        return case

    return draw_case()


# ---- public strategies --------------------------------------------------------------------------
def embed_cases(*, min_vocab: int = 1, max_vocab: int = 50_000, min_width: int = 1, max_width: int = 64,
                max_ids: int = 1024, id_dtypes: Sequence[str] = SIGNED_ID_DTYPES,
                w_dtypes: Sequence[str] = FLOAT_DTYPES, allow_empty: bool = True) -> st.SearchStrategy[Case]:
    """Valid ``embed`` cases.

    Vocab in ``[min_vocab, max_vocab]`` (clipped so that the drawn id dtype holds ``vocab - 1``),
    width in ``[min_width, max_width]``, ids of 1-3 dims with at most ``max_ids`` elements (an
    empty batch now and then when ``allow_empty``), ids uniform, collision-heavy, all equal,
    sorted or an explicit Hypothesis-chosen array (``Case.arrays["x"]``); ignore labels None, -1,
    0, ``V-1``, ``V+k`` and a large negative value within the id dtype, with ``ignore_frac``
    between 0 and 1 inclusive; upstream gradients mostly random, else ones/zeros/large/cancel.
    Also a "hot" scale: up to ``max_ids`` ids into at most 16 rows (GPU atomics contend).
    """
    return _strategy(build_embed, embed_bounds(
        min_vocab=min_vocab, max_vocab=max_vocab, min_width=min_width, max_width=max_width,
        max_ids=max_ids, id_dtypes=id_dtypes, w_dtypes=w_dtypes, allow_empty=allow_empty))


def lstm_cases(*, min_batch: int = 1, max_batch: int = 64, min_len: int = 1, max_len: int = 32,
               max_layers: int = 3, max_in: int = 32, max_hidden: int = 32,
               dtypes: Sequence[str] = ("float32",), allow_dropout: bool = True) -> st.SearchStrategy[Case]:
    """Valid ``lstm`` cases.

    Batch (number of sequences) in ``[min_batch, max_batch]``; lengths in ``[min_len, max_len]``
    in one of the patterns of :data:`~harness.generate.case_builders.LENGTH_PATTERNS` (all equal,
    strictly decreasing, strictly increasing, unsorted, one long among short ones, sorted with ties;
    tagged ``lengths:<pattern>``); ``in_size``
    up to ``max_in``, ``hidden`` up to ``max_hidden``, 1 to ``max_layers`` layers, uni- or
    bidirectional, initial state none or given; dropout 0 mostly, else > 0 with a
    ``dropout_seed`` (tag ``dropout``) when ``allow_dropout``.
    """
    return _strategy(build_lstm, lstm_bounds(
        min_batch=min_batch, max_batch=max_batch, min_len=min_len, max_len=max_len,
        max_layers=max_layers, max_in=max_in, max_hidden=max_hidden, dtypes=dtypes,
        allow_dropout=allow_dropout))


def pipeline_cases(*, min_batch: int = 1, max_batch: int = 16, min_len: int = 1, max_len: int = 16,
                   max_layers: int = 3, min_vocab: int = 1, max_vocab: int = 10_000, min_width: int = 1,
                   max_width: int = 32, max_hidden: int = 32, dtypes: Sequence[str] = ("float32",)
                   ) -> st.SearchStrategy[Case]:
    """Valid ``pipeline`` cases (padded ids -> EmbedID -> NStepLSTM).

    Lengths as in :func:`lstm_cases`; vocab up to ``max_vocab``, embedding width up to
    ``max_width`` (the LSTM's input size); the padding id (``ignore_label``) is -1, 0 or ``V-1``
    (tag ``ignore:<kind>``); ids uniform, collision-heavy or all equal.
    """
    return _strategy(build_pipeline, pipeline_bounds(
        min_batch=min_batch, max_batch=max_batch, min_len=min_len, max_len=max_len,
        max_layers=max_layers, min_vocab=min_vocab, max_vocab=max_vocab, min_width=min_width,
        max_width=max_width, max_hidden=max_hidden, dtypes=dtypes))


_FAMILY_STRATEGIES: dict[str, Callable[..., st.SearchStrategy[Case]]] = {
    "embed": embed_cases, "lstm": lstm_cases, "pipeline": pipeline_cases,
}


def _bound_names(family: str) -> tuple[str, ...]:
    return tuple(inspect.signature(_FAMILY_STRATEGIES[family]).parameters)


def _split_bounds(bounds: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Route flat bounds to every family that takes them; ``embed={...}`` etc. override per family."""
    per: dict[str, dict[str, Any]] = {f: {} for f in FAMILIES}
    for name, value in bounds.items():
        if name in FAMILIES:
            continue
        takers = [f for f in FAMILIES if name in _bound_names(f)]
        if not takers:
            raise InvalidArgument(f"{name}={value!r} is not a bound of any family's strategy")
        for f in takers:
            per[f][name] = value
    for f in FAMILIES:
        if f in bounds:
            sub = bounds[f]
            if not isinstance(sub, Mapping):
                raise InvalidArgument(f"{f}={sub!r} must be a mapping of {f}_cases bounds")
            for name, value in sub.items():
                if name not in _bound_names(f):
                    raise InvalidArgument(f"{name}={value!r} is not a bound of {f}_cases "
                                          f"(it takes {', '.join(_bound_names(f))})")
                per[f][name] = value
    return per


def cases(family: str, **bounds: Any) -> st.SearchStrategy[Case]:
    """Valid cases of ``family`` (``embed``, ``lstm``, ``pipeline``, or ``all`` for :func:`any_case`)."""
    check_family("family", family, FAMILIES + ("all",))
    if family == "all":
        return any_case(**bounds)
    for name, value in bounds.items():
        if name not in _bound_names(family):
            raise InvalidArgument(f"{name}={value!r} is not a bound of {family}_cases "
                                  f"(it takes {', '.join(_bound_names(family))})")
    return _FAMILY_STRATEGIES[family](**bounds)


def any_case(**bounds: Any) -> st.SearchStrategy[Case]:
    """A valid case of any family.

    A flat bound goes to every family whose strategy takes it (``max_batch`` to lstm and
    pipeline); ``embed={...}``, ``lstm={...}``, ``pipeline={...}`` give one family's bounds and
    override flat ones, so ``any_case(**bounds_for(profile, "all"))`` works.
    """
    from hypothesis import strategies as st

    per = _split_bounds(bounds)
    return st.one_of(*(_FAMILY_STRATEGIES[f](**per[f]) for f in FAMILIES))


def bad_inputs(*, family: str | None = None) -> st.SearchStrategy[Case]:
    """Bad-input cases, each with ``expect`` (see :mod:`harness.generate.bad_kinds`) and a ``bad:<kind>`` tag.

    ``family`` restricts them to one family; the kinds are those of
    :data:`harness.generate.bad_kinds.BAD_KINDS`.
    """
    from hypothesis import currently_in_test_context, note
    from hypothesis import strategies as st

    if family is not None:
        check_family("family", family, FAMILIES)
    pairs = bad_pairs(family)

    @st.composite
    def draw_bad(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Case:
        src = HypothesisSource(draw)
        kind, fam = src.choice(pairs)
        case = build_bad(src, kind, fam)
        if currently_in_test_context():
            note(f"{case!r}: {case.to_json()}")
        return case

    return draw_bad()
