"""The float64 NumPy oracle: EmbedID, NStepLSTM / NStepBiLSTM and embed -> LSTM, from the definitions.

Nothing here calls Chainer. Every input is cast to float64 and every result is float64, so the
oracle's values are the reference the subjects are compared with. The gradients are written out by
hand (backpropagation through time, no autodiff library) and are checked by finite differences
and against Chainer in float64 in ``suites/test_oracle.py``.

Semantics (Chainer 7.8.1, confirmed against its CPU output by the suite):

- ``embed``: ``y = W[x]`` with rows of ignored positions (``x == ignore_label``) equal to 0; a
  negative id ``-V <= id < 0`` that is not the ignore label wraps to ``V + id`` (NumPy indexing: what
  Chainer's CPU path does outside debug mode, documented as "negative ids wrap around"); an ignore label
  outside ``[0, V)`` simply marks positions to skip; an empty id batch gives empty ``y`` and a zero
  ``grad.W``; NaN/Inf in ``W`` reach ``y`` only through the rows ``x`` reads, NaN/Inf in ``gy`` reach only
  the rows of ``grad.W`` they are added into (IEEE: ``inf + -inf`` and ``NaN + v`` are NaN);
  ``grad.W`` is the scatter-add of the rows of ``gy`` into the rows of ``W`` named by ``x``
  (ignored positions add nothing), every sum **correctly rounded** in float64 (:mod:`harness.subjects.exact_sums`),
  so the value does not depend on any summation order; ``grad2.gy`` is the gradient of
  ``sum(grad.W * ggW)`` with respect to ``gy``, i.e. ``ggW[x]`` with ignored rows 0.
- ``lstm``: with ``z_g = W_g x + W_{g+4} h + b_g + b_{g+4}``::

      i = sigmoid(z_0)   f = sigmoid(z_1)   a = tanh(z_2)   o = sigmoid(z_3)
      c = f * c_prev + i * a                h = o * tanh(c)

  Chainer's docstring gives ``o`` with ``W_2`` and ``a`` with ``W_3``, but its code
  (``chainer/functions/rnn/n_step_lstm.py::_lstm`` stacks ``[w2, w0, w1, w3]`` into the
  ``(a, i, f, o)`` slots of ``F.lstm``) uses ``a`` with ``W_2`` and ``o`` with ``W_3``; the code is
  what runs, and this oracle follows it. Each sequence runs for its own length; the backward
  direction starts at the sequence's own last step (from ``hx``/``cx``) and walks back to t=0, its
  output at t is aligned with t; ``hy``/``cy`` hold each sequence's state after its last step in
  each direction; a layer's output is ``concat([forward, backward], axis=1)`` and feeds the next.
- ``pipeline``: ``e = embed(x, W, ignore_label)``, ``xs_i = e[i, :lengths[i]]`` into the LSTM; the
  gradient reaches ``W`` through the embedding (scatter-add, correctly rounded as above).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from harness.core.cases import lstm_weight_shapes, receives_gradient
from harness.core.errors import InvalidArgument
from harness.subjects.exact_sums import gather_rows, scatter_rows

__all__ = ["embed_oracle", "lstm_oracle", "pipeline_oracle", "ORACLES", "GATE_WEIGHTS", "DOCUMENTED_BAD",
           "documents"]

#: Which of Chainer's eight weights feed each gate: gate -> (input-to-hidden j, hidden-to-hidden j).
#: The biases follow the same indices. (Chainer's code, not its docstring: see the module doc.)
GATE_WEIGHTS: Mapping[str, tuple[int, int]] = {"i": (0, 4), "f": (1, 5), "a": (2, 6), "o": (3, 7)}

_F64 = np.float64


# ---- small helpers -------------------------------------------------------------------------------
def _need_array(arrays: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    if name not in arrays:
        raise InvalidArgument(f"{name} is missing from the case's arrays")
    return np.asarray(arrays[name])


def _real(arrays: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The array ``name``, checked to be real numbers of ``shape``, in its own dtype (every value of a float16,
    float32 or integer array is exact in float64: cast what is read, not the whole table)."""
    a = _need_array(arrays, name)
    if a.dtype.kind not in "fiu":
        raise InvalidArgument(f"{name} has dtype={a.dtype.name}; a real floating array is needed")
    if tuple(a.shape) != tuple(shape):
        raise InvalidArgument(f"{name} has shape={tuple(a.shape)}; expected {tuple(shape)}")
    return a


