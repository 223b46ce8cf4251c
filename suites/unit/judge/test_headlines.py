"""One bug, one headline: findings that share a cause are one headline that says where it holds.

Hand-made measures of the kinds a campaign records: a regression beyond the oracle in every context, a known
library defect (an error) in every context, one error reached from two subject families, pairs of contexts.
"""

from __future__ import annotations

from harness.core.records import Measure, TaskRecord
from harness.judge import finding_groups as G
from harness.judge import findings as F
from harness.judge.headlines import cause_key, headline_of, headlines, where_text

CPU4 = {"cpu": ("default", "blas1", "blas2", "debug")}
EMPTY_TB = ('  File "/v/site-packages/chainer/functions/connection/embed_id.py", line 73, in forward\n'
            "ValueError: cannot reshape array of size 0 into shape (0,newaxis)\n")
TRANSPOSE_TB = ('  File "/v/site-packages/chainer/functions/array/transpose_sequence.py", line 76, in f\n'
                "AttributeError: 'NoneType' object has no attribute 'shape'\n")


def _oracle(context: str, case: str = "c1", tensor: str = "hy") -> Measure:
    return Measure(kind="oracle", case_id=case, subject="chainer.NStepLSTM", device="cpu", context=context,
                   tensor=tensor, within=False, verdict="broken", rule="oracle = within: error within tolerance",
                   error_ratio=8.8, max_abs=0.0078, max_abs_index=(0, 1), allowed="1e-4 + 1e-3*|expected|")


def _error(context: str, subject: str, family: str, tb: str, err: str, case: str = "e1"
           ) -> tuple[Measure, tuple[tuple[str, str, str, str], TaskRecord]]:
    kind, _, msg = err.partition(": ")
    m = Measure(kind="task", case_id=case, subject=subject, device="cpu", context=context, tensor="",
                verdict="known defect", rule=f"known defect ({kind} in backward)", actual=f"{kind} in backward: {msg}")
    rec = TaskRecord(key=f"{case}|{subject}|cpu|{context}", case_id=case, family=family, subject=subject,
                     device="cpu", context=context, status="error",
                     errors=({"type": kind, "phase": "backward", "message": msg, "traceback": tb},))
    return m, ((case, subject, "cpu", context), rec)


def test_a_regression_in_every_context_is_one_headline_that_names_every_context():
    found = G.group([_oracle(c, case=f"c{i}") for c in CPU4["cpu"] for i in range(3)], None, F.Origin("/r"))
    assert len(found) == 4  # one finding per context: each reproducer runs in its own
    [h] = headlines(found, CPU4)
    assert h.where == "in every CPU context: default, blas1, blas2, debug"
    assert h.title().startswith("[contract broken] chainer.NStepLSTM [cpu]: beyond oracle tolerance of outputs")
    assert h.title().endswith("-- in every CPU context: default, blas1, blas2, debug") and h.fails
    # every finding is beneath it, each with its own context and reproducer
    dossier = h.dossier().splitlines()
    assert len(dossier) <= F.DOSSIER_LINES and dossier[0] == h.title()
    assert sum(ln.startswith("  ") and "reproduce: " in ln for ln in dossier) == 3
    # where it holds in some of the contexts only, it says how many of them
    assert headlines(found[:2], CPU4)[0].where.startswith("in 2 of 4 CPU contexts: ")
    assert headlines(found[:1], CPU4)[0].where.startswith("in CPU context ")


def test_a_known_defect_is_titled_by_what_it_is_not_by_its_first_context():
    pairs = [_error(c, s, "embed", EMPTY_TB, "ValueError: cannot reshape array of size 0 into shape (0,newaxis)")
             for c in ("blas1", "blas2", "debug", "default") for s in ("chainer.embed_id", "espnet.embed_id")]
    found = G.group([m for m, _ in pairs], dict(r for _, r in pairs), F.Origin("/r"))
    [f] = found
    assert f.contexts == ("default", "blas1", "blas2", "debug")  # the registry's order, whatever came first
    assert "[cpu] default, blas1, blas2, debug:" in f.headline()
    [h] = headlines(found, CPU4)
    assert "ValueError in backward: cannot reshape array of size 0" in h.title()
    assert "raised in chainer/functions/connection/embed_id.py:73" in h.title()
    assert h.title().endswith("in every CPU context: default, blas1, blas2, debug")
    assert " blas1:" not in h.title()
    assert F.Finding.from_dict(f.to_dict()).contexts == f.contexts


