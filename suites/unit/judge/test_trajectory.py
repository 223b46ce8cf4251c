"""Two training runs compared step by step: identical steps, the first differing step and what differs there
(forward, backward or update), the distances at the snapshot steps, and the verdict line beside a baseline."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from harness.judge.trajectory import TABLE_COLUMNS, compare_runs, read_run, scale_words, table_rows, verdict


def _arrays(losses, norms, params_at, snapshots=(0, 1, 2, 4, 7)):
    """A model run's recorded arrays: per step the loss, norm and digest of ``params_at(k)``; full parameters at
    ``snapshots``."""
    out = {}
    for k, (loss, norm) in enumerate(zip(losses, norms)):
        params = params_at(k)
        h = hashlib.sha256()
        for name in sorted(params):
            h.update(name.encode())
            h.update(params[name].tobytes())
        out[f"step.{k}.loss"] = np.asarray([loss], dtype=np.float32)
        out[f"step.{k}.grad_norm"] = np.asarray([norm], dtype=np.float64)
        out[f"step.{k}.digest"] = np.frombuffer(h.digest(), dtype=np.uint8).copy()
        if k in snapshots:
            out.update({f"step.{k}.param.{n}": a.copy() for n, a in params.items()})
    return out


def _params(k, nudge_from=None, ulps=3):
    """Parameters after step k: a matrix and a bias; from step ``nudge_from`` on, element 0 of the matrix is
    ``ulps`` ULPs up."""
    w = np.linspace(0.5, 1.5, 6, dtype=np.float32).reshape(2, 3) + np.float32(k) * np.float32(0.01)
    if nudge_from is not None and k >= nudge_from:
        for _ in range(ulps):
            w[0, 0] = np.nextafter(w[0, 0], np.float32(np.inf))
    return {"W": w, "b": np.zeros(2, dtype=np.float32)}


K = 8
LOSS = [3.0 - 0.1 * k for k in range(K)]
NORM = [1.0 + k for k in range(K)]


def test_identical_runs_are_identical_at_every_step_and_say_so():
    a = read_run(_arrays(LOSS, NORM, _params))
    b = read_run(_arrays(LOSS, NORM, _params))
    div = compare_runs(a, b)
    assert div.identical and div.first_differing is None and div.steps == K
    assert all(d.max_ulp == 0 and d.rel_l2 == 0.0 for d in div.distances if d.max_ulp is not None)
    assert verdict(div, None, "x") == f"bit-identical over {K} steps (x)"


def test_an_update_that_differs_from_step_2_is_named_with_its_distance():
    a = read_run(_arrays(LOSS, NORM, _params))
    b = read_run(_arrays(LOSS, NORM, lambda k: _params(k, nudge_from=2, ulps=3)))
    div = compare_runs(a, b)
    first = div.first_differing
    assert first is not None and first.step == 2 and first.differs == ("params",)
    assert first.max_ulp == 3 and first.worst == "W[0]"
    wa, wb = _params(2)["W"].astype(np.float64), _params(2, 2)["W"].astype(np.float64)
    assert first.rel_l2 == pytest.approx(np.linalg.norm(wa - wb) / np.linalg.norm(wa), rel=1e-12)
    assert [d.identical for d in div.distances] == [True, True] + [False] * (K - 2)
    # a step without snapshots knows only that its digest differs
    assert div.distances[3].max_ulp is None and not div.distances[3].identical
    line = verdict(div, None, "x")
    assert "first differs at step 2" in line and "the loss and gradient norm agree" in line


def test_a_forward_that_differs_at_step_0_is_named_first_by_its_loss():
    lb = list(LOSS)
    lb[0] = float(np.nextafter(np.float32(LOSS[0]), np.float32(np.inf)))
    div = compare_runs(read_run(_arrays(LOSS, NORM, _params)), read_run(_arrays(lb, NORM, _params)))
    assert div.first_differing is not None and div.first_differing.step == 0
    assert div.first_differing.differs == ("loss",) and "the forward differs" in verdict(div, None, "x")
    assert "step 0 (forward of Linear #3; the loss" in verdict(div, None, "x", node="forward of Linear #3")
    assert div.distances[0].loss_diff > 0 and div.distances[1].loss_diff == 0


def test_a_backward_that_differs_is_named_by_its_gradient_norm():
    nb = list(NORM)
    nb[1] = math.nextafter(NORM[1], math.inf)
    div = compare_runs(read_run(_arrays(LOSS, NORM, _params)), read_run(_arrays(LOSS, nb, _params)))
    assert div.first_differing is not None and div.first_differing.step == 1
    assert "the backward differs" in verdict(div, None, "x")


def test_the_verdict_sets_the_pair_beside_the_one_ulp_baseline():
    a = read_run(_arrays(LOSS, NORM, _params))
    pair = compare_runs(a, read_run(_arrays(LOSS, NORM, lambda k: _params(k, 1, ulps=40))))
    base = compare_runs(a, read_run(_arrays(LOSS, NORM, lambda k: _params(k, 0, ulps=1))))
    line = verdict(pair, base, "ctx")
    assert "one ULP in one weight gives" in line and "x the training's own instability" in line
    assert "after 8 steps" in line
    small = verdict(base, pair, "ctx")
    assert "smaller than the training's own instability" in small


def test_scale_words_compare_the_final_distances():
    assert scale_words(1e-4, 1e-4) == "as large as the training's own instability"
    assert scale_words(1e-2, 1e-4) == "100x the training's own instability"
    assert scale_words(1e-6, 1e-4) == "100x smaller than the training's own instability"
    assert scale_words(1e-6, 0.0) == "the one-ULP baseline did not move"
    assert scale_words(0.0, 1e-6) == "the parameters end the same bits"


def test_a_run_with_a_missing_step_is_refused():
    arrays = _arrays(LOSS, NORM, _params)
    del arrays["step.3.loss"], arrays["step.3.grad_norm"], arrays["step.3.digest"]
    with pytest.raises(ValueError, match="not 0..6"):
        read_run(arrays)
    arrays = _arrays(LOSS, NORM, _params)
    del arrays["step.5.digest"]
    with pytest.raises(ValueError, match="step 5 records no digest"):
        read_run(arrays)


def test_the_table_has_one_row_per_step_and_comparison():
    a = read_run(_arrays(LOSS, NORM, _params))
    div = compare_runs(a, a)
    rows = table_rows([("p", div), ("q", div)])
    assert len(rows) == 2 * K and list(rows[0]) == list(TABLE_COLUMNS)
    assert [r["step"] for r in rows[:K]] == list(range(K))


class _Line:
    """A contract line's fields the pair rule reads."""

    def __init__(self, identical_across=()):
        self.identical_across = tuple(identical_across)
        self.subject, self.device, self.context, self.line = "model.x", "cpu", "*", 7


