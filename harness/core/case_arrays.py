"""A case's arrays as its spec names them, and every explicit array decoded once, when the case is built.

:func:`array_layout` says which arrays a case's spec builds (name -> shape and dtype) without drawing any;
:func:`check_case_arrays` holds the rules that cross fields of a case and that a JSON Schema cannot say: an
explicit array's dtype names a number type, its bits are base64 of exactly the bytes its shape needs (its
``data`` as many numbers as its shape, each one the dtype holds), its name is one the case builds (and, in a
valid case, its shape is the one the spec gives); an ``inject`` entry names an array of the case and its value
fits that array's dtype; ``xs_widths`` gives one width per sequence (each ``in_size`` unless the case is a bad
input). A case that breaks one cannot be built: one :class:`~harness.core.errors.InvalidArgument` line naming
the field's JSON path and value (``$.arrays.x.bits='@@' must be base64 ...``), raised when the case is made,
so ``replay``, ``shrink``, ``localize`` and every corpus reader refuse it before a worker starts. The decoded
arrays are kept with the case (:func:`harness.core.cases.build_arrays` copies them; nothing decodes twice).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Iterator, Mapping

import numpy as np

from harness.core.errors import InvalidArgument
from harness.core.schema_check import brief, json_path, problem
from harness.core.schemas import NUMBER_DTYPES

__all__ = ["ARRAY_DTYPES", "lstm_weight_shapes", "array_layout", "check_case_arrays", "decode_array"]

#: The dtypes an explicit array may have: the numbers a case's arrays hold (``encode_array`` writes
#: ``dtype.name``). An object, void, string, complex or date dtype names nothing a subject takes.
ARRAY_DTYPES = NUMBER_DTYPES


def lstm_weight_shapes(n_layers: int, in_size: int, hidden: int, bidirectional: bool
                       ) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Names and shapes of Chainer's NStepLSTM weights: w0..w3 input-to-hidden, w4..w7 hidden-to-hidden."""
    dirs = 2 if bidirectional else 1
    for layer in range(n_layers):
        for d in range(dirs):
            k = layer * dirs + d
            width = in_size if layer == 0 else hidden * dirs
            for j in range(8):
                yield f"ws.{k}.{j}", (hidden, width if j < 4 else hidden)
            for j in range(8):
                yield f"bs.{k}.{j}", (hidden,)


