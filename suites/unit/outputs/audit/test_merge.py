"""harness.outputs.audit.merge: shards merged give the digests of the whole run, and merge refuses the same file
given twice."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.core.errors import InvalidArgument
from harness.outputs import audit as A
from harness.verbs.compare import MergeOptions, merge
from suites.audit_files import _base_audit, _run


# ---- (c) shards ----------------------------------------------------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_merged_shards_give_the_digests_of_the_whole_run(work, small, whole, capsys):
    shards = [A.load_audit(_run(small, work / f"shard{i}.json", shard=f"{i}/2")) for i in (1, 2)]
    assert [s.corpus["shard"] for s in shards] == ["1/2", "2/2"]
    assert all(s.corpus["full_digest"] == whole[0].corpus["digest"] for s in shards)
    assert all(s.corpus["cases"] >= 1 for s in shards) and sum(s.corpus["cases"] for s in shards) == 3
    union = {k: e for s in shards for k, e in s.by_key().items()}
    assert union.keys() == whole[0].by_key().keys()
    assert {k: e["tensors"] for k, e in union.items()} == {k: e["tensors"] for k, e in whole[0].by_key().items()}

    res = A.merge_audits([whole[0].path, shards[0].path, shards[1].path])
    cols = [c for c in res.matrix.columns if c not in ("subject", "device", "context", "consistent")]
    assert len(cols) == 2 and len(res.columns) == 2
    assert sorted(len(f) for f in res.columns.values()) == [1, 2]  # the shards joined into one column
    assert (res.matrix[cols[0]] == res.matrix[cols[1]]).all()
    assert res.matrix["consistent"].all() and res.matrix[cols[0]].str.endswith(" =").all()
    assert not res.warnings

    out = work / "merge"
    assert merge(MergeOptions((whole[0].path, shards[0].path, shards[1].path), out=str(out))) == 0
    assert "| chainer.NStepLSTM" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} >= {"merge.md", "merge.csv", "merge.html"}
    assert len(pd.read_csv(out / "merge.csv")) == len(res.matrix)
    assert "<table" in (out / "merge.html").read_text()


def test_merge_refuses_the_same_file_twice(work):
    a = _base_audit(work, "twice.json")
    with pytest.raises(InvalidArgument, match="is given twice to merge") as info:
        A.merge_audits([a, a])
    assert "\n" not in str(info.value)
    copy = work / "twice-copy.json"
    copy.write_text(a.read_text())
    with pytest.raises(InvalidArgument, match="same content"):
        A.merge_audits([a, copy])
