"""A finding's dossier offers its export command beside its replay command (and neither where nothing
reproduces it)."""

from __future__ import annotations

from harness.core.records import Measure
from harness.judge import finding_groups as G
from harness.judge import findings as F
from harness.judge.violations import Violation

M = Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default", tensor="ys[0]",
            identical=False, verdict="broken", rule="reproducible: bit-identical run to run in one process")


def test_the_dossier_prints_the_export_command_after_the_replay_command():
    f = G.group([M], None, F.Origin("/run", env=(("OMP_NUM_THREADS", "1"),)))[0]
    lines = f.dossier().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("Reproduce: "))
    assert lines[i + 1] == f"Export: {f.export()}"
    assert f.export().startswith("env OMP_NUM_THREADS=1 ") and f.to_dict()["export"] == f.export()


def test_a_violation_that_nothing_reproduces_offers_no_export_command():
    v = Violation(M, case_file="/run/cases/c1.json", no_replay="a subject from outside --subject-plugin")
    assert "Export: " not in v.dossier() and "No command reproduces it" in v.dossier()
    assert "Export: " in Violation(M, case_file="/run/cases/c1.json").dossier()


def _task(subject: str, case_id: str, context: str, verdict: str = "known defect") -> Measure:
    return Measure(kind="task", case_id=case_id, subject=subject, device="cpu", context=context, tensor="",
                   verdict=verdict, rule="known defect (ValueError in backward)")


def test_a_control_offers_no_export_anywhere():
    allowed = Measure(**{**M.to_dict(), "verdict": "diverged as allowed"})
    f = G.group([allowed], None, F.Origin("/run"), roles={"s": "control"})[0]
    assert f.classification == F.Classification.CONTROL and f.replay()
    assert f.reproducer("export") is None and f.export() == "" and f.exports() == ()
    assert "Export: " not in f.dossier() and f.to_dict()["export"] == ""


def test_a_controls_violation_offers_replay_but_no_export():
    v = Violation(M, case_file="/run/cases/c1.json", role="control")
    assert "Reproduce: " in v.dossier() and "Export: " not in v.dossier()


def test_a_check_that_did_not_run_offers_no_export():
    nj = Measure(kind="task", case_id="c1", subject="s", device="cpu", context="default", tensor="",
                 verdict="not judged", rule="not run", detail="refused by cost")
    f = G.group([nj], None, F.Origin("/run"))[0]
    assert f.classification == F.Classification.NOT_JUDGED and f.replay() and f.export() == ""


def test_an_allowed_divergence_exports_as_a_behaviour_note_and_a_defect_does_not():
    allowed = Measure(**{**M.to_dict(), "verdict": "diverged as allowed"})
    note = G.group([allowed], None, F.Origin("/run"))[0]
    assert note.classification == F.Classification.ALLOWED
    assert note.reproducer("export").note and note.export().split()[-3] == "--note"
    assert "--note" not in note.replay()  # a switch of export only
    defect = G.group([M], None, F.Origin("/run"))[0]
    assert not defect.reproducer("export").note and "--note" not in defect.export()


def test_a_known_defect_exports_in_default_where_it_showed_there_whichever_context_was_worst():
    f = G.group([_task("chainer.EmbedID", "c1", "blas1"), _task("chainer.EmbedID", "c1", "default")], None,
                F.Origin("/run"))[0]
    assert f.context == "blas1" and f.contexts == ("default", "blas1")
    assert "--context default" in f.export() and "blas1" not in f.export()
    only = G.group([_task("chainer.EmbedID", "c1", "blas1")], None, F.Origin("/run"))[0]
    assert "--context blas1" in only.export()  # it did not show in default: the context it needs


def test_a_known_defect_exports_from_its_minimal_case():
    f = G.group([_task("chainer.EmbedID", "c1", "default")], None, F.Origin("/run"))[0]
    small = F.with_shrunk(f, F.Shrunk("m1", "/run/cases/m1.json", "c1", {"batch": 0}, {"batch": 0}, 3, 0.1, True))
    assert "/run/cases/m1.json" in small.export() and "c1.json" not in small.export()


def test_a_defect_chainer_and_espnet_share_exports_once_per_library_each_on_a_case_its_subject_ran():
    ms = [_task("chainer.EmbedID", "c1", "default"), _task("chainer.embed_id", "c1", "default"),
          _task("espnet.EmbedID", "c2", "default"), _task("espnet.embed_id", "c3", "default")]
    f = G.group(ms, None, F.Origin("/run"), sizes={"c1": 1, "c2": 2, "c3": 3})[0]
    assert f.subject.startswith("chainer.") and f.library_cases == (("espnet.EmbedID", "c2"),)
    chainer, espnet = f.exports()
    assert "--subject chainer." in chainer and "/run/cases/c1.json" in chainer
    assert "--subject espnet.EmbedID" in espnet and "/run/cases/c2.json" in espnet
    assert espnet.endswith(f"--out reproduce-{f.id}-espnet.py")
    assert [ln for ln in f.dossier().splitlines() if ln.startswith("Export: ")] == [f"Export: {chainer}",
                                                                                   f"Export: {espnet}"]
    assert F.Finding.from_dict(f.to_dict()).exports() == f.exports()
    both = G.group(ms[:3] + [_task("espnet.embed_id", "c1", "default")], None, F.Origin("/run"),
                   sizes={"c1": 1, "c2": 2})[0]
    small = F.with_shrunk(both, F.Shrunk("m1", "/run/cases/m1.json", "c1", {}, {}, 3, 0.1, True))
    assert [e.split(" export ", 1)[1].split()[0] for e in small.exports()] == ["/run/cases/m1.json"] * 2
    alone = G.group(ms[:2], None, F.Origin("/run"))[0]
    assert len(alone.exports()) == 1 and alone.library_cases == ()


def test_shrinking_drops_a_cause_localized_on_another_case():
    f = F.with_cause(G.group([M], None, F.Origin("/run"))[0], "LSTM forward node 3")
    small = F.with_shrunk(f, F.Shrunk("m1", "/run/cases/m1.json", "c1", {}, {}, 3, 0.1, True))
    assert small.cause == ""  # localized on c1; the card shows m1
    assert small.reproducer("localize").case == "/run/cases/m1.json"  # localizing it runs the minimal case
    assert F.with_cause(small, "Linear node 1").cause == "Linear node 1"
    assert F.with_shrunk(f, None).cause == "LSTM forward node 3"