def test_one_error_at_one_library_line_from_two_families_is_one_headline():
    err = "AttributeError: 'NoneType' object has no attribute 'shape'"
    pairs = [_error(c, s, fam, TRANSPOSE_TB, err, case=f"e-{fam}") for c in CPU4["cpu"]
             for s, fam in (("chainer.NStepLSTM", "lstm"), ("pipeline.embed_lstm", "pipeline"))]
    found = G.group([m for m, _ in pairs], dict(r for _, r in pairs), F.Origin("/r"))
    assert len(found) == 2 and len(headlines(found, CPU4)) == 1
    assert set(headlines(found, CPU4)[0].subjects) == {"chainer.NStepLSTM", "pipeline.embed_lstm"}
    # another error at another line stays apart
    other = _error("default", "chainer.NStepLSTM", "lstm", EMPTY_TB, "ValueError: x", case="e3")
    more = G.group([m for m, _ in pairs] + [other[0]], {**dict(r for _, r in pairs), other[1][0]: other[1][1]},
                   F.Origin("/r"))
    assert len(headlines(more, CPU4)) == 2


def test_other_causes_stay_apart_and_pairs_of_contexts_are_listed():
    ctx = [Measure(kind="context", case_id="c", subject="s", device="cpu", context=c, other="default",
                   tensor="ys.0", identical=False, verdict="broken", max_ulp=2,
                   rule=f"identical_across: bit-identical to context {c}") for c in ("blas1", "blas2")]
    grads = [_oracle("default", tensor="grad.ws.0.0")]
    found = G.group(ctx + grads + [_oracle("default")], None, F.Origin("/r"))
    hs = headlines(found, CPU4)
    assert len(hs) == 3  # outputs and parameter gradients apart; both context pairs together
    pair = next(h for h in hs if h.lead.kind == "cross-context difference")
    assert pair.where == "between CPU contexts: default vs blas1, default vs blas2"
    assert len({cause_key(f) for f in found}) == len(hs)
    ids = headline_of(found)
    assert set(ids) == {f.id for f in found} and len(set(ids.values())) == 3
    assert where_text(pair.findings) == pair.where


def test_findings_csv_keeps_one_row_per_finding_with_its_headline():
    from harness.outputs.tables import FINDING_COLUMNS, findings_frame

    found = G.group([_oracle(c) for c in CPU4["cpu"]], None, F.Origin("/r"))
    df = findings_frame(found)
    assert list(df.columns) == list(FINDING_COLUMNS) and len(df) == 4
    assert df["headline"].nunique() == 1 and df["headline"].iloc[0] == headlines(found)[0].id


def test_the_summary_line_counts_headlines():
    found = G.group([_oracle(c) for c in CPU4["cpu"]], None, F.Origin("/r"))
    line = G.summary_line(found, 4, 52, headlines(found, CPU4))
    assert line == "4 of 52 checks failed; 1 headline finding(s) (1 contract broken) from 4 finding(s)"
    assert G.summary_line(found, 4, 52) == "4 of 52 checks failed; 4 finding(s) (4 contract broken)"


def test_a_trajectory_is_a_pair_of_contexts_never_of_devices():
    traj = [Measure(kind="trajectory", case_id="c", subject="model.x", device="cpu", context="blas1",
                    other="default", tensor="step.0.loss", identical=False, verdict="broken", max_ulp=2,
                    rule="identical_across: bit-identical to context blas1")]
    found = G.group(traj, None, F.Origin("/r"))
    [h] = headlines(found, CPU4)
    assert h.where == "between CPU contexts: default vs blas1"
