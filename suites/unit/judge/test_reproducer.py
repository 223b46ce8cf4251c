"""The Reproducer: one record renders every printed replay/shrink/localize/export command, and the command
line parses each back into the same record (``parse(render(r)) == r`` for generated records)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import cli
from harness.core.contexts import CONTEXTS
from harness.core.errors import InvalidArgument
from harness.core.records import Measure
from harness.core.vocabulary import RELATIONS
from harness.judge import findings as F
from harness.judge.reproducer import OPTIONS, VERBS, Reproducer, split_command

DEVICES = ("cpu", "gpu", "gpu:0", "gpu:3")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Real files for the options whose values the parser checks: cases, a contracts file, a baseline run."""
    d = tmp_path_factory.mktemp("repro files")
    cases = []
    for name in ("case.json", "a case 'quoted'.json", "corpus$1.jsonl"):
        (d / name).write_text("{}\n")
        cases.append(str(d / name))
    (d / "contracts.toml").write_text("")
    base = d / "base run"
    base.mkdir()
    (base / "tasks.jsonl").write_text(json.dumps({"key": "k", "case_id": "c", "subject": "s", "device": "cpu",
                                                  "context": "default", "status": "ok"}) + "\n")
    (base / "campaign.json").write_text(json.dumps({"subjects": ["s"], "devices": ["cpu"], "contexts": ["default"],
                                                    "repeats": 1, "fresh": 0, "timeout": 60.0}))
    (base / "environment.json").write_text("{}")
    return types.SimpleNamespace(cases=cases, contracts=str(d / "contracts.toml"), baseline=str(base),
                                 out=str(d / "out.py"))


@pytest.fixture(scope="module")
def parser():
    return cli.build_parser()


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
_env_name = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)


def _names(pool):
    return st.one_of(st.tuples(st.sampled_from(pool)),
                     st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True).map(tuple))


@st.composite
def reproducers(draw, files):
    relation = draw(st.sampled_from(("",) + RELATIONS))
    devices = draw(st.tuples(st.sampled_from(DEVICES)) if relation else _names(DEVICES))
    contexts = draw(st.tuples(st.sampled_from(tuple(CONTEXTS))) if relation else _names(tuple(CONTEXTS)))
    return Reproducer(
        case=draw(st.sampled_from(files.cases)), subject=draw(_text), case_id=draw(st.just("") | _text),
        devices=devices, contexts=contexts, relation=relation,
        baseline=draw(st.sampled_from(("", files.baseline))), plugins=tuple(draw(st.lists(_text, max_size=3))),
        contracts=draw(st.sampled_from(("", files.contracts))),
        env=tuple(draw(st.lists(st.tuples(_env_name, st.none() | st.text(max_size=8).filter(lambda t: "\x00" not in t)),
                                max_size=3))),
        repeats=draw(st.none() | st.integers(2, 10_000)), fresh=draw(st.none() | st.integers(0, 1_000)),
        kind=draw(_text), tensor=draw(st.just("") | _text), error=draw(st.just("") | _text), flaky=draw(st.booleans()))


def parse(parser, verb: str, line: str, files) -> Reproducer:
    """A printed command read back as the command line reads it."""
    env, argv = split_command(line)
    assert argv[0] == verb
    if verb == "export":
        argv += ["--out", files.out]  # (export's own option, not the reproducer's)
    return Reproducer.from_options(verb, vars(parser.parse_args(argv)), env=env)


@pytest.mark.parametrize("verb", VERBS)
def test_every_rendered_command_parses_back_into_its_record(verb, files, parser):
    @settings(deadline=None, max_examples=150)
    @given(reproducers(files))
    def round_trip(r):
        assert parse(parser, verb, r.command(verb), files) == r.for_verb(verb)

    round_trip()


def test_a_verb_carries_exactly_the_fields_its_options_fill():
    r = Reproducer("c.json", "s", relation="order", baseline="/b", contracts="/c.toml", repeats=7, fresh=2,
                   kind="error", tensor="outputs", error="IndexError in backward", flaky=True)
    assert r.for_verb("replay") == dataclasses.replace(r, kind="", tensor="", error="", flaky=False)
    assert r.for_verb("shrink") == dataclasses.replace(r, repeats=None, fresh=None)
    # localize judges nothing (no contracts, no baseline) and compares repeats only without a relation
    assert r.for_verb("localize") == Reproducer("c.json", "s", relation="order")
    # export keeps to the finding as shrink does: its script checks that kind, tensor kind and error
    assert r.for_verb("export") == r.for_verb("shrink")
    assert "--kind" not in r.argv("replay") and r.argv("shrink")[-2:] == ["--kind", "error"]
    assert r.argv("export")[-2:] == ["--kind", "error"] and "--flaky" in r.argv("export")


def test_a_value_with_a_leading_dash_is_one_word():
    argv = Reproducer("c.json", "-s", plugins=("-m:o",)).argv("replay")
    assert "--subject=-s" in argv and "--subject-plugin=-m:o" in argv


