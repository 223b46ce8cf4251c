"""harness/outputs/report.py: a run directory's name and ``latest`` link, its lock, its campaign.json read back
with one-line refusals, and the arrays a finished report keeps."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from harness.core.errors import InvalidArgument
from harness.core.records import Measure, TaskRecord
from harness.outputs.report import (
    KEPT_TENSORS,
    lock_run_dir,
    new_run_dir,
    point_latest,
    prune_arrays,
    read_campaign_meta,
    write_timings,
)


def test_a_new_run_dir_is_stamped_and_latest_points_at_it(tmp_path) -> None:
    d = new_run_dir(str(tmp_path))
    assert re.fullmatch(r"\d{8}T\d{6}Z-\d+", os.path.basename(d)) and os.path.dirname(d) == str(tmp_path)
    os.makedirs(d)
    point_latest(d, str(tmp_path))
    assert os.readlink(tmp_path / "latest") == os.path.basename(d)
    point_latest(str(tmp_path / "elsewhere" / "x"), str(tmp_path))  # not under base: latest is left alone
    assert os.readlink(tmp_path / "latest") == os.path.basename(d)


def test_a_second_holder_of_the_lock_is_refused_naming_the_first(tmp_path) -> None:
    with lock_run_dir(str(tmp_path)):
        with pytest.raises(InvalidArgument, match=f"pid {os.getpid()}"):
            with lock_run_dir(str(tmp_path)):
                pass
    with lock_run_dir(str(tmp_path)):  # released: taken again
        pass


@pytest.mark.parametrize("make, needle", [(lambda p: p / "absent", "is not a directory"),
                                          (lambda p: p, "holds no campaign.json")])
def test_a_directory_that_is_no_run_is_one_line(tmp_path, make, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        read_campaign_meta(str(make(tmp_path)))


def test_only_a_subjects_finding_keeps_its_arrays_and_only_its_worst_tensors(tmp_path) -> None:
    folder = tmp_path / "arrays"
    folder.mkdir()
    tensors = {f"t{i}": np.full(3, i, dtype=np.float32) for i in range(KEPT_TENSORS + 2)}
    np.savez(folder / "keep.npz", **tensors)
    np.savez(folder / "drop.npz", y=np.zeros(2))
    key = dict(case_id="c", subject="chainer.embed_id", device="cpu", context="default")
    records = {"k": TaskRecord(key="k", family="embed", status="ok", array_file="keep.npz", **key),
               "d": TaskRecord(key="d", family="embed", status="ok", array_file="drop.npz",
                               **{**key, "case_id": "d"})}
    measures = [Measure(kind="repeat", tensor=t, identical=False, verdict="broken", max_ulp=10 + i, **key)
                for i, t in enumerate(tensors)]
    assert prune_arrays(str(tmp_path), records, measures) == ["drop.npz"]
    with np.load(folder / "keep.npz") as z:
        assert sorted(z.files) == sorted(list(tensors)[-KEPT_TENSORS:])
    write_timings(str(tmp_path), {"total": 1.5})
    assert (tmp_path / "timings.json").read_text().strip().startswith("{")