def _float(arrays: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    return _real(arrays, name, shape).astype(_F64, copy=False)  # read only here: no copy of a float64 input


def _ids_as_int64(x: np.ndarray, name: str) -> np.ndarray:
    if x.dtype.kind not in "iu":
        raise InvalidArgument(f"{name} has dtype={x.dtype.name}; ids must be integers")
    if x.dtype == np.uint64 and x.size and int(x.max()) > np.iinfo(np.int64).max:
        raise InvalidArgument(f"{name} contains id={int(x.max())} outside the int64 range")
    return x.astype(np.int64)


def _check_ids(ids: np.ndarray, valid: np.ndarray, vocab: int, ignore_label: int | None, name: str) -> None:
    """Raise for the first id (in C order) among ``valid`` positions outside [0, vocab) and not ignored."""
    bad = valid & ((ids < 0) | (ids >= vocab))
    if ignore_label is not None:
        bad &= ids != ignore_label
    if bad.any():
        first = int(ids.ravel()[np.flatnonzero(bad.ravel())[0]])
        raise InvalidArgument(f"{name} contains id={first} outside [0, vocab={vocab}) "
                              f"that is not ignore_label={ignore_label!r}")


def _ignore_label(spec: Mapping[str, Any]) -> int | None:
    il = spec.get("ignore_label")
    if il is not None and (not isinstance(il, (int, np.integer)) or isinstance(il, bool)):
        raise InvalidArgument(f"ignore_label={il!r} must be an int or None")
    return None if il is None else int(il)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))  # never overflows
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# ---- embed -----------------------------------------------------------------------------------------
def embed_oracle(spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """EmbedID forward, backward and double backward in float64.

    Returns ``y`` (``ids_shape + (D,)``), ``grad.W`` (``(V, D)``: scatter-add of ``gy``, correctly
    rounded) and ``grad2.gy`` (``ggW[x]``, ignored rows 0). A negative id ``>= -V`` wraps to ``V + id``; any
    other id outside ``[0, V)`` that is not the ignore label raises :class:`InvalidArgument`.
    """
    ignore_label = _ignore_label(spec)
    x = _ids_as_int64(_need_array(arrays, "x"), "x")
    W_raw = _need_array(arrays, "W")
    if W_raw.ndim != 2:
        raise InvalidArgument(f"W has shape={tuple(W_raw.shape)}; expected (vocab, width)")
    vocab, width = (int(n) for n in W_raw.shape)
    W = _real(arrays, "W", (vocab, width))
    gy = _real(arrays, "gy", tuple(x.shape) + (width,))
    if gy.dtype.kind != "f":
        gy = gy.astype(_F64)
    ggW = _real(arrays, "ggW", (vocab, width))
    keep = np.ones(x.shape, dtype=bool) if ignore_label is None else x != ignore_label
    x = np.where(keep & (x < 0) & (x >= -vocab), x + vocab, x)  # negative ids wrap (NumPy indexing)
    _check_ids(x, keep, vocab, ignore_label, "x")

    safe = np.where(keep, x, 0).ravel()
    y = gather_rows(W, safe).reshape(x.shape + (width,))
    ggy = gather_rows(ggW, safe).reshape(x.shape + (width,))
    all_kept = bool(keep.all())
    if not all_kept:  # ignored positions read nothing
        y[~keep] = 0.0
        ggy[~keep] = 0.0
    flat_gy = gy.reshape(-1, width)
    if all_kept:
        gW = scatter_rows(x.ravel(), flat_gy, vocab)
    else:
        kept = np.flatnonzero(keep.ravel())
        gW = scatter_rows(x.ravel()[kept], flat_gy, vocab, positions=kept)
    return {"y": y, "grad.W": gW, "grad2.gy": ggy}


# ---- LSTM core ---------------------------------------------------------------------------------------
def _lstm_settings(spec: Mapping[str, Any]) -> tuple[int, int, int, list[int]]:
    dropout = spec.get("dropout", 0.0)
    if float(dropout) != 0.0:
        raise InvalidArgument(f"dropout={dropout!r}: the oracle has no dropout masks")
    n_layers, hidden = int(spec["n_layers"]), int(spec["hidden"])
    dirs = 2 if bool(spec.get("bidirectional", False)) else 1
    lengths = [int(n) for n in spec["lengths"]]
    if n_layers < 1 or hidden < 1 or not lengths or min(lengths) < 0:
        raise InvalidArgument(f"n_layers={n_layers}, hidden={hidden}, lengths={lengths}: "
                              "need n_layers >= 1, hidden >= 1 and lengths of ints >= 0")
    return n_layers, hidden, dirs, lengths


def _direction_forward(X: np.ndarray, lengths: np.ndarray, Wx: np.ndarray, Wh: np.ndarray,
                       b: np.ndarray, h0: np.ndarray, c0: np.ndarray, reverse: bool
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """One direction of one layer over a padded batch ``X`` (B, T, in).

    ``Wx`` (4, H, in), ``Wh`` (4, H, H), ``b`` (4, H) in gate order (i, f, a, o). At step s the
    active sequences are those with ``s < length``; a forward one reads time s, a backward one
    time ``length - 1 - s``. Returns the outputs (B, T, H; zero at padding), the final h and c,
    and the tape for :func:`_direction_backward`.

    The input projections ``W_x x`` of every step are one product over all valid positions (they do not depend
    on the recurrence); only the recurrent part loops over the steps.
    """
    B, T, _ = X.shape
    H = Wh.shape[1]
    h, c = h0.copy(), c0.copy()
    out = np.zeros((B, T, H), dtype=X.dtype)
    Wx2, Wh2 = Wx.reshape(4 * H, -1), Wh.reshape(4 * H, H)
    valid = np.arange(T)[None, :] < lengths[:, None]
    projected = np.zeros((B, T, 4 * H), dtype=X.dtype)
    projected[valid] = X[valid] @ Wx2.T
    h_prevs = np.zeros((B, T, H), dtype=X.dtype)  # h before each step, for the weight gradient
    steps = []
    for s in range(T):
        rows = np.flatnonzero(lengths > s)
        t = lengths[rows] - 1 - s if reverse else np.full(rows.shape, s)
        h_prev, c_prev = h[rows], c[rows]
        h_prevs[rows, t] = h_prev
        z = (projected[rows, t] + h_prev @ Wh2.T).reshape(len(rows), 4, H) + b[None]
        gi, gf, ga, go = _sigmoid(z[:, 0]), _sigmoid(z[:, 1]), np.tanh(z[:, 2]), _sigmoid(z[:, 3])
        c_new = gf * c_prev + gi * ga
        tc = np.tanh(c_new)
        h_new = go * tc
        h[rows], c[rows] = h_new, c_new
        out[rows, t] = h_new
        steps.append((rows, t, c_prev, gi, gf, ga, go, tc))
    return out, h, c, {"steps": steps, "h_prevs": h_prevs, "valid": valid}


def _direction_backward(d_out: np.ndarray, dh: np.ndarray, dc: np.ndarray, tape: dict[str, Any],
                        Wx: np.ndarray, Wh: np.ndarray, X: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backpropagation through time for :func:`_direction_forward` over its input ``X`` (B, T, in).

    ``d_out`` (B, T, H) is the gradient of the outputs, ``dh``/``dc`` (B, H) of the final state.
    Returns dX (B, T, in), dWx, dWh, db (sum of both biases' gradient), dh0, dc0. Only the recurrence loops
    over the steps: the gradients of the inputs, the weights and the biases are products over every step's
    gate gradients at once.
    """
    H = Wh.shape[1]
    dh, dc = dh.copy(), dc.copy()
    Wx2, Wh2 = Wx.reshape(4 * H, -1), Wh.reshape(4 * H, H)
    valid = tape["valid"]
    dzs = np.zeros(X.shape[:2] + (4 * H,), dtype=Wx.dtype)
    for rows, t, c_prev, gi, gf, ga, go, tc in reversed(tape["steps"]):
        g_h = dh[rows] + d_out[rows, t]
        g_c = dc[rows] + g_h * go * (1.0 - tc * tc)
        dz = np.stack([g_c * ga * gi * (1.0 - gi),          # i
                       g_c * c_prev * gf * (1.0 - gf),      # f
                       g_c * gi * (1.0 - ga * ga),          # a
                       g_h * tc * go * (1.0 - go)], axis=1)  # o  -> (n, 4, H)
        dz2 = dz.reshape(len(rows), 4 * H)
        dzs[rows, t] = dz2
        dh[rows] = dz2 @ Wh2
        dc[rows] = g_c * gf
    dz_valid = dzs[valid]
    dX = np.zeros(X.shape, dtype=Wx.dtype)
    dX[valid] = dz_valid @ Wx2
    dWx = (dz_valid.T @ X[valid]).reshape(Wx.shape)
    dWh = (dz_valid.T @ tape["h_prevs"][valid]).reshape(Wh.shape)
    db = dz_valid.sum(axis=0).reshape(4, H)
    return dX, dWx, dWh, db, dh, dc


def _lstm_core(spec: Mapping[str, Any], X: np.ndarray, arrays: Mapping[str, np.ndarray], ft: Any = _F64
               ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Stacked (bi)LSTM over the padded batch ``X`` (B, T, in_size), forward and backward, computed in ``ft``
    (float64; the subject's dtype for the reference run of :func:`_with_noise`).

    Returns the padded outputs of the last layer (B, T, H*dirs), a dict with ``hy``, ``cy`` and
    every ``grad.*`` except the inputs', and the gradient of the padded inputs (B, T, in_size).
    """
    n_layers, H, dirs, lengths_list = _lstm_settings(spec)
    lengths = np.asarray(lengths_list, dtype=np.int64)
    B, T, in_size = X.shape
    S = n_layers * dirs
    given = spec.get("initial_state", "none") == "given"
    X = X.astype(ft)
    if given:
        hx, cx = _float(arrays, "hx", (S, B, H)).astype(ft), _float(arrays, "cx", (S, B, H)).astype(ft)
    else:
        hx = cx = np.zeros((S, B, H), dtype=ft)
    params = {name: _float(arrays, name, shape).astype(ft)
              for name, shape in lstm_weight_shapes(n_layers, in_size, H, dirs == 2)}
    # An output that receives no upstream gradient (grad_outputs) contributes nothing: a zero gradient.
    d_y = np.zeros((B, T, H * dirs), dtype=ft)
    for i, n in enumerate(lengths_list):
        if receives_gradient(spec, f"ys.{i}", B):
            d_y[i, :n] = _float(arrays, f"gys.{i}", (n, H * dirs))
    ghy = _float(arrays, "ghy", (S, B, H)).astype(ft) if receives_gradient(spec, "hy", B) else np.zeros((S, B, H), ft)
    gcy = _float(arrays, "gcy", (S, B, H)).astype(ft) if receives_gradient(spec, "cy", B) else np.zeros((S, B, H), ft)

    def stacked(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        Wx = np.stack([params[f"ws.{k}.{j}"] for j in range(4)])
        Wh = np.stack([params[f"ws.{k}.{j}"] for j in range(4, 8)])
        b = np.stack([params[f"bs.{k}.{j}"] + params[f"bs.{k}.{j + 4}"] for j in range(4)])
        return Wx, Wh, b

    hy, cy = np.zeros((S, B, H), dtype=ft), np.zeros((S, B, H), dtype=ft)
    inputs, tapes = [], []
    inp = X
    for layer in range(n_layers):
        inputs.append(inp)
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            out, hy[k], cy[k], tape = _direction_forward(inp, lengths, *stacked(k), hx[k], cx[k], d == 1)
            outs.append(out)
            tapes.append(tape)
        inp = np.concatenate(outs, axis=2)
    ys = inp

    result: dict[str, np.ndarray] = {"hy": hy, "cy": cy}
    dhx, dcx = np.zeros((S, B, H), dtype=ft), np.zeros((S, B, H), dtype=ft)
    for layer in reversed(range(n_layers)):
        d_in = np.zeros(inputs[layer].shape, dtype=ft)
        for d in range(dirs):
            k = layer * dirs + d
            Wx, Wh, _ = stacked(k)
            dX, dWx, dWh, db, dhx[k], dcx[k] = _direction_backward(
                d_y[:, :, d * H:(d + 1) * H], ghy[k], gcy[k], tapes[k], Wx, Wh, inputs[layer])
            d_in += dX
            for j in range(4):
                result[f"grad.ws.{k}.{j}"] = dWx[j]
                result[f"grad.ws.{k}.{j + 4}"] = dWh[j]
                result[f"grad.bs.{k}.{j}"] = db[j].copy()
                result[f"grad.bs.{k}.{j + 4}"] = db[j].copy()
        d_y = d_in
    if given:
        result["grad.hx"], result["grad.cx"] = dhx, dcx
    return ys, result, d_y


def lstm_oracle(spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """NStepLSTM / NStepBiLSTM (Chainer's semantics, float64) with manual backprop through time.

    Returns ``ys.{i}`` (len_i, H*dirs), ``hy``, ``cy`` (n_layers*dirs, B, H) and the gradients of
    ``L = sum_i sum(ys_i*gys_i) + sum(hy*ghy) + sum(cy*gcy)``: ``grad.xs.{i}``, ``grad.ws.{k}.{j}``,
    ``grad.bs.{k}.{j}`` and, when ``spec["initial_state"] == "given"``, ``grad.hx``, ``grad.cx``.
    ``dropout != 0`` raises :class:`InvalidArgument`.
    """
    n_layers, H, dirs, lengths = _lstm_settings(spec)
    in_size = int(spec["in_size"])
    B, T = len(lengths), max(lengths)
    X = np.zeros((B, T, in_size), dtype=_F64)
    for i, n in enumerate(lengths):
        X[i, :n] = _float(arrays, f"xs.{i}", (n, in_size))
    def run(ft: Any) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):  # NaN / Inf inputs propagate; they are not the oracle's error
            ys, result, dX = _lstm_core(spec, X, arrays, ft)
        out: dict[str, np.ndarray] = {f"ys.{i}": ys[i, :n].copy() for i, n in enumerate(lengths)}
        out.update(result)
        out.update({f"grad.xs.{i}": dX[i, :n].copy() for i, n in enumerate(lengths)})
        return out

    return _with_noise(spec, run)


#: The prefix of the reference-run outputs: ``noise.<tensor>`` is |the oracle computed in the subject's dtype -
#: the oracle in float64|, elementwise; the tolerance's ``amplification`` rule reads it.
NOISE_PREFIX = "noise."


def _with_noise(spec: Mapping[str, Any], run: Callable[[Any], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``run(float64)`` plus, for a float16/float32 case, ``noise.<name>``: how far the same computation in the
    case's dtype lands from float64. A deep or wide (chaotic) network amplifies rounding error; this measures
    how much for this case, so a subject's error is judged against what any correct implementation in that
    dtype would show, not against a bound for a well-conditioned one."""
    out = run(_F64)
    dt = np.dtype(spec.get("dtype", "float32"))
    if dt.kind == "f" and dt.itemsize < 8:
        # At one BLAS thread: OpenBLAS's float32 GEMMs round differently at each thread count, and the noise must
        # be a property of the case, the same in every context and on every machine (as the float64 run is, to
        # its own rounding), not of where the oracle happened to run.
        from harness.core.contexts import blas_controller

        with blas_controller().limit(limits=1, user_api="blas"):
            low = run(dt)
        with np.errstate(all="ignore"):
            out.update({NOISE_PREFIX + k: np.abs(low[k].astype(_F64) - v) for k, v in out.items()
                        if k in low and low[k].shape == v.shape})
    return out


def pipeline_oracle(spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Embedding then NStepLSTM: ``xs_i = embed_id(x, W, ignore_label)[i, :lengths[i]]``.

    Returns ``ys.{i}``, ``hy``, ``cy``, ``grad.W`` (the inputs' gradient scatter-added into the rows
    of ``W``, correctly rounded), ``grad.ws.*``, ``grad.bs.*`` and ``grad.hx``/``grad.cx`` when the
    initial state is given. Only positions within each length are embedded; an id there outside
    ``[0, V)`` that is not the ignore label raises :class:`InvalidArgument`.
    """
    n_layers, H, dirs, lengths = _lstm_settings(spec)
    ignore_label = _ignore_label(spec)
    B, T = len(lengths), max(lengths)
    x = _ids_as_int64(_need_array(arrays, "x"), "x")
    if x.ndim != 2 or x.shape[0] != B or x.shape[1] < T:
        raise InvalidArgument(f"x has shape={tuple(x.shape)}; expected ({B}, >= {T}) for lengths={lengths}")
    x = x[:, :T]
    W_raw = _need_array(arrays, "W")
    if W_raw.ndim != 2:
        raise InvalidArgument(f"W has shape={tuple(W_raw.shape)}; expected (vocab, width)")
    vocab, width = (int(n) for n in W_raw.shape)
    W = _float(arrays, "W", (vocab, width))
    inside = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    keep = inside if ignore_label is None else inside & (x != ignore_label)
    _check_ids(x, inside, vocab, ignore_label, "x")
    X = np.where(keep[..., None], W[np.where(keep, x, 0)], 0.0)
    def run(ft: Any) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):
            ys, result, dX = _lstm_core(spec, X, arrays, ft)
            gW = scatter_rows(x[keep], dX[keep].astype(_F64), vocab)
        out: dict[str, np.ndarray] = {f"ys.{i}": ys[i, :n].copy() for i, n in enumerate(lengths)}
        out.update(result)
        out["grad.W"] = gW
        return out

    return _with_noise(spec, run)


#: Bad inputs (case tags) whose semantics is documented and implemented here, per family: the oracle runs them
#: and an accepted one is judged against it like a valid case. Embed: negative ids wrap, NaN/Inf in ``W`` or
#: ``gy`` propagate to what reads them, float16/float64 ``W`` (Chainer accepts every float dtype). Not LSTM or
#: pipeline NaN/Inf: where a NaN meets a zero inside a BLAS GEMM is implementation-defined (measured: Chainer's
#: ``grad.ws.0.4`` is 0 where ``h0 = 0`` meets a NaN gate gradient, IEEE gives NaN; reference BLAS skips zero
#: operands), so those rules say ``any``.
DOCUMENTED_BAD: dict[str, frozenset[str]] = {
    "embed": frozenset({"bad:id_out_of_range_negative", "bad:nan_inf_w", "bad:nan_inf_input", "bad:w_dtype_espnet"}),
}


def documents(family: str, tags: Any) -> bool:
    """Whether the oracle of ``family`` implements the semantics of a bad input with these tags."""
    bad = {t for t in tags if t.startswith("bad:")}
    return bool(bad) and bad <= DOCUMENTED_BAD.get(family, frozenset())


ORACLES: dict[str, Callable[[Mapping[str, Any], Mapping[str, np.ndarray]], dict[str, np.ndarray]]] = {
    "embed": embed_oracle,
    "lstm": lstm_oracle,
    "pipeline": pipeline_oracle,
}