@pytest.mark.parametrize("values,says", [
    ({"device": "cpu", "devices": "cpu,gpu"}, "give one of them"),
    ({"contexts": "blas1"}, "must name two contexts"),
    ({"devices": "cpu,cpu"}, "must name two devices"),
    ({"relation": "order", "contexts": "blas1,blas2"}, "one device and context"),
])
def test_options_that_contradict_each_other_are_refused(values, says):
    with pytest.raises(InvalidArgument, match=says):
        Reproducer.from_options("replay", {"case": "c.json", "subject": "s", **values})


def test_localize_refuses_fewer_than_two_repeats_but_replay_takes_one():
    with pytest.raises(InvalidArgument, match="repeats=1"):
        Reproducer.from_options("localize", {"case": "c.json", "subject": "s", "repeats": 1})
    assert Reproducer.from_options("replay", {"case": "c.json", "subject": "s", "repeats": 1}).repeats == 1


@pytest.mark.parametrize("verb", VERBS)
def test_the_command_line_declares_the_tables_options_for_each_verb(verb, parser):
    sub = parser._subparsers._group_actions[0].choices[verb]
    declared = {s for a in sub._actions for s in a.option_strings} | {a.dest for a in sub._actions}
    wanted = {o.flag for o in OPTIONS if verb in o.verbs}
    assert wanted <= declared
    others = {o.flag for o in OPTIONS if verb not in o.verbs}
    assert not others & declared, others & declared


# ---- findings: every printed command parses back into the record it was rendered from ------------------
def _finding(kind, run_dir, **kw):
    origin = F.Origin(str(run_dir), contracts=kw.pop("contracts", ""), plugins=kw.pop("plugins", ()),
                      baseline=kw.pop("baseline", ""), env=(("OMP_NUM_THREADS", "1"), ("CUPY_TF32", None)))
    return F.Finding(id="f1", kind=kind, classification=F.Classification.NEW_DEFECT, verdict="broken",
                     family="lstm", subjects=("s",), subject="s", device="cpu",
                     context="blas1" if kind.replay != "contexts" else "blas2",
                     other={"contexts": "blas1", "devices": "gpu:0"}.get(kind.replay, ""),
                     relation="order" if kind.replay == "relation" else "", rule="r", tensor_kind="outputs",
                     cases=("c1",), n_measures=1, n_tensors=1,
                     worst=Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default",
                                   tensor="ys"), case_id="c1", case_size=3, origin=origin, **kw)


def test_every_findings_printed_commands_parse_back(tmp_path, files, parser):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c1.json").write_text("{}\n")
    offered = set()
    for kind, flaky, err in itertools.product(F.FindingKind, (False, True), ("", "IndexError in backward: x")):
        f = _finding(kind, tmp_path, flaky=flaky, error=err, plugins=("m:o",), contracts=files.contracts,
                     baseline=files.baseline)
        for verb, line in (("replay", f.replay()), ("localize", f.localize()), ("shrink", f.shrink()),
                           ("export", f.export())):
            r = F.reproducer_of(f, verb)
            assert (r is None) == (line == ""), (kind.value, verb)
            if r is not None:
                offered.add(verb)
                back = parse(parser, verb, line.replace(f" --out {F.export_path(f.id)}", ""), files)
                assert back == r.for_verb(verb), (kind.value, verb, line)
                assert back.env == f.origin.env
    assert offered == set(VERBS)


def test_the_export_command_is_offered_wherever_the_replay_command_is_but_for_what_is_no_defect(tmp_path):
    for kind in F.FindingKind:
        f = _finding(kind, tmp_path)
        # a check that did not run and a missing contract line say nothing of the library
        upstream = kind.value not in ("not judged", "no contract line")
        assert bool(f.export()) == (bool(f.replay()) and upstream), kind.value
        if f.export():
            assert f.export().split(" export ", 1)[1].startswith(f.origin.case_file("c1"))
            assert f.export().endswith(f"--out reproduce-{f.id}.py")


# ---- the export verb's parser -------------------------------------------------------------------------
def test_export_hands_the_reproducer_and_its_own_options_to_the_export_verb(tmp_path, files, monkeypatch):
    import harness.verbs.export as export_verb

    got = []
    monkeypatch.setattr(export_verb, "export", lambda opts: got.append(opts) or 0)
    md = str(tmp_path / "bug.md")
    rc = cli.main(["export", files.cases[0], "--subject", "s", "--contexts", "blas1,blas2", "--out", files.out,
                   "--markdown", md])
    assert rc == 0 and len(got) == 1
    assert got[0].reproducer == Reproducer(files.cases[0], "s", contexts=("blas1", "blas2"))
    assert (got[0].out, got[0].markdown) == (files.out, md)


def test_the_export_verbs_record_takes_what_the_command_line_gives():
    try:
        from harness.verbs.export import ExportOptions
    except ImportError:
        pytest.skip("harness.verbs.export is not there yet (the export verb is written beside this parser)")
    names = [f.name for f in dataclasses.fields(ExportOptions)]
    assert names[:3] == ["reproducer", "out", "markdown"]
