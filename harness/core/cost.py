"""What a case will cost before it runs: the peak memory of one run and its work, from the case's shapes alone.

:func:`estimate` reads a case's spec (nothing is allocated, integer arithmetic) and returns a :class:`Cost`:

- ``inputs``: the bytes of the input arrays (:func:`harness.core.case_limits.estimate_case_bytes`, the draws included);
- ``subject``: the subject's working set for its forward and backward beyond its inputs. For NStepLSTM /
  NStepBiLSTM (Chainer without cuDNN, on CPU and on CuPy alike) that is dominated by what every step of every
  layer and direction keeps for backward: ``_lstm`` stacks the four input and four hidden weight matrices into
  a ``(4H, in + H)`` pair at every step (``chainer/functions/rnn/n_step_lstm.py::_stack_weight``), the linear
  functions retain them, and backward holds a gradient of each until the step's node is done. For ESPnet's
  deterministic ``EmbedIDGrad`` on the GPU it is the one-hot matrix ``ids x vocab`` (float32) its backward
  multiplies;
- ``oracle``: the float64 oracle's working set (:mod:`harness.subjects.oracle`: the padded batch, the tape of
  every step, its float64 run kept while the run in the case's dtype measures the noise);
- ``flops``: the floating-point work of the subject's forward and backward (the GEMMs);
- ``loops``: the Python-level iterations of a run (LSTM steps per layer and direction, the CPU embedding
  backward's row loop): what a run costs where the arrays are small.

:func:`run_timeout` turns a cost into the seconds one run may take (the one rule: base + work x rate).
Numpy only; nothing here imports Chainer.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from harness.core.case_limits import DEFAULT_LIMIT_TEXT, MAX_CASE_BYTES_ENV, estimate_case_bytes, max_case_bytes_default
from harness.core.cases import Case
from harness.core.errors import CaseError
from harness.core.model_cases import param_count, setting, snapshot_bound, step_shape

__all__ = ["Cost", "estimate", "run_timeout", "BASE_TIMEOUT", "SECONDS_PER_FLOP", "SECONDS_PER_LOOP",
           "PROCESS_BYTES", "STEP_BYTES", "ORACLE_PREFIXES", "gib", "machine_memory", "device_memory",
           "memory_limit", "over_limit", "check_case_cost", "refused_by_cost", "TIMED_OUT_TWICE", "timed_out_twice",
           "OOM_KILLED_TWICE", "oom_killed_twice",
           "not_judged_skip", "SERIAL_GEMM_MNK", "SERIAL_GEMV_ELEMENTS", "threaded_product"]

#: Resident bytes of a worker process before it builds a case (the interpreter, NumPy, Chainer, ESPnet):
#: part of every run's peak, so a limit compared with :attr:`Cost.peak` compares like with like.
PROCESS_BYTES = 128 << 20

#: The run timeout's parts (:func:`run_timeout`): a floor for any case (start-up, a busy machine), then seconds
#: per floating-point operation and per Python-level loop iteration, set for a machine whose cores are shared by
#: many processes (an order of magnitude slower than a quiet one), so that a timeout is a hang, not a slow run.
BASE_TIMEOUT = 120.0
SECONDS_PER_FLOP = 2e-8
SECONDS_PER_LOOP = 5e-3
#: The first part of the names of the subjects that hold the oracle's working set (the float64 oracles and the
#: sequential references run beside them).
ORACLE_PREFIXES = ("oracle", "reference")
#: Bytes of Python objects (function nodes, variables, their retained tuples) one step of one layer and
#: direction of Chainer's NStepLSTM keeps until backward is done, whatever its widths: what a long sequence of
#: small steps costs.
STEP_BYTES = 24 << 10


def gib(n: int) -> str:
    """Bytes as the messages say them: ``4.5 GiB``, ``310 MiB``."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{max(n, 0) / (1 << 20):.0f} MiB"