_KEY = {"case_id": "c1", "subject": "model.x", "device": "cpu"}


@pytest.mark.parametrize("across, nudge, want", [
    ((), None, "bit-identical"),
    ((), 2, "diverged as allowed"),
    (("default",), 2, "broken"),
])
def test_a_trajectory_between_contexts_is_judged_by_the_contracts_identical_across(across, nudge, want):
    from harness.judge.findings import kind_of
    from harness.judge.trajectory import judge_trajectory

    a = read_run(_arrays(LOSS, NORM, _params))
    b = read_run(_arrays(LOSS, NORM, lambda k: _params(k, nudge_from=nudge)))
    pair = compare_runs(a, b)
    m = judge_trajectory(_Line(across), _KEY, ("default", "blas1"), pair, line="the line", node="n #3")
    assert m.kind == "trajectory" and m.verdict == want
    # judged on the second context's side against the first, as a context pair is
    assert (m.context, m.other) == ("blas1", "default") and "bit-identical to context default" in m.rule
    assert m.n_total == K and m.n_diff == (0 if nudge is None else K - 2)
    assert kind_of(m) == (None if nudge is None else "trajectory divergence")
    if nudge is not None:
        assert m.detail == "the line" and m.actual == "n #3" and m.max_ulp == 3


@pytest.mark.parametrize("across, want", [((), "skipped"), (("default",), "not judged")])
def test_a_pair_that_could_not_be_compared_says_why(across, want):
    from harness.judge.trajectory import judge_trajectory

    m = judge_trajectory(_Line(across), _KEY, ("default", "blas1"), None, reason="context blas1 did not run")
    assert m.verdict == want and m.detail == "context blas1 did not run"


def test_a_pair_judged_as_a_trajectory_is_one_finding_not_its_tensors_too():
    from harness.core.records import Measure
    from harness.judge.trajectory import told_once

    ctx = dict(case_id="c1", subject="model.x", device="cpu", context="blas1", other="default", identical=False,
               verdict="diverged as allowed")
    tensors = [Measure(kind="context", tensor=f"step.{k}.loss", **ctx) for k in range(3)]
    elsewhere = Measure(kind="context", tensor="y", **{**ctx, "case_id": "c2"})
    traj = Measure(kind="trajectory", tensor="", detail="line", **ctx)
    assert told_once([*tensors, elsewhere]) == [*tensors, elsewhere]  # no trajectory: the tensors tell it
    assert told_once([*tensors, elsewhere, traj]) == [elsewhere, traj]
