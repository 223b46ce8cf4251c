"""The library calls of the model subjects: K optimizer steps of a model, as ESPnet1's chainer backend trains it.

One call, :func:`train` (``call(env, a, spec, emit, recipe=...)`` as in
:mod:`harness.subjects.library_calls`), builds the
recipe's model from the implementations under test, draws its initial parameters and every step's minibatch
from the case's seed, and runs ``steps`` steps, each as ESPnet1's ``CustomUpdater.update_core``
(``espnet/nets/chainer_backend/rnn/training.py``) does: clear the gradients, forward and loss, backward, the
gradient norm, and the optimizer's update (with ``GradientClipping`` as a hook, as ``espnet/asr/chainer_backend/
asr.py`` adds it) unless that norm is NaN. The recipes:

- ``espnet_blstmp_ctc``: ESPnet's ``Encoder("blstmp", ...)`` (``L.NStepBiLSTM`` layers with linear bottlenecks)
  into ESPnet's ``CTC`` link (a linear head and ``F.connectionist_temporal_classification``, blank 0);
- ``espnet_rnnlm``: ESPnet's deterministic ``EmbedID`` (no ignore label; inputs padded with eos = V - 1, as its
  decoders pad them) into ``L.NStepLSTM``, a linear output and softmax cross entropy;
- ``chainer_lm``: the same with Chainer's ``L.EmbedID(ignore_label=-1)`` and inputs padded with -1.

What a run records, per step ``k`` (the loss and parameters of step k are those of its forward, then its update):
``step.{k}.loss``, ``step.{k}.grad_norm`` (the norm the NaN rule reads, before clipping), ``step.{k}.digest``
(SHA-256 of every parameter's bytes after the update, in name order: bit-identity at every step, cheaply) and,
at :func:`snapshot_steps` only (0, 1, 2, 4, 8, ..., K - 1, so memory stays bounded), ``step.{k}.param.{name}``.

This module imports nothing but NumPy and the standard library (the rule of the calls modules: ``harness
export`` may copy it verbatim); ESPnet's modules are imported by name, after ``env.chainer`` has applied the
compatibility layer.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import zlib
from typing import Any, Callable

import numpy as np

Emit = Callable[[str, Any], None]

RECIPES = ("espnet_blstmp_ctc", "espnet_rnnlm", "chainer_lm")
#: A spec's optional keys and their defaults (harness.core.model_cases.DEFAULTS says the same on the harness's side).
DEFAULTS: dict[str, Any] = {"min_len": 1, "optimizer": "adadelta", "clip": 5.0, "id_kind": "uniform"}
#: ESPnet1's AdaDelta epsilon (its ``--eps`` default).
ADADELTA_EPS = 1e-8
#: The seeds' stream numbers: the initial parameters, and each step's minibatch.
_PARAMS, _BATCH = 2, 1


def _get(spec: Any, key: str) -> Any:
    return spec[key] if key in spec else DEFAULTS[key]


def snapshot_steps(steps: int) -> list[int]:
    """The steps whose parameters a run records in full: 0, the powers of two below ``steps``, and the last."""
    out = {0, max(int(steps), 1) - 1}
    p = 1
    while p < steps:
        out.add(p)
        p *= 2
    return sorted(out)


def param_name(path: str) -> str:
    """A Chainer parameter path (``/enc/enc/0/birnn0/0/w0``) as a recorded name (``enc.enc.0.birnn0.0.w0``)."""
    return path.strip("/").replace("/", ".")


# ---- the draws ---------------------------------------------------------------------------------------------
def _ids(rng: Any, kind: str, low: int, high: int, n: int) -> np.ndarray:
    """``n`` ids in ``[low, high)`` of the edge kind: uniform, a few repeated (collision), one id
    (all_equal), or sorted."""
    high = max(high, low + 1)
    if kind == "all_equal":
        return np.full(n, int(rng.integers(low, high)), dtype=np.int32)
    if kind == "collision":
        few = rng.integers(low, high, size=min(3, high - low))
        return few[rng.integers(0, few.size, size=n)].astype(np.int32)
    ids = rng.integers(low, high, size=n).astype(np.int32)
    return np.sort(ids) if kind == "sorted" else ids


def draw_batch(spec: Any, seed: int, k: int) -> dict[str, Any]:
    """Step ``k``'s minibatch, ragged and sorted longest first (host arrays). CTC: ``xs`` (features, one
    ``(T_i, width)`` array each) and ``ys`` (labels in 1..V-1, at most half the subsampled frames); an LM:
    ``x`` (``(B, T_max + 1)`` ids: eos, then the tokens, padded with ``pad``) and ``t`` (the tokens, then eos,
    concatenated) with each row's ``lengths``."""
    rng = np.random.default_rng([seed, _BATCH, k])
    batch, lo, hi = int(spec["batch"]), int(_get(spec, "min_len")), int(spec["max_len"])
    lengths = sorted((int(n) for n in rng.integers(lo, hi + 1, size=batch)), reverse=True)
    vocab, kind = int(spec["vocab"]), str(_get(spec, "id_kind"))
    if spec["recipe"] == "espnet_blstmp_ctc":
        factor = int(np.prod(spec.get("subsample", [1])[1:]))  # RNNP subsamples by factors 1..n_layers
        xs = [rng.standard_normal((n, int(spec["width"]))).astype(np.float32) for n in lengths]
        ys = []
        for n in lengths:
            frames = -(-n // factor)
            ys.append(_ids(rng, kind, 1, vocab, max(1, int(rng.integers(1, max(frames // 2, 1) + 1)))))
        return {"xs": xs, "ys": ys}
    eos = vocab - 1
    pad = eos if spec["recipe"] == "espnet_rnnlm" else -1
    x = np.full((batch, hi + 1), pad, dtype=np.int32)
    targets = []
    for i, n in enumerate(lengths):
        tokens = _ids(rng, kind, 0, eos, n)
        x[i, 0] = eos  # sos is eos, as ESPnet's decoders and LMs feed it
        x[i, 1:n + 1] = tokens
        targets.append(np.append(tokens, np.int32(eos)).astype(np.int32))
    return {"x": x, "t": np.concatenate(targets), "lengths": [n + 1 for n in lengths]}


def init_params(params: list[tuple[str, Any]], seed: int, perturb: Any, xp: Any) -> None:
    """Overwrite every parameter with a draw from the seed (its own stream per name): matrices N(0, 1/fan_in),
    vectors zero (Chainer's default bias). ``perturb`` (``{"param": name, "index": i}``, the name optional: the
    first matrix) then moves one element one ULP up: the instability baseline's start."""
    for name, p in params:
        shape, dtype = p.array.shape, p.array.dtype
        if len(shape) >= 2:
            rng = np.random.default_rng([seed, _PARAMS, zlib.crc32(name.encode())])
            host = (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(dtype)
        else:
            host = np.zeros(shape, dtype=dtype)
        p.array = xp.asarray(host)
    if perturb is None:
        return
    names = [n for n, p in params if p.array.ndim >= 2]
    want = perturb.get("param", names[0] if names else params[0][0])
    found = dict(params).get(want)
    if found is None:
        raise ValueError(f"perturb names no parameter {want!r} (the model's: {', '.join(n for n, _ in params)})")
    flat = found.array.reshape(-1)
    i = int(perturb["index"]) % flat.size
    flat[i] = xp.nextafter(flat[i], xp.asarray(np.inf, dtype=flat.dtype))


# ---- the models --------------------------------------------------------------------------------------------
def _ctc_model(env: Any, spec: Any) -> tuple[Any, Callable[[dict], Any]]:
    chainer = env.chainer
    encoders = importlib.import_module("espnet.nets.chainer_backend.rnn.encoders")
    ctc = importlib.import_module("espnet.nets.chainer_backend.ctc")
    layers, hidden = int(spec["n_layers"]), int(spec["hidden"])
    proj = int(spec.get("eprojs", hidden))
    subsample = np.array(spec.get("subsample", [1] * (layers + 1)), dtype=np.int64)
    model = chainer.Chain()
    with model.init_scope():
        model.enc = encoders.Encoder("blstmp", int(spec["width"]), layers, hidden, proj, subsample, 0.0)
        model.ctc = ctc.CTC(int(spec["vocab"]), proj, 0.0)

    def loss(batch: dict) -> Any:
        xs = [env.xp.asarray(x) for x in batch["xs"]]
        hs, _ = model.enc(xs, [x.shape[0] for x in xs])
        return model.ctc(hs, [env.xp.asarray(y) for y in batch["ys"]])

    return model, loss


def _lm_model(env: Any, spec: Any, espnet: bool) -> tuple[Any, Callable[[dict], Any]]:
    chainer = env.chainer
    F, L = chainer.functions, chainer.links
    vocab, width, hidden = int(spec["vocab"]), int(spec["width"]), int(spec["hidden"])
    model = chainer.Chain()
    with model.init_scope():
        # initialW=0: init_params draws every parameter from the seed, so no random draw here
        model.embed = (env.espnet().EmbedID(vocab, width, initialW=0, ignore_label=None) if espnet
                       else L.EmbedID(vocab, width, initialW=0, ignore_label=-1))
        model.lstm = L.NStepLSTM(int(spec["n_layers"]), width, hidden, 0.0, initialW=0)
        model.lo = L.Linear(hidden, vocab, initialW=0)

    def loss(batch: dict) -> Any:
        e = model.embed(env.xp.asarray(batch["x"]))
        _, _, ys = model.lstm(None, None, [e[i, :n] for i, n in enumerate(batch["lengths"])])
        return F.softmax_cross_entropy(model.lo(F.concat(ys, axis=0)), env.xp.asarray(batch["t"]))

    return model, loss


def build_model(env: Any, spec: Any, recipe: str) -> tuple[Any, Callable[[dict], Any]]:
    """The recipe's model (on the device) and its loss of one minibatch."""
    if recipe == "espnet_blstmp_ctc":
        model, loss = _ctc_model(env, spec)
    elif recipe in ("espnet_rnnlm", "chainer_lm"):
        model, loss = _lm_model(env, spec, espnet=recipe == "espnet_rnnlm")
    else:
        raise ValueError(f"recipe={recipe!r} is not one of {', '.join(RECIPES)}")
    env.to_device(model)
    return model, loss


def make_optimizer(env: Any, spec: Any) -> Any:
    """ESPnet1's optimizer: AdaDelta(eps=1e-8) or Adam() (their defaults), clipped at ``clip`` (ESPnet: 5)."""
    chainer = env.chainer
    name = str(_get(spec, "optimizer"))
    return (chainer.optimizers.AdaDelta(eps=ADADELTA_EPS) if name == "adadelta" else chainer.optimizers.Adam())


def _host(a: Any) -> np.ndarray:
    """A host copy's view of a device array, C-ordered; a 0-d array stays 0-d."""
    h = np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, (np.ndarray, np.generic)) else a)
    return h if h.flags.c_contiguous else h.copy(order="C")


def digest(params: list[tuple[str, Any]]) -> np.ndarray:
    """SHA-256 of every parameter's bytes in name order, as 32 uint8."""
    h = hashlib.sha256()
    for name, p in params:
        h.update(name.encode())
        h.update(_host(p.array).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


def run_training(env: Any, spec: Any, emit: Emit, recipe: str, *, optimizer: Any = None,
                 loss_hook: Callable[[Any], Any] | None = None) -> None:
    """``spec["steps"]`` steps of the recipe's model (see the module). ``optimizer`` (a Chainer optimizer, made
    here when None) and ``loss_hook`` (the loss's Variable in, the one to back-propagate out) are for plug-ins
    that plant a change in one part of a step."""
    chainer = env.chainer
    model, loss_of = build_model(env, spec, recipe)
    params = sorted((param_name(path), p) for path, p in model.namedparams())
    init_params(params, int(env.case_seed), spec.get("perturb"), env.xp)
    opt = make_optimizer(env, spec) if optimizer is None else optimizer
    opt.setup(model)
    opt.add_hook(chainer.optimizer_hooks.GradientClipping(float(_get(spec, "clip"))))
    steps = int(spec["steps"])
    snaps = set(snapshot_steps(steps))
    for k in range(steps):
        batch = draw_batch(spec, int(env.case_seed), k)
        model.cleargrads()
        with env.phase("forward"):
            loss = loss_of(batch)
            if loss_hook is not None:
                loss = loss_hook(loss)
        with env.phase("backward"):
            loss.backward()
            loss.unchain_backward()
            # ESPnet's rule: the gradient norm, and no update at all where it is NaN
            norm = math.sqrt(sum(float(_host((p.grad * p.grad).sum())) for _, p in params if p.grad is not None))
            if not math.isnan(norm):
                opt.update()
        emit(f"step.{k}.loss", _host(loss.array).copy())
        emit(f"step.{k}.grad_norm", np.asarray(norm, dtype=np.float64))
        emit(f"step.{k}.digest", digest(params))
        if k in snaps:
            for name, p in params:
                emit(f"step.{k}.param.{name}", _host(p.array).copy())


def train(env: Any, a: dict, spec: Any, emit: Emit, recipe: str = "espnet_rnnlm") -> None:
    """The model subjects' call: :func:`run_training` of the case's spec (``a`` is empty: the model draws its own)."""
    run_training(env, spec, emit, recipe)