@dataclass(frozen=True)
class Cost:
    """The estimated cost of one run of a case (bytes and operations; see the module doc)."""

    inputs: int
    subject: int
    oracle: int
    flops: int
    loops: int

    @property
    def peak(self) -> int:
        """Peak resident bytes of the process that runs the case: the process itself, the inputs, and the larger
        of the subject's and the oracle's working sets (a worker runs one of them at a time)."""
        return PROCESS_BYTES + self.inputs + max(self.subject, self.oracle)

    def peak_of(self, subject: str) -> int:
        """Peak resident bytes of the process that runs ``subject`` alone on the case (an oracle's name, one
        starting ``oracle.`` or ``reference.``, holds the oracle's working set; any other the subject's)."""
        held = self.oracle if subject.split(".")[0] in ORACLE_PREFIXES else self.subject
        return PROCESS_BYTES + self.inputs + held

    @property
    def work(self) -> float:
        """The run's work in seconds at the rates of :func:`run_timeout` (without its base)."""
        return self.flops * SECONDS_PER_FLOP + self.loops * SECONDS_PER_LOOP


def run_timeout(cost: Cost, explicit: float | None = None) -> float:
    """Seconds one run of a case may take before its worker is killed: ``explicit`` (a user's ``--timeout``)
    where given, else ``BASE_TIMEOUT + work`` (:attr:`Cost.work`)."""
    if explicit is not None:
        return float(explicit)
    return BASE_TIMEOUT + cost.work


def _size(dtype: Any, default: int = 4) -> int:
    try:
        return max(int(np.dtype(dtype).itemsize), 1)
    except TypeError:
        return default


