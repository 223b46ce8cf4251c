"""`pipeline.embed_lstm`: padded ids through an embedding into NStepLSTM, as ESPnet's RNN decoders use them.

The ids ``x`` are a ``(batch, max_len)`` array padded with the ignore label; the embedding
(Chainer's ``L.EmbedID`` or ESPnet's deterministic one: the subject's parameter) maps them to
``(batch, max_len, width)``, each row is cut to its length and the list feeds ``L.NStepLSTM``
(or ``L.NStepBiLSTM``). Gradients flow back to the embedding matrix: ``grad.W``.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.core.cases import Case, build_arrays
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject
from harness.subjects.embed import espnet_accepts, espnet_module
from harness.subjects.lstm import load_link_params, record_state_and_param_grads, run_lstm_outputs

__all__ = ["SUBJECTS", "make_pipeline"]


def make_pipeline(embed_cls: Callable[[], Any]) -> Callable[[Case, Device, Context, Recorder], None]:
    """A pipeline run function with the given embedding link class (a zero-argument getter)."""

    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        chainer = import_chainer()
        L = chainer.links
        s = case.spec
        a = {k: device.put(v) for k, v in build_arrays(case).items()}
        lengths = [int(n) for n in s["lengths"]]
        vocab, width, hidden, n_layers = int(s["vocab"]), int(s["width"]), int(s["hidden"]), int(s["n_layers"])
        bi = bool(s.get("bidirectional", False))
        ignore = s.get("ignore_label")
        embed = embed_cls()(vocab, width, ignore_label=-1 if ignore is None else ignore)
        lstm = (L.NStepBiLSTM if bi else L.NStepLSTM)(n_layers, width, hidden, float(s.get("dropout", 0.0)))
        embed.to_device(device.chainer_device())
        lstm.to_device(device.chainer_device())
        embed.W.array = a["W"]
        params = load_link_params(lstm, a, n_layers * (2 if bi else 1))
        hx = chainer.Variable(a["hx"]) if "hx" in a else None
        cx = chainer.Variable(a["cx"]) if "cx" in a else None
        if float(s.get("dropout", 0.0)) > 0:
            device.seed(int(s.get("dropout_seed", case.seed)))
        with rec.phase("forward"):
            e = embed(a["x"])
            xs = [e[i, :n] for i, n in enumerate(lengths)]
            hy, cy, ys = lstm(hx, cx, xs)
        embed.cleargrads()  # Chainer parameters start with NaN gradients on purpose
        lstm.cleargrads()
        run_lstm_outputs(rec, hy, cy, ys, a, chainer, case.spec)
        rec.output("grad.W", embed.W.grad)
        record_state_and_param_grads(rec, hx, cx, params)

    return run


_CHAINER = {
    "cpu": Declared(True, "sequential embedding backward and BLAS GEMMs at a fixed thread count"),
    "gpu": Declared(False, "the embedding's GPU backward declares atomicAdd"),
}
_ESPNET = {
    "cpu": Declared(True, "sequential embedding backward and BLAS GEMMs at a fixed thread count"),
    "gpu": Declared(True, "one-hot GEMM embedding backward; NStepLSTM without cuDNN"),
}

SUBJECTS: tuple[Subject, ...] = (
    Subject("pipeline.embed_lstm", "pipeline", make_pipeline(lambda: import_chainer().links.EmbedID),
            declared=_CHAINER, description="L.EmbedID (ignore-label padding) into L.NStepLSTM / NStepBiLSTM",
            source="chainer/links/connection/embed_id.py + chainer/links/rnn/n_step_lstm.py"),
    Subject("pipeline.espnet_embed_lstm", "pipeline", make_pipeline(lambda: espnet_module().EmbedID),
            declared=_ESPNET, accepts=espnet_accepts, description="ESPnet's deterministic EmbedID into L.NStepLSTM / NStepBiLSTM",
            source="espnet/nets/chainer_backend/deterministic_embed_id.py + chainer/links/rnn/n_step_lstm.py"),
)
