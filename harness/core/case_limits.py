"""What a case may ask of a run, checked before any work: the bytes of its inputs, and the family it is.

:func:`estimate_case_bytes` counts the bytes of a case's input arrays from its spec's shapes alone, in integer
arithmetic (a ``[30000, 30000]`` shape costs nothing to estimate, and nothing is allocated);
:func:`check_case_size` refuses a case over :func:`max_case_bytes_default` (``$HARNESS_MAX_CASE_BYTES``, else
half the machine's RAM) in one line, before a worker builds its arrays or a campaign admits it. These read only
a case's family, spec, explicit arrays and id (:class:`CaseShape`), so :mod:`harness.core.cases` can refuse
before it draws without this module importing the case record.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Protocol

import numpy as np

from harness.core.argcheck import DEFAULT_LIMIT_TEXT  # (re-exported: the limit's words live with the parser's)
from harness.core.case_arrays import lstm_weight_shapes
from harness.core.errors import CaseError, InvalidArgument, one_line
from harness.core.model_cases import input_bytes

__all__ = ["MAX_CASE_BYTES_ENV", "DEFAULT_LIMIT_TEXT", "CaseShape", "estimate_case_bytes", "max_case_bytes_default",
           "check_case_size",
           "check_case_family"]


class CaseShape(Protocol):
    """What the checks here read of a case (:class:`harness.core.cases.Case` is one)."""

    @property
    def family(self) -> str: ...

    @property
    def spec(self) -> Mapping[str, Any]: ...

    @property
    def arrays(self) -> Mapping[str, Mapping[str, Any]]: ...

    @property
    def id(self) -> str: ...


#: Environment variable that overrides :func:`max_case_bytes_default` (bytes, an int).
MAX_CASE_BYTES_ENV = "HARNESS_MAX_CASE_BYTES"


def _itemsize(dtype: Any, default: int = 8) -> int:
    try:
        return max(int(np.dtype(dtype).itemsize), 1)
    except TypeError:
        return default


def _prod(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def estimate_case_bytes(case: CaseShape) -> int:
    """The bytes of the case's input arrays, from its spec's shapes alone (nothing is allocated).

    A lower bound on what a run needs (subjects also hold outputs and gradients, about as much
    again); integer arithmetic, so a ``[30000, 30000]`` shape costs nothing to estimate.
    """
    s = case.spec
    total = 0
    if case.family == "model":  # no arrays of its own: one step's drawn batch (its parameters are the run's)
        total += input_bytes(s)
    elif case.family == "embed":
        shape = [int(n) for n in s["ids_shape"]]
        vocab, width = int(s["vocab"]), int(s["width"])
        wsize = _itemsize(s.get("w_dtype", "float32"))
        n_ids = _prod(shape)
        # Ids are drawn as int64, then cast; W, gy and ggW in the weight dtype.
        total += n_ids * (8 + _itemsize(s.get("id_dtype", "int32")))
        total += _prod(s.get("w_shape", (vocab, width))) * wsize
        total += n_ids * width * (8 + wsize)  # gy, drawn as float64 then cast (a cancelling one is)
        # ggW in the weight dtype: its normals are drawn a chunk at a time (harness.core.array_draws._normal), with
        # no float64 array of its size
        total += vocab * width * wsize
    else:
        lengths = [int(n) for n in s["lengths"]]
        hidden, n_layers = int(s["hidden"]), int(s["n_layers"])
        in_size = int(s["in_size"]) if case.family == "lstm" else int(s["width"])
        dirs = 2 if s.get("bidirectional", False) else 1
        size = _itemsize(s.get("dtype", "float32"))
        batch = len(lengths)
        steps = sum(lengths)
        if case.family == "lstm":
            widths = s.get("xs_widths")
            total += sum(n * (int(widths[i]) if widths is not None and i < len(widths) else in_size)
                         for i, n in enumerate(lengths)) * (8 + size)
        else:
            vocab = int(s["vocab"])
            total += batch * max(lengths + [0]) * 16 + vocab * in_size * (8 + size)
        total += sum(_prod(shape) for _, shape in lstm_weight_shapes(n_layers, in_size, hidden, dirs == 2)) * (8 + size)
        total += 4 * n_layers * dirs * batch * hidden * (8 + size)  # hx, cx, ghy, gcy
        total += steps * hidden * dirs * (8 + size)  # gys
    for enc in case.arrays.values():
        try:
            total += _prod(enc.get("shape", ())) * _itemsize(enc.get("dtype"))
        except (TypeError, ValueError):
            pass
    return int(total)


def max_case_bytes_default() -> int:
    """The default per-case limit: ``$HARNESS_MAX_CASE_BYTES``, else half the machine's RAM (what one worker may
    use). It bounds a run's estimated peak (:func:`harness.core.cost.over_limit`: inputs, the subject's or the
    oracle's working set, the process), checked before any work; building the arrays checks their bytes
    against it again.
    """
    env = os.environ.get(MAX_CASE_BYTES_ENV, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise InvalidArgument(f"{MAX_CASE_BYTES_ENV}={env!r} must be a positive int (bytes)") from None
        if value <= 0:
            raise InvalidArgument(f"{MAX_CASE_BYTES_ENV}={env!r} must be a positive int (bytes)")
        return value
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX: assume 16 GiB, so 8 GiB
        ram = 16 << 30
    return max(int(ram) // 2, 1 << 20)


def check_case_size(case: CaseShape, limit: int | None = None) -> int:
    """Raise a one-line :class:`CaseError` when ``case`` needs more than ``limit`` bytes; return the estimate.

    ``limit`` None means :func:`max_case_bytes_default`. Call before building arrays or starting work.
    """
    limit = max_case_bytes_default() if limit is None else int(limit)
    try:
        est = estimate_case_bytes(case)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CaseError(f"case {case.id}: size cannot be estimated: {type(exc).__name__}: {one_line(exc)}") from exc
    if est > limit:
        raise CaseError(f"case {case.id} needs about {est:,} bytes of inputs, over the limit of {limit:,} bytes "
                        f"(max-case-bytes; set {MAX_CASE_BYTES_ENV} or --max-case-bytes to raise it)")
    return est


def check_case_family(case: CaseShape, family: str, subject: str) -> None:
    """Refuse, in one line, to run ``case`` on subject ``subject`` of another ``family``."""
    if case.family != family:
        raise CaseError(f"case {case.id} is a {case.family} case; subject={subject!r} takes {family} cases")