def _prod(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def _one_hot(subject: str | None, device: str) -> bool:
    """Whether the run multiplies ESPnet's one-hot matrix (its GPU backward; the CPU one loops)."""
    return device != "cpu" and (subject is None or "espnet" in subject)


def _lstm_cost(spec: Mapping[str, Any], in_size: int) -> tuple[int, int, int, int]:
    """(subject bytes, oracle bytes, flops, loops) of the (bi)LSTM part of a case whose inputs are ``in_size``
    wide."""
    lengths = [max(int(n), 0) for n in spec["lengths"]]
    hidden, n_layers = int(spec["hidden"]), int(spec["n_layers"])
    dirs = 2 if spec.get("bidirectional", False) else 1
    size = _size(spec.get("dtype", "float32"))
    steps, t_max, batch = sum(lengths), max(lengths + [0]), len(lengths)
    subject = oracle = flops = params = 0
    # Layer 0 reads the inputs, every later layer (the same shapes: closed form, so a case naming a huge number
    # of layers costs nothing to estimate) the previous layer's outputs.
    for width, layers in ((in_size, 1), (hidden * dirs, n_layers - 1)):
        if layers <= 0:
            continue
        stacked = 4 * hidden * (width + hidden)  # the (4H, in) and (4H, H) matrices stacked at every step
        # Every step keeps its stacked weights for backward, and backward holds their gradients (x 2); per active
        # row: the two linear outputs and their sum (4H each), the cell's c and h, the split and concatenated
        # states and the input row, again with their gradients; and each step's Python objects.
        subject += layers * dirs * (2 * t_max * stacked * size + 2 * steps * (14 * hidden + width) * size
                                    + t_max * STEP_BYTES)
        # The oracle's tape: per active row c_prev, four gates and tanh(c), per padded position h_prev (float64);
        # the padded layer input and outputs with their gradients.
        oracle += layers * (dirs * (steps * 6 * hidden + batch * t_max * hidden)
                            + 2 * batch * t_max * (width + hidden * dirs)) * 8
        flops += layers * dirs * 3 * 2 * steps * stacked
        params += layers * dirs * 4 * hidden * (width + hidden + 2)  # w0..w7 and b0..b7
    # One direction at a time: its input projections, then its gate gradients, at every padded position.
    oracle += batch * t_max * 4 * hidden * 8
    subject += 2 * params * size  # the parameters' gradients and the weights as Variables
    oracle += 3 * params * 8  # float64 copies, stacked copies, gradients
    # The oracle runs twice for a float16/float32 case (float64, then the case's dtype for the noise, while the
    # float64 results are kept): half as much again.
    if size < 8:
        oracle = oracle * 3 // 2
    loops = n_layers * dirs * t_max
    return subject, oracle, flops, loops


def _embed_cost(n_ids: int, vocab: int, width: int, size: int, subject: str | None, device: str,
                double: bool = True) -> tuple[int, int, int, int]:
    """(subject bytes, oracle bytes, flops, loops) of an embedding of ``n_ids`` ids into ``vocab x width``."""
    rows, table = n_ids * width, vocab * width
    # y, its gradient, grad.W; for the double backward grad.W * ggW and ggy.
    held = (2 * rows + table) * size + ((table + rows) * size if double else 0)
    flops = 3 * rows + table
    loops = n_ids if device == "cpu" else 0  # the CPU backward adds one row at a time in Python
    if _one_hot(subject, device):
        held += n_ids * vocab * 4 + n_ids * 8  # the float32 one-hot matrix and its flat index
        flops += 2 * n_ids * vocab * width
    # The oracle (float64): grad.W; y and ggy gathered, the rows of the scatter's sums and their gathers (the
    # tables are read in their own dtype: only what is gathered is cast).
    oracle = (table + 5 * rows) * 8 + n_ids * 24
    return held, oracle, flops, loops


def _model_cost(spec: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(subject bytes, oracle bytes, flops, loops) of a model case's K optimizer steps in one run.

    Held at once: the parameters, their gradients and two optimizer slots each (AdaDelta's two running means,
    Adam's two moments), the full snapshots the run records (:func:`harness.core.model_cases.snapshot_bound`
    of them), and one step's working set: its LSTM layers as :func:`_lstm_cost` counts them (a step's graph is
    freed before the next) and the output layer's logits, their softmax and gradient. The work is K steps'."""
    params = param_count(spec) * 4
    batch, t_max = step_shape(spec)
    vocab, hidden = int(spec["vocab"]), int(spec["hidden"])
    bi = spec["recipe"] == "espnet_blstmp_ctc"
    width = int(setting(spec, "eprojs")) if bi else hidden
    lstm = {"lengths": [t_max] * batch, "hidden": hidden, "n_layers": int(spec["n_layers"]), "bidirectional": bi}
    l_held, _, l_flops, l_loops = _lstm_cost(lstm, int(spec["width"]))
    logits = batch * (t_max + 1) * vocab * 4
    held = params * (4 + snapshot_bound(int(spec["steps"]))) + l_held + 3 * logits
    steps = int(spec["steps"])
    flops = steps * (l_flops + 6 * batch * (t_max + 1) * width * vocab)
    # a CTC loss runs its forward-backward recursion over the frames in Python-level loops; an LM does not
    loops = steps * (l_loops + (2 * t_max if bi else 0) + 1)
    return held, 0, flops, loops


def estimate(case: Case, *, device: str = "cpu", subject: str | None = None) -> Cost:
    """The cost of one run of ``case`` on ``device`` (``cpu`` or ``gpu``/``gpu:N``) by ``subject`` (a subject's
    name; None: the costliest subject of the case's family there). Shapes only: nothing is allocated."""
    s = case.spec
    device = "cpu" if device == "cpu" else "gpu"
    inputs = estimate_case_bytes(case)
    if case.family == "model":
        held, oracle, flops, loops = _model_cost(s)
    elif case.family == "embed":
        shape = [int(n) for n in s["ids_shape"]]
        w_shape = [int(n) for n in s.get("w_shape", (s["vocab"], s["width"]))]
        vocab, width = int(s["vocab"]), int(w_shape[-1]) if w_shape else int(s["width"])
        held, oracle, flops, loops = _embed_cost(_prod(shape), vocab, width, _size(s.get("w_dtype", "float32")),
                                                 subject, device)
    elif case.family == "lstm":
        held, oracle, flops, loops = _lstm_cost(s, int(s["in_size"]))
    else:  # pipeline: padded ids (batch, max_len) through the embedding into the LSTM
        lengths = [max(int(n), 0) for n in s["lengths"]]
        width = int(s["width"])
        held, oracle, flops, loops = _lstm_cost(s, width)
        e_held, e_oracle, e_flops, e_loops = _embed_cost(len(lengths) * max(lengths + [0]), int(s["vocab"]), width,
                                                         _size(s.get("dtype", "float32")), subject, device,
                                                         double=False)
        held, oracle, flops, loops = held + e_held, oracle + e_oracle, flops + e_flops, loops + e_loops
    return Cost(inputs=int(inputs), subject=int(held), oracle=int(oracle), flops=int(flops), loops=int(loops))


# ---- whether a BLAS thread count can matter to a case ---------------------------------------------------
#: The largest matrix products OpenBLAS runs on one thread whatever its thread count: a GEMM of m x n x k up to
#: SMP_THRESHOLD_MIN x GEMM_MULTITHREAD_THRESHOLD = 65,536 x 4 multiply-adds (OpenBLAS interface/gemm.c), a
#: matrix-vector product (NumPy's ``dot`` where one side is a single row or column) of fewer than 2,304 x 4
#: matrix elements (interface/gemv.c). Below both, a BLAS thread count cannot change a product's bits.
SERIAL_GEMM_MNK = 65_536 * 4
SERIAL_GEMV_ELEMENTS = 2_304 * 4


def _threaded(m: int, k: int, n: int) -> bool:
    """Whether OpenBLAS may split an (m x k) @ (k x n) product across threads (:data:`SERIAL_GEMM_MNK`)."""
    if min(m, n) == 1:  # a matrix-vector product: its matrix is k x max(m, n)
        return k * max(m, n) >= SERIAL_GEMV_ELEMENTS
    return m * n * k > SERIAL_GEMM_MNK


def threaded_product(case: Case) -> tuple[int, int, int] | None:
    """The largest matrix product ``(m, k, n)`` of one CPU run of ``case`` that OpenBLAS may split across
    threads, None where none may: an embedding's CPU run multiplies no matrices (a gather, and a row loop or
    ``add.at`` in backward); every step of Chainer's NStepLSTM multiplies its ``(b, in)`` input and ``(b, H)``
    state by the stacked ``(in, 4H)`` and ``(H, 4H)`` weights, and backward multiplies the same sizes in the
    two other orders (``b``: the sequences still running at that step; 1 where one runs alone). A model case
    (a whole training step, its own layers) is never said to have none."""
    s = case.spec
    if case.family == "embed":
        return None
    if case.family == "model":
        return (1 << 62, 1, 1)
    lengths = [max(int(n), 0) for n in s["lengths"]]
    hidden, n_layers = int(s["hidden"]), int(s["n_layers"])
    dirs = 2 if s.get("bidirectional", False) else 1
    widths = {int(s["in_size"] if case.family == "lstm" else s["width"]), hidden}
    if n_layers > 1:
        widths.add(hidden * dirs)
    batches = {sum(1 for n in lengths if n > t) for t in range(max(lengths + [0]))}  # each step's batch
    found = [(m, k, n) for b in batches for w in widths
             for m, k, n in ((b, w, 4 * hidden), (b, 4 * hidden, w), (4 * hidden, b, w)) if _threaded(m, k, n)]
    return max(found, key=lambda p: p[0] * p[1] * p[2]) if found else None


# ---- the limit a case's peak is held to --------------------------------------------------------------
def machine_memory() -> int:
    """This machine's physical memory in bytes (16 GiB where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 16 << 30


@functools.lru_cache(maxsize=None)
def device_memory(device: str) -> int | None:
    """The memory of GPU ``gpu:N`` in bytes as ``nvidia-smi`` reports it; None where it does not answer."""
    from harness.core.nvsmi import query_gpus

    index = int(device.split(":")[1]) if ":" in device else 0
    for gpu in query_gpus().get("gpus") or ():
        if gpu.get("index") == index and gpu.get("memory_total_mib"):
            return int(gpu["memory_total_mib"]) << 20
    return None


def memory_limit(device: str = "cpu", explicit: int | None = None) -> tuple[int, str]:
    """The one rule for the bytes a run of one case may need at its peak, and what sets it: ``explicit`` (a
    user's ``--max-case-bytes``), else :func:`harness.core.case_limits.max_case_bytes_default`
    (``$HARNESS_MAX_CASE_BYTES``, else what one worker may use: half this machine's memory); on a GPU, at most
    the device's memory."""
    if explicit is not None:
        limit, what = int(explicit), "--max-case-bytes"
    else:
        limit = max_case_bytes_default()
        what = MAX_CASE_BYTES_ENV if os.environ.get(MAX_CASE_BYTES_ENV, "").strip() else DEFAULT_LIMIT_TEXT
    if device != "cpu":
        on_device = device_memory(device)
        if on_device is not None and on_device < limit:
            limit, what = on_device, f"{device}'s memory"
    return limit, what


def over_limit(case: Case, *, device: str = "cpu", subject: str | None = None,
               explicit: int | None = None) -> str | None:
    """Why ``case`` cannot run on ``device`` (by ``subject``; None: the subject or its oracle, whichever needs
    more): one line naming the case, the estimate and the limit; None when it fits. A case whose shapes cannot
    even be estimated is not refused here (building it says what is wrong)."""
    try:
        cost = estimate(case, device=device, subject=subject)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        return None
    peak = cost.peak if subject is None else cost.peak_of(subject)
    limit, what = memory_limit(device, explicit)
    if peak <= limit:
        return None
    return (f"case {case.id} needs about {gib(peak)} at its peak ({peak:,} bytes: inputs {gib(cost.inputs)}, "
            f"working set {gib(peak - cost.inputs - PROCESS_BYTES)}){_OVER} {limit:,} bytes "
            f"({gib(limit)}: {what}; --max-case-bytes or ${MAX_CASE_BYTES_ENV} sets it)")


#: The words that mark a refusal by :func:`over_limit` (a skip reason that says it is "not judged", not "skipped").
_OVER = ", over the limit of"


def refused_by_cost(reason: str | None) -> bool:
    """Whether a task's skip reason is :func:`over_limit`'s: the check did not run because the case needs more
    memory than it may use, which is "not judged" (it fails the gate), unlike a device that is absent here."""
    return bool(reason) and _OVER in str(reason) and "needs about" in str(reason)


def check_case_cost(case: Case, *, device: str = "cpu", subject: str | None = None,
                    explicit: int | None = None) -> None:
    """Refuse ``case`` in one line (:class:`CaseError`) when :func:`over_limit` says it cannot run: before any
    worker starts."""
    why = over_limit(case, device=device, subject=subject, explicit=explicit)
    if why is not None:
        raise CaseError(why)


#: The words a task's skip reason starts with when its run timed out beside other runs, and again alone with a
#: doubled limit while the machine still starved it: nothing can be concluded of the subject ("not judged").
TIMED_OUT_TWICE = "timed out twice"


def timed_out_twice(limit: float, share: float) -> str:
    """The skip reason of a run that timed out twice, the second time alone with ``limit`` seconds of CPU, and got
    ``share`` of a core (the machine held it back: not a finding)."""
    return (f"{TIMED_OUT_TWICE} (limit {limit:g} s of CPU, CPU share {share:.0%}): the machine starved the worker, "
            f"alone too; rerun on a quieter machine or with a larger --timeout")


#: The start of the skip reason of a run the kernel's out-of-memory killer ended twice, the second time alone.
OOM_KILLED_TWICE = "killed for memory twice"


def oom_killed_twice() -> str:
    """The skip reason of a run whose worker the kernel's out-of-memory killer ended beside other runs and again
    alone: the machine has not the memory this run needs beside what else runs on it (not a finding)."""
    return (f"{OOM_KILLED_TWICE}: the kernel's out-of-memory killer ended the worker, alone too; the machine's "
            f"memory was short (other processes hold it): rerun with more memory free")


def not_judged_skip(reason: str | None) -> bool:
    """Whether a task skipped for ``reason`` is "not judged" (it fails the gate): a case too large to run here
    (:func:`refused_by_cost`), a run the machine starved twice (:func:`timed_out_twice`) or whose memory ran out
    twice (:func:`oom_killed_twice`); a device that is
    absent here is not (that cell was never asked of this machine)."""
    return refused_by_cost(reason) or str(reason or "").startswith((TIMED_OUT_TWICE, OOM_KILLED_TWICE))
