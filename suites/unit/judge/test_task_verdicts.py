"""harness.judge.task_verdicts.judge_task: a task refused by what its case will cost is "not judged" (a finding that
fails the gate, saying what the case needs), while a device absent here is "skipped"."""

from __future__ import annotations

from harness.core.cases import Case
from harness.core.cost import over_limit
from harness.judge.task_verdicts import judge_task
from harness.judge.verdicts import NOT_JUDGED, SKIPPED

KEY = {"case_id": "c", "subject": "chainer.NStepLSTM", "device": "cpu", "context": "default"}


def test_a_case_over_the_memory_limit_is_not_judged_and_says_what_it_needs():
    case = Case("lstm", 0, {"n_layers": 1, "in_size": 4, "hidden": 8, "lengths": [1_000_000]})
    reason = over_limit(case, explicit=1 << 30)
    assert reason is not None
    m = judge_task(None, KEY, "skipped", "skipped", None, reason)
    assert m.verdict == NOT_JUDGED and "needs about" in m.detail and "GiB" in m.detail


def test_an_absent_device_stays_a_skip():
    m = judge_task(None, {**KEY, "device": "gpu:0"}, "skipped", "skipped", None, "no GPU: nvidia-smi not found")
    assert m.verdict == SKIPPED
