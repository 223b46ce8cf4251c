"""The controls: a subject nondeterministic by construction, and its deterministic twin.

Both compute the embedding backward ``gW[x[i]] += gy[i]`` as a float32 scatter-add. The
nondeterministic control shuffles the accumulation order on every run, with fresh OS entropy,
as unordered atomicAdds do on a GPU; float addition is not associative, so with three or more
repeats of an id the bits of ``grad.W`` change from run to run. The deterministic control adds
in index order. The harness must call the first nondeterministic and the second deterministic,
or it is broken: the comparator's and the gate's own tests use both.
"""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "scatter_add"]


def scatter_add(x: np.ndarray, gy: np.ndarray, vocab: int, ignore_label: int | None,
                rng: np.random.Generator | None) -> np.ndarray:
    """float32 ``gW[x[i]] += gy[i]``, positions in index order, or shuffled by ``rng``."""
    flat_x = np.asarray(x).reshape(-1).astype(np.int64)
    width = np.asarray(gy).shape[-1] if np.ndim(gy) else 1
    flat_gy = np.asarray(gy, dtype=np.float32).reshape(flat_x.size, width)  # (an empty batch has 0 rows)
    keep = np.ones(flat_x.size, bool) if ignore_label is None else flat_x != ignore_label
    idx = np.nonzero(keep)[0]
    if rng is not None:
        idx = idx[rng.permutation(idx.size)]
    gW = np.zeros((vocab, flat_gy.shape[1]), dtype=np.float32)
    np.add.at(gW, flat_x[idx], flat_gy[idx])  # ufunc.at applies the updates in the order given
    return gW


def _run(shuffle: bool):
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        a = build_arrays(case)
        x, W, gy = a["x"], a["W"].astype(np.float32), a["gy"].astype(np.float32)
        il = case.spec.get("ignore_label")
        vocab = W.shape[0]
        with rec.phase("forward"):
            mask = np.zeros(x.shape, bool) if il is None else (x == il)
            y = np.where(mask[..., None], np.float32(0), W[np.where(mask, 0, x)])
        rec.output("y", device.put(y))
        with rec.phase("backward"):
            # Fresh OS entropy on every run: the point is that no two runs share an order.
            gW = scatter_add(x, gy, vocab, il, np.random.default_rng() if shuffle else None)
        rec.output("grad.W", device.put(gW))

    return run


def _valid_ids(case: Case) -> bool:
    s = case.spec
    return case.expect is None and s.get("w_dtype", "float32") == "float32"


SUBJECTS: tuple[Subject, ...] = (
    Subject("control.nondeterministic", "embed", _run(True), role="control", accepts=_valid_ids,
            declared={"cpu": Declared(False, "scatter-add order shuffled per run, as unordered atomics"),
                      "gpu": Declared(False, "scatter-add order shuffled per run, as unordered atomics")},
            description="positive control: float32 scatter-add in a random order every run (computed on host)",
            source="harness/subjects/controls.py"),
    Subject("control.deterministic", "embed", _run(False), role="control", accepts=_valid_ids,
            declared={"cpu": Declared(True, "the same scatter-add in index order"),
                      "gpu": Declared(True, "the same scatter-add in index order")},
            description="negative control: the same float32 scatter-add in index order (computed on host)",
            source="harness/subjects/controls.py"),
)