def array_layout(family: str, spec: Mapping[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every array the spec of a ``family`` case builds: name -> (shape, dtype name); nothing is drawn.
    A pipeline's ``x`` is ``(batch, longest sequence)``."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    if family == "model":  # a training run draws its parameters and batches itself, from the seed
        return out
    if family == "embed":
        shape = tuple(int(n) for n in spec["ids_shape"])
        vocab, width = int(spec["vocab"]), int(spec["width"])
        wdt = str(spec.get("w_dtype", "float32"))
        out["x"] = (shape, str(spec.get("id_dtype", "int32")))
        out["W"] = (tuple(int(n) for n in spec.get("w_shape", (vocab, width))), wdt)
        out["gy"] = (shape + (width,), wdt)
        out["ggW"] = ((vocab, width), wdt)
        return out
    lengths = [int(n) for n in spec["lengths"]]
    dtype = str(spec.get("dtype", "float32"))
    hidden, n_layers = int(spec["hidden"]), int(spec["n_layers"])
    bi = bool(spec.get("bidirectional", False))
    dirs = 2 if bi else 1
    if family == "lstm":
        in_size = int(spec["in_size"])
        widths = spec.get("xs_widths")
        for i, n in enumerate(lengths):
            out[f"xs.{i}"] = ((n, int(widths[i]) if widths is not None and i < len(widths) else in_size), dtype)
    else:
        in_size = int(spec["width"])
        out["x"] = ((len(lengths), max(lengths)), str(spec.get("id_dtype", "int32")))
        out["W"] = ((int(spec["vocab"]), in_size), dtype)
    for name, shape in lstm_weight_shapes(n_layers, in_size, hidden, bi):
        out[name] = (shape, dtype)
    state = (n_layers * dirs, len(lengths), hidden)
    if spec.get("initial_state", "none") == "given":
        out["hx"] = out["cx"] = (state, dtype)
    for i, n in enumerate(lengths):
        out[f"gys.{i}"] = ((n, hidden * dirs), dtype)
    out["ghy"] = out["gcy"] = (state, dtype)
    return out


def check_case_arrays(family: str, spec: Mapping[str, Any], arrays: Mapping[str, Mapping[str, Any]],
                      bad: bool) -> dict[str, np.ndarray]:
    """The rules across a case's fields (see the module), then every explicit array decoded: name -> array.
    Raises one :class:`InvalidArgument` line at the first problem. Call on a case whose schema was checked."""
    _check_widths(family, spec, bad)
    layout = array_layout(family, spec)
    decoded: dict[str, np.ndarray] = {}
    for name in sorted(arrays):
        enc = arrays[name]
        if name not in layout:
            raise InvalidArgument(f"{json_path(['arrays', name])} names no array of "
                                  f"{'an' if family == 'embed' else 'a'} {family} case (its arrays: "
                                  f"{_names(layout)})")
        decoded[name] = decode_array(name, enc)
        if not bad:
            _check_shape(family, name, decoded[name].shape, layout[name][0])
    dtypes = {name: dt for name, (_, dt) in layout.items()}
    dtypes.update({name: a.dtype.name for name, a in decoded.items()})
    for i, inj in enumerate(spec.get("inject", ())):
        name = inj["array"]
        if name not in dtypes:
            raise InvalidArgument(problem(["spec", "inject", i, "array"], name,
                                          f"names no array of this case (its arrays: {_names(layout)})"))
        try:
            np.empty(1, dtype=dtypes[name])[0] = float(inj["value"])
        except (ValueError, OverflowError, TypeError):
            raise InvalidArgument(problem(["spec", "inject", i, "value"], inj["value"],
                                          f"does not fit array {name!r} ({dtypes[name]})")) from None
    return decoded


def _names(layout: Mapping[str, Any]) -> str:
    names = sorted(layout)
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + f", ... ({len(names)} in all)"


def _check_widths(family: str, spec: Mapping[str, Any], bad: bool) -> None:
    widths = spec.get("xs_widths")
    if family != "lstm" or widths is None:
        return
    lengths = list(spec["lengths"])
    if len(widths) != len(lengths):
        raise InvalidArgument(problem(["spec", "xs_widths"], list(widths), f"must give one width per sequence "
                                      f"({len(lengths)}: lengths={brief(lengths)}), got {len(widths)}"))
    if not bad and any(int(w) != int(spec["in_size"]) for w in widths):
        raise InvalidArgument(problem(["spec", "xs_widths"], list(widths), f"must all be in_size={spec['in_size']}"
                                      f" in a valid case (another width is a bad input: the case needs an expect)"))


def decode_array(name: str, enc: Mapping[str, Any]) -> np.ndarray:
    """One explicit array (an ``arrays`` entry whose schema was checked), or one :class:`InvalidArgument` line."""
    at = ["arrays", name]
    dtype_name = enc["dtype"]
    if dtype_name not in ARRAY_DTYPES:
        raise InvalidArgument(problem(at + ["dtype"], dtype_name, f"must name a number type: one of "
                                      f"{', '.join(ARRAY_DTYPES)}"))
    dtype = np.dtype(dtype_name)
    shape = tuple(int(s) for s in enc["shape"])
    count = 1
    for s in shape:
        count *= s
    if "bits" in enc:
        bits = enc["bits"]
        try:
            raw = base64.b64decode(bits, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(problem(at + ["bits"], bits, "must be base64 (A-Z, a-z, 0-9, +, /, padded with "
                                          "=): the array's little-endian bytes")) from None
        if len(raw) != count * dtype.itemsize:
            raise InvalidArgument(problem(at + ["bits"], bits, f"holds {len(raw)} bytes; shape={list(shape)} of "
                                          f"{dtype_name} needs {count * dtype.itemsize}"))
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    data = enc["data"]
    if len(data) != count:
        raise InvalidArgument(problem(at + ["data"], data, f"holds {len(data)} values; shape={list(shape)} needs "
                                      f"{count}"))
    kind = dtype.kind
    for j, v in enumerate(data):
        ok = (isinstance(v, bool) if kind == "b" else
              isinstance(v, int) and not isinstance(v, bool) if kind in "iu" else
              isinstance(v, (int, float)) and not isinstance(v, bool))
        if ok and kind in "iu":
            info = np.iinfo(dtype)
            ok = info.min <= v <= info.max
        if not ok:
            what = "true or false" if kind == "b" else (f"an integer {dtype_name} holds" if kind in "iu"
                                                         else "a number")
            raise InvalidArgument(problem(at + ["data", j], v, f"must be {what}"))
    return np.array(list(data), dtype=dtype).reshape(shape)


def _check_shape(family: str, name: str, got: tuple[int, ...], want: tuple[int, ...]) -> None:
    if family == "pipeline" and name == "x":
        # a relation's padded member carries columns past the longest sequence
        ok = len(got) == 2 and got[0] == want[0] and got[1] >= want[1]
    else:
        ok = got == want
    if not ok:
        raise InvalidArgument(problem(["arrays", name, "shape"], list(got), f"must be {list(want)}, the shape "
                                      f"the spec gives {name!r}"))
