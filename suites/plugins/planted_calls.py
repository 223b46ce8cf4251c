"""The library calls of the planted test plug-ins, in a module that imports no harness code.

``planted.py``, ``planted_lstm.py``, ``badinput.py`` and ``rowwise.py`` make their subjects with
``harness.subjects.call_runs.call_run(<a call here>, **params)``, so ``harness export`` can copy this module into a
standalone script (the rule for plug-ins: a call's module imports only NumPy and the library; a call may use the
shipped calls through ``env.calls``). Not part of the harness.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def planted_embed(env: Any, a: dict, spec: Any, emit: Any) -> None:
    """``y = W[x]`` whose backward adds each row's gradient in an order drawn from the operating system's
    entropy on every run (as an ``atomicAdd`` scatter does on a GPU): ``grad.W`` differs run to run wherever an
    id repeats."""
    W = np.asarray(a["W"], dtype=np.float32)
    x = np.asarray(a["x"]).astype(np.int64).ravel() % W.shape[0]
    gy = np.asarray(a["gy"], dtype=np.float32).reshape(x.size, -1)
    with env.phase("forward"):
        y = W[x]
    with env.phase("backward"):
        order = np.random.default_rng(int.from_bytes(os.urandom(8), "little")).permutation(x.size)
        gW = np.zeros_like(W)
        for i in order:  # a float32 sum in a random order: bits differ where an id repeats
            gW[x[i]] += gy[i]
    emit("y", y.reshape(*np.asarray(a["x"]).shape, W.shape[1]))
    emit("grad.W", gW)


def nsteplstm_perturbed(env: Any, a: dict, spec: Any, emit: Any, mode: str = "scale") -> None:
    """``L.NStepLSTM`` (the shipped call) with its recorded ``hy`` perturbed: times 1.01 (``scale``), or one
    element moved by one ULP in a direction drawn from the OS's entropy on every run (``noise``)."""

    def perturbed(name: str, value: Any) -> None:
        if name == "hy" and value is not None:
            hy = np.array(getattr(value, "array", value))
            if mode == "noise":
                if os.urandom(1)[0] & 1:
                    flat = hy.reshape(-1)
                    flat[0] = np.nextafter(flat[0], np.asarray(np.inf, dtype=flat.dtype))
            else:
                hy = hy * 1.01
            value = hy
        emit(name, value)

    env.calls.lstm_link(env, a, spec, perturbed)


def _kept(x: np.ndarray, il: Any) -> np.ndarray:
    return x != il if il is not None else np.ones(x.shape, bool)


def planted_embed_id(env: Any, a: dict, spec: Any, emit: Any, plant: str = "", reverse: bool = False,
                     refuse_nonfinite_in_blas1: bool = False) -> None:
    """Chainer's ``F.embed_id`` forward and the CPU backward's own loop, with a planted change: ``clip_high``
    (ids >= vocab read row vocab - 1 outside debug mode; the backward still indexes with the real ids),
    ``clip_negative`` (negative ids read and write row 0 outside debug mode), ``reverse`` (the loop in reverse
    index order), ``refuse_nonfinite_in_blas1`` (a non-finite W refused with FloatingPointError at 1 BLAS
    thread)."""
    chainer = env.chainer
    x, W, gy = a["x"], a["W"], a["gy"]
    il = spec.get("ignore_label")
    vocab = W.shape[0] if W.ndim else 0
    with env.phase("forward"):
        if refuse_nonfinite_in_blas1 and env.context.get("blas_threads") == 1 and W.dtype.kind == "f" \
                and not np.isfinite(W).all():
            raise FloatingPointError("W holds NaN or Inf")
        ids = x
        if plant and not chainer.config.debug and x.dtype.kind == "i":
            if plant == "clip_high":
                ids = np.where(_kept(x, il) & (x >= vocab), vocab - 1, x).astype(x.dtype)
            else:
                ids = np.where(_kept(x, il) & (x < 0), 0, x).astype(x.dtype)
        y = chainer.functions.embed_id(ids, W, ignore_label=il)
    emit("y", y)
    with env.phase("backward"):
        # Chainer's CPU loop (EmbedIDGrad.forward), with the ids the forward used only where a plant says so.
        back = ids if plant == "clip_negative" else x
        gW = np.zeros(W.shape, dtype=gy.dtype)
        pairs = list(zip(back.ravel(), gy.reshape(back.size, -1)))
        for ix, row in (reversed(pairs) if reverse else pairs):
            if ix == il:
                continue
            gW[ix] += row
    emit("grad.W", gW)


def _rows_of(a: dict) -> np.ndarray:
    x = np.asarray(a["x"]).astype(np.int64) % a["W"].shape[0]
    return a["W"][x]


def rowwise(env: Any, a: dict, spec: Any, emit: Any) -> None:
    """``y = 2 * W[x]``, row by row: batch-invariant by construction."""
    with env.phase("forward"):
        y = (_rows_of(a) * np.float32(2)).astype(np.float32)
    emit("y", y)


def rowmix(env: Any, a: dict, spec: Any, emit: Any) -> None:
    """``y = W[x] + mean of W[x] over the whole batch``: every row depends on the others."""
    with env.phase("forward"):
        e = _rows_of(a).astype(np.float32)
        mean = np.zeros(e.shape[1:], np.float32)
        for row in e.reshape((e.shape[0], -1) + e.shape[-1:]):  # a sequential float32 sum over the batch
            mean += row.sum(axis=0, dtype=np.float32) if row.ndim > 1 else row
        y = e + mean / np.float32(max(e.shape[0], 1))
    emit("y", y.astype(np.float32))


def _dimension(a: dict, spec: Any, family: str, name: str) -> int:
    """One size of a case, read as the harness's table of recipe dimensions reads it (the ids in one batch, the
    most ids one row receives, the longest sequence ...), from the spec and the ids alone."""
    if name == "pileup":
        x = np.asarray(a["x"]).ravel()
        il = spec.get("ignore_label") if family == "embed" else None
        kept = x[x != il] if il is not None else x
        return int(np.unique(kept, return_counts=True)[1].max()) if kept.size else 0
    if family == "embed":
        return {"ids": int(np.asarray(a["x"]).size), "vocab": int(spec["vocab"]), "width": int(spec["width"])}[name]
    lengths = [int(n) for n in spec["lengths"]]
    sizes = {"steps": max(lengths), "batch": len(lengths), "layers": int(spec["n_layers"]),
             "ids": len(lengths) * max(lengths)}
    return sizes[name] if name in sizes else int(spec[name])


def past_boundary(env: Any, a: dict, spec: Any, emit: Any, call: str = "", family: str = "", dimension: str = "",
                  at: int = 0) -> None:
    """The shipped call ``call`` with its first floating-point output times 1.01 where the case's ``dimension``
    is at least ``at``, and untouched below: a release whose bits change only past one size."""
    crossed = _dimension(a, spec, family, dimension) >= at
    done: list[str] = []

    def planted(name: str, value: Any) -> None:
        if crossed and not done and value is not None:
            arr = np.array(getattr(value, "array", value))
            if arr.dtype.kind == "f":
                done.append(name)
                value = arr * arr.dtype.type(1.01)
        emit(name, value)

    getattr(env.calls, call)(env, a, spec, planted)
