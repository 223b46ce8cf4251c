"""Fuzz the harness's inputs: every malformed case, audit file, contracts file or command-line value
either works or ends in a HarnessError of one line (exit 2 on the command line), never another exception.

Hypothesis runs under the profile of ``HARNESS_PROFILE`` (suites' usual profiles); the number of
examples is kept modest so the file runs in well under 30 s under ``ci``. Each loop counts the
examples that really ran and fails when fewer than a stated minimum did.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.cases import Case, build_arrays
from harness.core.errors import HarnessError
from harness.generate.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
load_profile()
# ci: 12 examples per Hypothesis test by default; these loops are cheap, so a few times that.
N = min(4 * (settings().max_examples or 12), 200)
MIN_RAN = N // 2
FUZZ = settings(max_examples=N, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                       HealthCheck.filter_too_much], deadline=None)


def _one_line(exc: BaseException) -> None:
    assert isinstance(exc, HarnessError), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc), str(exc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)

_EMBED = {"version": 1, "family": "embed", "seed": 3, "spec": {"vocab": 5, "width": 3, "ids_shape": [4],
                                                              "ignore_label": 0, "ignore_frac": 0.2}}
_LSTM = {"version": 1, "family": "lstm", "seed": 1,
         "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [2, 1], "bidirectional": False}}
_PIPE = {"version": 1, "family": "pipeline", "seed": 2,
         "spec": {"vocab": 6, "width": 2, "n_layers": 1, "hidden": 2, "lengths": [3, 1]}}
_KEYS = ["family", "seed", "spec", "arrays", "expect", "tags", "version", "id", "vocab", "width", "ids_shape",
         "lengths", "n_layers", "hidden", "in_size", "ignore_label", "ignore_frac", "w_scale", "dtype", "w_dtype",
         "id_dtype", "id_kind", "gy_kind", "inject", "w_shape", "xs_widths", "bidirectional", "dropout",
         "initial_state", "distinct"]
_TOP = {"family", "seed", "spec", "arrays", "expect", "tags", "version", "id"}


@st.composite
def case_texts(draw):
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "text", "bytes"]))
    if kind == "text":
        return draw(st.text(max_size=40))
    if kind == "bytes":
        return draw(st.binary(max_size=40))
    d = json.loads(json.dumps(draw(st.sampled_from([_EMBED, _LSTM, _PIPE]))))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(_KEYS))
        target = d if key in _TOP or not isinstance(d.get("spec"), dict) else d["spec"]
        if draw(st.booleans()) and key in target:
            del target[key]
        else:
            target[key] = draw(json_values)
    return json.dumps(d)  # may hold NaN/Infinity: that too must be refused in one line


def test_fuzz_case_json():
    ran = []

    @FUZZ
    @given(case_texts())
    def run(text):
        ran.append(1)
        try:
            case = Case.from_json(text)
            build_arrays(case, max_bytes=16 << 20)
        except Exception as exc:  # noqa: BLE001 - the assertion names what escaped
            _one_line(exc)

    run()
    assert len(ran) >= MIN_RAN, len(ran)


# ---- audit files -----------------------------------------------------------------------------------
def _audit_data() -> dict:
    t = {"digest": "ab" * 32, "dtype": "float32", "shape": [4], "repeats_agreed": True}
    e = {"case_id": "c0", "family": "embed", "subject": "s", "device": "cpu", "context": "default",
         "bad_input": False, "status": "ok", "error": None, "skip_reason": None, "repeats_agreed": True,
         "array_file": None, "tensors": {"y": t}}
    return {"format": "harness-audit", "version": 1, "id": "x", "digest": "sha256",
            "created": "2026-01-01T00:00:00+00:00", "environment": {"gpu": {"available": False}},
            "corpus": {"path": "x", "digest": "d", "cases": 1, "shard": None},
            "settings": {"repeats": 2}, "arrays_dir": None, "entries": [e, {**e, "subject": "t"}]}


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


_AUDIT_PATHS = [p for p in _paths(_audit_data()) if p]


@st.composite
def audit_texts(draw):
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=30))
    d = _audit_data()
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(_AUDIT_PATHS))
        node = d
        try:
            for k in path[:-1]:
                node = node[k]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed the path
    entries = d.get("entries")
    if draw(st.booleans()) and isinstance(entries, list):  # a mutation may have removed or replaced the list
        entries.append(json.loads(json.dumps(entries[0])) if entries else {})
    return json.dumps(d)


def test_fuzz_audit_files(tmp_path):
    from harness.outputs.audit import compare_audits, load_audit

    ran = []

    @FUZZ
    @given(audit_texts())
    def run(text):
        ran.append(1)
        p = tmp_path / "a.json"
        p.write_text(text)
        try:
            au = load_audit(p)
            compare_audits(au, au)
        except Exception as exc:  # noqa: BLE001
            _one_line(exc)

    run()
    assert len(ran) >= MIN_RAN, len(ran)


# ---- contracts -------------------------------------------------------------------------------------
SHIPPED = (ROOT / "contracts.toml").read_text().splitlines()
_VALUE_LINES = [i for i, ln in enumerate(SHIPPED) if "=" in ln and not ln.lstrip().startswith("#")]
toml_values = st.sampled_from(['7', '"x"', '"*"', "[]", '["default"]', '"default"', "true", "false", "nan", "-1",
                               "[nan, 1]", "[-1, -1]", "{ float32 = [1e-4, 1e-3] }", '{ float32 = "tight" }',
                               '["order"]', '["sideways"]', "inf", "{}", "[1, 2, 3]", '"raises"', '"no_error"'])


@st.composite
def contracts_texts(draw):
    lines = list(SHIPPED)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.sampled_from(_VALUE_LINES))
        action = draw(st.sampled_from(["value", "value", "delete", "garbage"]))
        if action == "delete":
            lines[i] = ""
        elif action == "garbage":
            lines[i] = draw(st.text(max_size=12))
        else:
            lines[i] = lines[i].split("=", 1)[0] + "= " + draw(toml_values)
    return "\n".join(lines) + "\n"


def test_fuzz_contracts(tmp_path):
    from harness.core.contexts import CONTEXTS
    from harness.judge.contracts import load_contracts, validate
    from harness.subjects.registry import SUBJECTS

    ran = []

    @FUZZ
    @given(contracts_texts())
    def run(text):
        ran.append(1)
        p = tmp_path / "c.toml"
        p.write_text(text)
        try:
            problems = validate(load_contracts(p), SUBJECTS, CONTEXTS)
            assert all("\n" not in m and m.startswith(f"{p}:") for m in problems), problems
        except Exception as exc:  # noqa: BLE001
            if isinstance(exc, AssertionError):
                raise
            _one_line(exc)

    run()
    assert len(ran) >= MIN_RAN, len(ran)


# ---- command-line values, in process --------------------------------------------------------------
def _main(argv: list[str]) -> tuple[int, str]:
    from harness.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, err.getvalue()


def _assert_clean(rc: int, stderr: str) -> None:
    assert rc in (0, 1, 2), (rc, stderr)
    assert "Traceback" not in stderr, stderr
    harness_lines = [ln for ln in stderr.splitlines() if ln.startswith("harness: ")]
    if rc == 2 and harness_lines:
        assert len(harness_lines) == 1, stderr


def test_fuzz_command_line_values(tmp_path):
    ran = []
    audit = tmp_path / "good.json"
    audit.write_text(json.dumps(_audit_data()))

    @FUZZ
    @given(st.sampled_from(["contracts", "compare", "compare-a", "cases"]), audit_texts() | st.text(max_size=20),
           st.sampled_from(["-5", "0", "1", "x", "", "nan", "2"]))
    def run(verb, content, value):
        ran.append(1)
        p = tmp_path / "in.txt"
        p.write_text(content)
        if verb == "contracts":
            argv = ["contracts", "check", "--contracts", str(p)]
        elif verb == "compare":
            argv = ["compare", str(p), str(audit)]
        elif verb == "compare-a":
            argv = ["compare", str(audit), str(tmp_path / "no" / "such.json")]
        else:
            argv = ["cases", "--family", "embed", "--examples", value, "--out", str(tmp_path / "c.jsonl")]
        _assert_clean(*_main(argv))

    run()
    assert len(ran) >= MIN_RAN, len(ran)


# ---- a handful of fixed examples through a real subprocess ----------------------------------------
@pytest.mark.parametrize("name,content,argv", [
    ("case.json", b"\xff\xfe{", ["replay", "{p}", "--subject", "chainer.embed_id"]),
    ("case.json", b'{"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": 5}}',
     ["replay", "{p}", "--subject", "chainer.embed_id"]),
    ("case.json", b'{"family": "lstm", "seed": 0, "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": 3}}',
     ["replay", "{p}", "--subject", "chainer.NStepLSTM"]),
    ("c.toml", b"", ["contracts", "check", "--contracts", "{p}"]),
    ("c.toml", b'version = 1\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = 7\nreason = "x"\n',
     ["contracts", "check", "--contracts", "{p}"]),
    ("a.json", b"[" * 100_000 + b"]" * 100_000, ["compare", "{p}", "{p}"]),
])
def test_fixed_bad_inputs_through_the_command_line(tmp_path, name, content, argv):
    p = tmp_path / name
    p.write_bytes(content)
    r = subprocess.run([sys.executable, "-m", "harness", *[a.replace("{p}", str(p)) for a in argv]],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


# ---- the parser's converters: every option of every verb, bad values drawn ------------------------------
def _options_with_a_type():
    """(verb, option, type) of every option the parser converts (walked from the one argparse tree)."""
    import argparse

    from harness.cli import build_parser

    out = []
    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for verb, sub in verbs.choices.items():
        subs = [(f"{verb} {n}", s) for a in sub._actions if isinstance(a, argparse._SubParsersAction)
                for n, s in a.choices.items()] or [(verb, sub)]
        for name, parser in subs:
            for a in parser._actions:
                if a.option_strings and (a.type is not None or a.choices):
                    out.append((name, a.option_strings[-1]))
    return out


OPTIONS = _options_with_a_type()
_BAD_TEXTS = ["", ",", " ", "0", "-1", "-0", "1e308", "1e400", "inf", "-inf", "nan", "NaN", "9" * 5000, "1.5",
              "0x10", "1/0", "0/3", "4/3", "x", "cpu,", "gpu:-1", "tpu", "all,,", "/dev/zero", "/nonexistent/x",
              "\x00", "é", "'", "--", "1e-400", "3 4", "2" * 30]


def _required(tmp_path, verb: str) -> list[str]:
    case = tmp_path / "case.json"
    if not case.exists():
        case.write_text(Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [6]}).to_json())
    c = str(case)
    return {"replay": [c, "--subject", "chainer.embed_id"], "localize": [c, "--subject", "chainer.embed_id"],
            "shrink": [c, "--subject", "chainer.embed_id", "--kind", "error"],
            "audit": ["--out", str(tmp_path / "a.json")],
            "compare": [c, c], "merge": [c, "--out", str(tmp_path / "m")]}.get(verb, [])


def test_fuzz_parser_converters(tmp_path):
    """Every option with a converter, given drawn values (the known bad ones and any text): the parser either
    takes the value or refuses it with one ``harness: error:`` line and exit 2, never a traceback. The values
    every converter must refuse (1e308 seconds, nan, -1 counts, ...) are checked in test_input_vocabulary."""
    from harness.cli import build_parser

    parser = build_parser()
    ran, refused = [], []

    @FUZZ
    @given(st.sampled_from(OPTIONS), st.sampled_from(_BAD_TEXTS) | st.text(max_size=12))
    def run(option, text):
        verb, flag = option
        argv = verb.split() + _required(tmp_path, verb.split()[0]) + [f"{flag}={text}"]
        err = io.StringIO()
        ran.append(1)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                parser.parse_args(argv)
                return
            except SystemExit as exc:
                code = exc.code
        lines = err.getvalue().strip().splitlines()
        assert code == 2, (argv, code, err.getvalue())
        assert "Traceback" not in err.getvalue(), err.getvalue()
        assert len(lines) == 1 and lines[0].startswith("harness: error: "), (argv, err.getvalue())
        refused.append(1)

    run()
    assert len(ran) >= MIN_RAN, len(ran)
    assert len(refused) >= len(ran) // 4, (len(refused), len(ran))  # the drawn values are mostly bad


@pytest.mark.parametrize("verb,flag,value", [
    ("report", "--timeout", "1e308"), ("report", "--timeout", "nan"), ("report", "--repeats", "0"),
    ("report", "--fresh", "-1"), ("report", "--examples", "1000000000"), ("report", "--relations", ""),
    ("report", "--subjects", ""), ("report", "--shard", "0/3"), ("report", "--corpus", "/dev/zero"),
    ("report", "--keep", "-1"), ("report", "--seed", "-1"), ("report", "--max-case-bytes", "0"),
    ("gate", "--repeats", "0"), ("gate", "--devices", ""), ("audit", "--repeats", "1"),
    ("cases", "--examples", "0"), ("cases", "--profile", "bogus"), ("shrink", "--budget", "inf"),
    ("shrink", "--max-runs", "0"), ("localize", "--repeats", "1"), ("replay", "--relation", "sideways"),
    ("report", "--cluster-workers", "0"), ("report", "--shrink-budget", "-1"),
])
def test_each_converter_refuses_its_bad_value(tmp_path, verb, flag, value):
    from harness.cli import build_parser

    argv = [verb] + _required(tmp_path, verb) + [f"{flag}={value}"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and flag.lstrip("-").replace("-", "") in lines[0].replace("-", ""), err.getvalue()
