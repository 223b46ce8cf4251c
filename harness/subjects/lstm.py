"""LSTM subjects: Chainer's ``NStepLSTM`` / ``NStepBiLSTM`` links and ``n_step_lstm`` / ``n_step_bilstm``.

The library calls are :func:`harness.subjects.library_calls.lstm_link` and
:func:`~harness.subjects.library_calls.lstm_function`.
Outputs (names shared with the oracle): ``hy``, ``cy``, ``ys.{i}``; gradients of
``sum(ys_i * gys_i) + sum(hy * ghy) + sum(cy * gcy)`` (one ``chainer.backward`` call with the
case's upstream gradients): ``grad.xs.{i}``, ``grad.hx``, ``grad.cx`` (when the case gives initial
states), ``grad.ws.{k}.{j}``, ``grad.bs.{k}.{j}``.
"""

from __future__ import annotations

from harness.core.cases import Case
from harness.subjects import library_calls as calls
from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run

__all__ = ["SUBJECTS"]


def _uni(case: Case) -> bool:
    return not case.spec.get("bidirectional", False)


def _bi(case: Case) -> bool:
    return bool(case.spec.get("bidirectional", False))


_DECLARED = {
    "cpu": Declared(True, "NumPy/BLAS GEMMs and elementwise ops; reproducible at a fixed BLAS thread count"),
    "gpu": Declared(True, "without cuDNN (CuPy 14): cuBLAS GEMMs and CuPy elementwise kernels, no atomics declared"),
}

SUBJECTS: tuple[Subject, ...] = (
    Subject("chainer.NStepLSTM", "lstm", call_run(calls.lstm_link), declared=_DECLARED, accepts=_uni,
            description="the link chainer.links.NStepLSTM", source="chainer/links/rnn/n_step_lstm.py"),
    Subject("chainer.NStepBiLSTM", "lstm", call_run(calls.lstm_link, bidirectional=True), declared=_DECLARED,
            accepts=_bi, description="the link chainer.links.NStepBiLSTM", source="chainer/links/rnn/n_step_lstm.py"),
    Subject("chainer.n_step_lstm", "lstm", call_run(calls.lstm_function), declared=_DECLARED, accepts=_uni,
            description="chainer.functions.n_step_lstm with explicit weight lists",
            source="chainer/functions/rnn/n_step_lstm.py"),
    Subject("chainer.n_step_bilstm", "lstm", call_run(calls.lstm_function, bidirectional=True), declared=_DECLARED,
            accepts=_bi, description="chainer.functions.n_step_bilstm with explicit weight lists",
            source="chainer/functions/rnn/n_step_lstm.py"),
)
