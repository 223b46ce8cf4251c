"""Edge kinds found in a case's own data (harness/generate/edges.py): a drawn float16 embedding case whose running
``grad.W`` sum passes float16's largest value, while the exact sum fits, reaches ``float16:partial_sum_overflow``
as the hand-made edge case does, so that the contracts' rule for that edge judges it (before, the rule matched
the hand-made case's tag only, and the gate called a drawn one broken)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.cases import Case, build_arrays
from harness.generate.edges import edge_cases, edge_kinds, with_edge_tags
from harness.judge.contracts import load_contracts

EDGE = "float16:partial_sum_overflow"
F16_MAX = 65504.0


def _drawn(seed: int, **spec) -> Case:
    # The shape the dev profile drew: one row, many int8 ids, large float16 upstream gradients.
    return Case("embed", seed, {"vocab": 1, "width": 3, "ids_shape": [2048], "w_dtype": "float16",
                                "id_dtype": "int8", "gy_kind": "large", **spec})


def _overflows_by_hand(case: Case) -> bool:
    """The condition, one scalar at a time: each row's terms added in index order as float16 scalars."""
    a = build_arrays(case)
    if a["gy"].dtype != np.float16:  # only a float16 grad.W sums in float16
        return False
    x = [int(v) for v in np.asarray(a["x"]).ravel()]
    gy = np.asarray(a["gy"]).reshape(len(x), -1)
    il = case.spec.get("ignore_label")
    for row in sorted(set(x) - {il}):
        for col in range(gy.shape[1]):
            acc, exact, passed = np.float16(0), 0.0, False
            for i, v in enumerate(x):
                if v == row:
                    with np.errstate(over="ignore"):
                        acc = np.float16(acc + gy[i, col])
                    exact += float(gy[i, col])
                    passed = passed or bool(np.isinf(acc))
            if passed and abs(exact) <= F16_MAX:
                return True
    return False


def test_a_drawn_case_reaches_the_edge_from_its_data_and_is_tagged():
    case = _drawn(2)
    assert not any(t.startswith("edge:float16") for t in case.tags)
    assert EDGE in edge_kinds(case)
    assert f"edge:{EDGE}" in with_edge_tags(case).tags


def test_the_condition_agrees_with_a_scalar_accumulation():
    cases = [_drawn(seed, width=2, ids_shape=[n], ignore_label=il, ignore_frac=0.2)
             for seed in range(8) for n in (64, 2048) for il in (None, -1)]
    cases += [Case("embed", s, {"vocab": 3, "width": 2, "ids_shape": [400], "w_dtype": w, "gy_kind": g})
              for s in range(3) for w in ("float16", "float32") for g in ("large", "cancel", "random")]
    found = [EDGE in edge_kinds(c) for c in cases]
    assert found == [_overflows_by_hand(c) for c in cases]
    assert 0 < sum(found) < len(found), found  # both answers occur, so the comparison above can fail


def test_the_hand_made_edge_case_reaches_it_by_its_data_too():
    (case,) = [c for c in edge_cases() if f"edge:{EDGE}" in c.tags]
    bare = Case(case.family, case.seed, case.spec, case.arrays)
    assert EDGE in edge_kinds(bare)

def test_a_tagged_case_still_passes_the_schema_it_skips():
    """with_edge_tags makes its case without the schema check (the case had passed it, the tags are the edge
    table's names): every edge kind's tag, on a case of each family, is what the schema and a JSON round trip
    accept."""
    from harness.core import schemas
    from harness.core.schema_check import check
    from harness.generate.edges import EDGE_KINDS

    tagged = [t for t in (with_edge_tags(Case(c.family, c.seed, c.spec, c.arrays, c.expect)) for c in edge_cases())
              if any(x.startswith("edge:") for x in t.tags)]
    seen = {x[len("edge:"):] for t in tagged for x in t.tags if x.startswith("edge:")}
    assert seen == set(EDGE_KINDS), set(EDGE_KINDS) - seen  # every kind's tag was made, so each was checked
    for t in tagged:
        assert check(t.to_dict(), schemas.CASE) is None
        assert Case.from_json(t.to_json()) == t



def test_the_contracts_rule_for_the_edge_judges_a_drawn_case():
    contracts = load_contracts(None)
    case = _drawn(2)
    assert contracts.bad_rules("chainer.embed_id", "cpu", case.tags, "default") == []
    rules = contracts.bad_rules("chainer.embed_id", "cpu", with_edge_tags(case).tags, "default")
    assert [r.tag for r in rules] == [f"edge:{EDGE}"]


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_replay_of_the_tagged_drawn_case_is_judged_by_the_rule(tmp_path, harness):
    plain, tagged = _drawn(2), with_edge_tags(_drawn(2))
    for name, case in (("plain", plain), ("tagged", tagged)):
        (tmp_path / f"{name}.json").write_text(case.to_json())
    p = harness("replay", str(tmp_path / "plain.json"), "--subject", "chainer.embed_id")
    assert p.rc == 1 and "BEYOND TOLERANCE" in p.stdout, p.stdout + p.stderr  # the finding the rule now covers
    p = harness("replay", str(tmp_path / "tagged.json"), "--subject", "chainer.embed_id")
    assert p.rc == 0 and "nothing differs" in p.stdout, p.stdout + p.stderr


def test_a_contents_edge_kinds_are_found_once_and_handed_out_as_copies(monkeypatch):
    from harness.core.cases import ContentMemo
    from harness.generate import edges

    built: list[str] = []
    real = edges.built_ids
    monkeypatch.setattr(edges, "built_ids", lambda case: built.append(case.id) or real(case))
    monkeypatch.setattr(edges, "_KINDS", ContentMemo())
    spec = {"vocab": 4, "width": 2, "ids_shape": [6], "id_kind": "all_equal"}
    first = edge_kinds(Case("embed", 3, spec))
    assert "vocab:1" not in first and first == edges._edge_kinds(Case("embed", 3, spec))  # the uncached answer
    first.add("mine")
    again = edge_kinds(Case("embed", 3, dict(spec)))
    assert "mine" not in again and len(built) == 2  # once for the memo, once for the uncached call above
    edge_kinds(Case("embed", 4, spec))
    assert len(built) == 3  # another content is looked at
