"""`pipeline.embed_lstm`: padded ids through an embedding into NStepLSTM, as ESPnet's RNN decoders use them.

The ids ``x`` are a ``(batch, max_len)`` array padded with the ignore label; the embedding
(Chainer's ``L.EmbedID`` or ESPnet's deterministic one: the subject's parameter) maps them to
``(batch, max_len, width)``, each row is cut to its length and the list feeds ``L.NStepLSTM``
(or ``L.NStepBiLSTM``). Gradients flow back to the embedding matrix: ``grad.W``. The call itself is
:func:`harness.subjects.library_calls.embed_lstm`.
"""

from __future__ import annotations

from harness.subjects import library_calls as calls
from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run
from harness.subjects.embed import espnet_accepts

__all__ = ["SUBJECTS"]


_CHAINER = {
    "cpu": Declared(True, "sequential embedding backward and BLAS GEMMs at a fixed thread count"),
    "gpu": Declared(False, "the embedding's GPU backward declares atomicAdd"),
}
_ESPNET = {
    "cpu": Declared(True, "sequential embedding backward and BLAS GEMMs at a fixed thread count"),
    "gpu": Declared(True, "one-hot GEMM embedding backward; NStepLSTM without cuDNN"),
}

SUBJECTS: tuple[Subject, ...] = (
    Subject("pipeline.embed_lstm", "pipeline", call_run(calls.embed_lstm),
            declared=_CHAINER, description="L.EmbedID (ignore-label padding) into L.NStepLSTM / NStepBiLSTM",
            source="chainer/links/connection/embed_id.py + chainer/links/rnn/n_step_lstm.py"),
    Subject("pipeline.espnet_embed_lstm", "pipeline", call_run(calls.embed_lstm, target="espnet"),
            declared=_ESPNET, accepts=espnet_accepts,
            description="ESPnet's deterministic EmbedID into L.NStepLSTM / NStepBiLSTM",
            source="espnet/nets/chainer_backend/deterministic_embed_id.py + chainer/links/rnn/n_step_lstm.py"),
)
