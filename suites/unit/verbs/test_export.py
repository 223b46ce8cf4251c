"""``harness export`` before any script runs: the check each finding kind exports to, and the refusals that
come in one line (a control or an oracle, a harness check, an output over an input)."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.judge.finding_kinds import FindingKind
from harness.judge.reproducer import Reproducer
from harness.subjects.call_runs import call_of
from harness.subjects.registry import SUBJECTS
from harness.upstream.claims import check_kind, context_env
from harness.verbs.export import ExportOptions, export

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [12]})
CHECKS = {"repeats", "processes", "tolerance", "bits", "error", "contexts", "devices", "relation", "bad_input"}


@pytest.mark.parametrize("kind", [k.value for k in FindingKind])
def test_each_finding_kind_exports_to_one_check_or_is_refused_in_one_line(kind):
    r = Reproducer("case.json", "chainer.embed_id", kind=kind)
    try:
        check = check_kind(r)
    except InvalidArgument as exc:
        assert "\n" not in str(exc) and "nothing to export" in str(exc)
        assert kind in ("not judged", "no contract line", "gate check failed")
    else:
        assert check in CHECKS


def test_without_a_kind_the_check_follows_what_the_reproducer_names():
    assert check_kind(Reproducer("c.json", "s", relation="order")) == "relation"
    assert check_kind(Reproducer("c.json", "s", contexts=("default", "blas1"))) == "contexts"
    assert check_kind(Reproducer("c.json", "s", devices=("cpu", "gpu"))) == "devices"
    assert check_kind(Reproducer("c.json", "s", error="ValueError in backward")) == "error"
    assert check_kind(Reproducer("c.json", "s")) == ""


def test_every_shipped_implementation_carries_its_library_call_and_oracles_and_controls_none():
    for s in SUBJECTS.values():
        assert (call_of(s.run) is not None) == (s.role == "subject"), s.name


@pytest.mark.parametrize("subject", ["control.nondeterministic", "oracle.embed"])
def test_a_control_or_an_oracle_is_refused_in_one_line_before_any_work(subject, tmp_path, capsys):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    with pytest.raises(InvalidArgument, match=f"subject='{subject}' is a (control|oracle) of the harness"):
        export(ExportOptions(Reproducer(str(case), subject), str(tmp_path / "s.py")))
    assert not (tmp_path / "s.py").exists()


def test_an_output_over_an_input_or_the_issue_text_over_the_script_is_refused(tmp_path):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    r = Reproducer(str(case), "chainer.embed_id")
    with pytest.raises(InvalidArgument, match="would overwrite an input"):
        ExportOptions(r, str(case))
    with pytest.raises(InvalidArgument, match="is the script's own path"):
        ExportOptions(r, str(tmp_path / "s.py"), markdown=str(tmp_path / "s.py"))
    link = tmp_path / "link.md"
    (tmp_path / "s.py").write_text("")
    link.symlink_to(tmp_path / "s.py")
    with pytest.raises(InvalidArgument, match="is the script's own path"):
        ExportOptions(r, str(tmp_path / "s.py"), markdown=str(link))


def test_a_context_becomes_the_environment_of_a_fresh_process_with_its_threads_pinned():
    env, threads = context_env("blas1")
    assert threads == 1 and env["OPENBLAS_NUM_THREADS"] == "1" and env["OMP_NUM_THREADS"] == "1"
    assert context_env("debug")[0]["CHAINER_DEBUG"] == "1"
    with pytest.raises(InvalidArgument, match="context='contention'"):
        context_env("contention")


def test_the_shipped_contracts_file_is_an_input_of_an_export_that_names_none(tmp_path):
    from harness.judge.contracts import DEFAULT_CONTRACTS

    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    with pytest.raises(InvalidArgument, match="would overwrite an input"):
        ExportOptions(Reproducer(str(case), "chainer.embed_id"), str(DEFAULT_CONTRACTS))


def test_a_loop_of_links_as_the_output_is_one_line():
    import os
    import tempfile

    from harness.core.argcheck import writable_file

    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        os.symlink(b, a)
        os.symlink(a, b)
        with pytest.raises(InvalidArgument, match="loop of symbolic links"):
            writable_file("out", a)
