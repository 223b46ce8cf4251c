"""The source of choices a case builder draws from: Hypothesis's ``draw``, or a seeded ``random.Random``.

Each parameter space of :mod:`harness.generate.case_builders` (and of the recipes,
:mod:`harness.generate.recipes`) is written once, as a builder over a tiny source of choices (:class:`Source`:
an int in a range, a unit float, an explicit id array, a label for what was drawn). The Hypothesis strategies
(:mod:`harness.generate.strategies`) run the builders on a :class:`HypothesisSource`, so they shrink and explore
like any strategy; the seeded corpora (:mod:`harness.generate.sampler`) run the *same* builders on a
:class:`RandomSource`. Everything a builder needs beyond the primitives (weighted choices, sizes spread over
magnitudes, distinct ints) is built on :meth:`Source.integer`, so both sources share it.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from harness.core.errors import InvalidArgument

if TYPE_CHECKING:
    from hypothesis import strategies as st

__all__ = ["Source", "HypothesisSource", "RandomSource"]

T = TypeVar("T")


class Source:
    """The choices a builder makes. Subclasses draw them from Hypothesis or from ``random``."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``; simplest: ``lo``."""
        raise NotImplementedError

    def unit(self) -> float:
        """A float in ``[0, 1]``."""
        raise NotImplementedError

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        """An explicit id array: values in ``[0, vocab)``, plus ``extra`` (an ignore label) now and then."""
        raise NotImplementedError

    def label(self, name: str, value: Any) -> None:
        """Report a kind that was drawn (a Hypothesis event)."""

    # Everything else is built on integer(), so both sources share it.
    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``; simplest: the first."""
        if not options:
            raise InvalidArgument("choice from an empty sequence")  # pragma: no cover - builder bug
        return options[self.integer(0, len(options) - 1)]

    def weighted(self, options: Mapping[T, int] | Sequence[tuple[T, int]]) -> T:
        """One of the options with weight > 0, in proportion to the weights; simplest: the first."""
        pairs = list(options.items()) if isinstance(options, Mapping) else list(options)
        pairs = [(v, w) for v, w in pairs if w > 0]
        k = self.integer(0, sum(w for _, w in pairs) - 1)
        for value, w in pairs:
            if k < w:
                return value
            k -= w
        raise AssertionError("unreachable")  # pragma: no cover

    def boolean(self) -> bool:
        return bool(self.integer(0, 1))

    def sized(self, lo: int, hi: int, near: Sequence[int] = ()) -> int:
        """An int in ``[lo, hi]`` spread over magnitudes: small ones, the edges, and log-uniform. The edges are
        ``lo``, ``hi`` and each boundary of ``near`` inside the range with the value just below it (a size
        boundary is crossed at its value), so draws and shrinks reach both sides of it."""
        if lo >= hi:
            return lo
        mode = self.weighted((("low", 2), ("log", 5), ("edge", 1)))
        if mode == "low":
            return self.integer(lo, min(hi, lo + 7))
        if mode == "edge":
            return self.choice(_edges(lo, hi, near))
        e = self.integer(lo.bit_length(), hi.bit_length())
        if e == 0:
            return 0
        return self.integer(max(lo, 1 << (e - 1)), min(hi, (1 << e) - 1))

    def around(self, lo: int, hi: int, near: Sequence[int]) -> int:
        """An int in ``[lo, hi]``, uniform mostly, else one of the edges :meth:`sized` names (a boundary of
        ``near`` inside the range, or the value just below it)."""
        edges = _edges(lo, hi, near)
        if len(edges) <= 2 or lo >= hi or self.weighted((("uniform", 3), ("edge", 1))) == "uniform":
            return self.integer(lo, hi)
        return self.choice(edges[2:])

    def distinct(self, lo: int, hi: int, n: int) -> list[int]:
        """``n`` distinct ints from ``[lo, hi]`` (``n <= hi - lo + 1``), in draw order."""
        pool = list(range(lo, hi + 1))
        return [pool.pop(self.integer(0, len(pool) - 1)) for _ in range(n)]


def _edges(lo: int, hi: int, near: Sequence[int]) -> tuple[int, ...]:
    """``(lo, hi)`` then, for each boundary of ``near``, the value below it and itself where they lie strictly
    between ``lo`` and ``hi`` (so a range no boundary falls in keeps the two edges, and its draws, as they were)."""
    inside = (v for b in sorted(set(near)) for v in (b - 1, b) if lo < v < hi)
    return (lo, hi) + tuple(dict.fromkeys(inside))


class HypothesisSource(Source):
    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        # Made only inside a Hypothesis draw: the modules are taken here once, not at each draw.
        import hypothesis
        from hypothesis import strategies
        from hypothesis.extra import numpy as hnp

        self._draw = draw
        self._hypothesis, self._st, self._hnp = hypothesis, strategies, hnp

    def integer(self, lo: int, hi: int) -> int:
        return lo if lo == hi else self._draw(self._st.integers(lo, hi))

    def unit(self) -> float:
        return self._draw(self._st.floats(0.0, 1.0))

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        elements: st.SearchStrategy[int] = self._st.integers(0, vocab - 1)
        if extra is not None:
            elements = self._st.one_of(elements, self._st.just(extra))
        return self._draw(self._hnp.arrays(np.dtype(dtype), shape, elements=elements))

    def label(self, name: str, value: Any) -> None:
        if self._hypothesis.currently_in_test_context():
            self._hypothesis.event(name, str(value))


class RandomSource(Source):
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return lo if lo == hi else self._rng.randint(lo, hi)

    def unit(self) -> float:
        return self._rng.random()

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        n = math.prod(shape)
        vals = [extra if extra is not None and self._rng.random() < 0.2 else self._rng.randrange(vocab)
                for _ in range(n)]
        return np.array(vals, dtype=dtype).reshape(shape)
