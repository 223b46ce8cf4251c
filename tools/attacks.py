"""Count how the harness takes bad inputs and faults (run by hand, not by ``make test``).

``python tools/attacks.py [--jobs 2] [--timeout 120] [--only PREFIX] [--list]`` runs every attack below as a
``python -m harness ...`` subprocess in a fresh temporary directory and puts each outcome in one class:

- ``clear``: exit 2 with one ``harness: error:`` line (what a refused input must give);
- ``handled``: the verb finished as it should (a report with its error rows, a resumed run complete);
- ``traceback``: a Python traceback on stderr;
- ``silent``: exit 0 (or another code) where a refusal was due, or an answer that is not one line;
- ``loss``: a file or record that existed before is gone;
- ``hang``: still running after ``--timeout`` seconds (killed);
- ``crash``: ended by a signal;
- ``orphan``: a process the harness started still alive after the harness was killed (SIGKILL) while a plug-in
  hung (the ``killed:`` attacks).

It prints one line per attack that is not ``clear``/``handled``, then the counts. The target is 0 in the last six.
The attacks on files (outputs over inputs, the system's limits, damaged run directories and baselines) and the
killed harness are in ``tools/attacks_files.py``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "suites.plugins.attacks"
CLASSES = ("clear", "handled", "traceback", "silent", "loss", "hang", "crash", "orphan")
SMALL = ["--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats", "1", "--examples", "1",
         "--relations", "none", "--no-shrink", "--no-localize", "--quiet"]
CASE = json.dumps({"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]}})


@dataclass
class Attack:
    name: str
    argv: list[str]                    # after ``python -m harness``; {tmp} is the attack's directory
    expect: str = "error"              # "error": refused (exit 2, one line); "finish": finishes (0 or 1); "either";
    #                                    "raised": every run raised the same way (exit 3)
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    lost: Callable[[Path], str] | None = None   # after the run: what was lost ("" = nothing)
    stdout_closed: bool = False


def _write(rel: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def attacks() -> list[Attack]:
    out: list[Attack] = []
    loaders = ["subjects", "report", "replay", "gate", "localize"]

    def verb_argv(verb: str, plugin: str) -> list[str]:
        base = {"subjects": ["subjects"],
                "report": ["report", "--out", "{tmp}/run", *SMALL],
                "replay": ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id"],
                "gate": ["gate", "--devices", "cpu", "--out", "{tmp}/run", "--quiet"],
                "localize": ["localize", "{tmp}/case.json", "--subject", "chainer.embed_id"]}[verb]
        return [*base, "--subject-plugin", plugin]

    # Plug-ins at load, in every verb that loads them: refused in one line.
    for obj in ("RAISING", "EXITING", "ENDLESS", "DECLARED_BOOL", "INT_NAME", "NOT_A_SUBJECT", "STRING", "DUPLICATE",
                "BAD_FAMILY", "BAD_DEVICES", "NOPE"):
        for verb in loaders:
            out.append(Attack(f"plugin-load:{obj}:{verb}", verb_argv(verb, f"{PLUGIN}:{obj}"),
                              setup=_write("case.json", CASE)))
    for mode in ("exit0", "os_exit", "segv", "hang", "raise"):
        for verb in loaders:
            out.append(Attack(f"plugin-import:{mode}:{verb}", verb_argv(verb, f"{PLUGIN}:OK"),
                              env={"ATTACK_AT_IMPORT": mode}, setup=_write("case.json", CASE)))
    for spec in ("nocolon", "no_such_module_xyz:X", ":X", "os:path", "json:dumps", "harness:__version__"):
        out.append(Attack(f"plugin-spec:{spec}", verb_argv("subjects", spec)))
    # Plug-ins in accepts(): the report finishes with error rows.
    for obj in ("ACCEPTS_RAISE", "ACCEPTS_EXIT", "ACCEPTS_OS_EXIT", "ACCEPTS_SEGV", "ACCEPTS_HANG", "ACCEPTS_INTERRUPT"):
        out.append(Attack(f"plugin-accepts:{obj}", ["report", "--out", "{tmp}/run", "--subject-plugin", f"{PLUGIN}:{obj}",
                                                    "--subjects", "attack." + obj.lower(), *SMALL], expect="finish"))
    out.append(Attack("plugin-name:dollar", ["report", "--out", "{tmp}/run", "--subject-plugin", f"{PLUGIN}:DOLLAR",
                                             "--subjects", "adv.$\\foo{$", *SMALL], expect="finish"))
    # Bad option values: refused before any work.
    bad_values = {
        "--examples": ["-1", "x", "1e400", "", "9" * 5000, "nan"], "--seed": ["x", "1.5", "9" * 5000],
        "--timeout": ["0", "-1", "nan", "inf", "x"], "--repeats": ["0", "-3", "x"], "--fresh": ["-1", "x"],
        "--keep": ["-1", "x"], "--shard": ["0/0", "a", "2/1", "1/0", "-1/2"], "--devices": ["tpu", "", "gpu:x", "cpu,,cpu"],
        "--contexts": ["nope", "", ","], "--subjects": ["nope", "", ","], "--relations": ["nope", ",x"],
        "--corpus": ["{tmp}/missing.jsonl", "/dev/null/x", "{tmp}"], "--max-case-bytes": ["-1", "x"],
    }
    for flag, values in bad_values.items():
        for v in values:
            out.append(Attack(f"report-option:{flag}={v[:12]}", ["report", "--out", "{tmp}/run", flag, v, *[
                a for i, a in enumerate(SMALL) if not (a == flag or (i and SMALL[i - 1] == flag))]]))
    for flag, v in (("--repeats", "0"), ("--device", "tpu"), ("--context", "nope"), ("--subject", "nope"),
                    ("--timeout", "0"), ("--relation", "nope")):
        argv = ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id", flag, v]
        if flag == "--subject":
            argv = ["replay", "{tmp}/case.json", "--subject", v]
        out.append(Attack(f"replay-option:{flag}={v}", argv, setup=_write("case.json", CASE)))
    out += _option_grid()
    # Bad case files for replay.
    bad_cases = {
        "not-json": "{nope", "empty": "", "list": "[]", "deep": "[" * 900 + "]" * 900,
        "deep-object": '{"a":' * 700 + "1" + "}" * 700, "huge-int": '{"family":"embed","seed":' + "9" * 5000 + ',"spec":{}}',
        "1e400": '{"family":"embed","seed":0,"spec":{"vocab":1e400,"width":3,"ids_shape":[4]}}',
        "bad-family": '{"family":"conv","seed":0,"spec":{}}',
        "neg-shape": '{"family":"embed","seed":0,"spec":{"vocab":5,"width":3,"ids_shape":[-4]}}',
        "huge-shape": '{"family":"embed","seed":0,"spec":{"vocab":5,"width":3,"ids_shape":[30000,30000]}}',
        "bad-utf8": b"\xff\xfe{",
        "lstm-on-embed": '{"family":"lstm","seed":0,"spec":{"in_size":3,"hidden":3,"n_layers":1,"lengths":[2]}}',
    }
    for name, text in bad_cases.items():
        for verb in ("replay", "localize", "shrink"):
            extra = ["--kind", "error", "--max-runs", "2"] if verb == "shrink" else []
            out.append(Attack(f"{verb}-case:{name}", [verb, "{tmp}/case.json", "--subject", "chainer.embed_id", *extra],
                              setup=_write("case.json", text)))
    # Bad contracts files, in every verb that reads one: refused in one line before any work.
    line = '[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "*"\nreason = "r"\n'
    bad_contracts = {
        "empty": "", "not-toml": "[[contract\n", "deep": "x = " + "[" * 800 + "]" * 800 + "\n",
        "1e400": line + "tolerance = { float32 = [1e400, 0.0] }\n", "huge-int": "version = " + "9" * 5000 + "\n",
        "contradiction": line + "reproducible = false\nidentical_across = [\"blas1\"]\n",
        "record-with-tolerance": line + 'oracle = "record"\ntolerance = { float32 = [0.1, 0.1] }\n',
        "bad-utf8": b"\xff\xfe[[contract]]", "negative-tolerance": line + "tolerance = { float32 = [-1.0, 0.0] }\n",
        "unknown-key": line + "colour = 1\n", "wrong-type": line + 'reproducible = "yes"\n',
    }
    for name, text in bad_contracts.items():
        for verb in (["gate", "--devices", "cpu", "--out", "{tmp}/run", "--quiet"],
                     ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id"], ["contracts", "check"]):
            out.append(Attack(f"contracts:{name}:{verb[0]}", [*verb, "--contracts", "{tmp}/c.toml"],
                              setup=_both(_write("c.toml", text), _write("case.json", CASE))))
    # Bad audit files, in compare and merge: refused in one line.
    bad_audits = {
        "not-json": "{nope", "empty": "", "list": "[]", "deep": "[" * 900 + "]" * 900,
        "1e400": '{"format":"harness-audit","version":1,"x":1e400}', "huge-int": '{"version":' + "9" * 5000 + "}",
        "wrong-format": '{"format":"other","version":1}', "bad-utf8": b"\xff{",
    }
    for name, text in bad_audits.items():
        for verb in (["compare", "{tmp}/a.json", "{tmp}/a.json"], ["merge", "{tmp}/a.json", "--out", "{tmp}/m"]):
            out.append(Attack(f"audit-file:{name}:{verb[0]}", verb, setup=_write("a.json", text)))
    out += _input_check_attacks()
    for name, path in (("missing", "{tmp}/nope.json"), ("directory", "{tmp}"), ("dev-null", "/dev/null")):
        out.append(Attack(f"replay-file:{name}", ["replay", path, "--subject", "chainer.embed_id"]))
    # Resume of damaged runs.
    for name, text in (("garbage-line", "garbage\n"), ("empty-object", "{}\n"), ("list-line", "[1]\n")):
        out.append(Attack(f"resume:{name}", ["report", "--resume", "{tmp}/run", "--quiet"], setup=_damaged_run(text)))
    out.append(Attack("resume:torn-middle", ["report", "--resume", "{tmp}/run", "--quiet", "--no-shrink", "--no-localize"],
                      expect="finish", setup=_torn_run, lost=_lost_tasks))
    out.append(Attack("keep:running-dir", ["report", "--subjects", "chainer.embed_id", "--keep", "0", *SMALL],
                      expect="finish", setup=_running_dir, lost=_running_lost))
    # A reader that left.
    for verb in (["subjects"], ["subjects", "--json"], ["env"], ["replay", "{tmp}/case.json", "--subject",
                                                                  "chainer.embed_id"]):
        out.append(Attack(f"closed-stdout:{' '.join(verb[:2])}", verb, expect="any", stdout_closed=True,
                          setup=_write("case.json", CASE)))
    try:
        from tools import attacks_files as files
    except ImportError:  # run as a script: tools/ is the path's first folder
        import attacks_files as files  # type: ignore[no-redef]
    for group in (files.output_over_input, files.system_limits, files.run_records, files.killed):
        out += group(Attack)
    return out


def _case(**over: object) -> str:
    d = json.loads(CASE)
    for k, v in over.items():
        if k in ("spec_extra",):
            d["spec"].update(v)  # type: ignore[arg-type]
        else:
            d[k] = v
    return json.dumps(d)


_LSTM_CASE = {"family": "lstm", "seed": 0, "spec": {"in_size": 3, "hidden": 2, "n_layers": 1, "lengths": [2, 1]}}


def _audit_text(mutate: Callable[[dict], None] | None = None, *, subject: str = "chainer.embed_id",
                arrays: bool = False) -> str:
    import numpy as np

    from harness.judge.bitwise import DIGEST_ALGORITHM, digest

    y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    e = {"case_id": "c0", "family": "embed", "subject": subject, "role": "subject", "device": "cpu",
         "context": "default", "bad_input": False, "status": "ok", "error": None, "skip_reason": None,
         "repeats_agreed": True, "array_file": "0.npz" if arrays else None,
         "tensors": {"y": {"digest": digest(y), "dtype": "float32", "shape": [2, 3], "repeats_agreed": True}}}
    d = {"format": "harness-audit", "version": 1, "digest": DIGEST_ALGORITHM, "created": "2026-01-01T00:00:00+00:00",
         "environment": {"gpu": {"available": False}}, "corpus": {"digest": "d", "cases": 1},
         "settings": {"repeats": 2}, "arrays_dir": "arrays" if arrays else None, "entries": [e]}
    if mutate is not None:
        mutate(d)
    return json.dumps(d)


def _npz(kind: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        import numpy as np

        (tmp / "arrays").mkdir(exist_ok=True)
        p = tmp / "arrays" / "0.npz"
        if kind == "corrupt":
            p.write_bytes(b"PK\x03\x04" + bytes(30))
        elif kind == "pickled":
            np.savez(p, y=np.array([{"a": 1}], dtype=object), allow_pickle=True)
        elif kind == "npy":
            with open(p, "wb") as f:
                np.save(f, np.zeros((2, 3), np.float32))
        else:  # another shape than the entry's
            np.savez(p, y=np.zeros((3, 2), np.float32))
        (tmp / "a.json").write_text(_audit_text(arrays=True))
        (tmp / "b.json").write_text(_audit_text(arrays=True))
    return setup


def _entry(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["entries"][0].__setitem__(key, value)


def _tensor(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["entries"][0]["tensors"]["y"].__setitem__(key, value)


def _input_check_attacks() -> list[Attack]:
    """Issue 52's categories 1-4: a case's arrays and cross-field rules, an error that is not a difference, audit
    files and their arrays, contracts that contradict themselves."""
    out: list[Attack] = []
    gy = {"dtype": "float32", "shape": [4, 3]}
    bad_arrays = {
        "bits-not-base64": _case(arrays={"gy": {**gy, "bits": "@@@@"}}),
        "bits-short": _case(arrays={"gy": {**gy, "bits": "AAAA"}}),
        "bits-long": _case(arrays={"gy": {**gy, "bits": "A" * 68}}),
        "dtype-object": _case(arrays={"gy": {"dtype": "object", "shape": [1], "data": [1]}}),
        "dtype-void": _case(arrays={"gy": {"dtype": "V4", "shape": [1], "bits": "AAAAAA=="}}),
        "dtype-str": _case(arrays={"gy": {"dtype": "<U3", "shape": [1], "data": ["abc"]}}),
        "data-strings": _case(arrays={"x": {"dtype": "int32", "shape": [4], "data": ["a", "b", "c", "d"]}}),
        "data-overflow": _case(arrays={"x": {"dtype": "int8", "shape": [4], "data": [1, 2, 3, 999]}}),
        "data-count": _case(arrays={"x": {"dtype": "int32", "shape": [4], "data": [1]}}),
        "shape-contradicts": _case(arrays={"x": {"dtype": "int32", "shape": [5], "data": [0, 1, 2, 3, 4]}}),
        "array-names-nothing": _case(arrays={"zz": {"dtype": "int32", "shape": [1], "data": [0]}}),
        "inject-names-nothing": _case(spec_extra={"inject": [{"array": "nope", "index": 0, "value": 1}]},
                                      expect={"kind": "documented"}),
        "inject-nan-into-ids": _case(spec_extra={"inject": [{"array": "x", "index": 0, "value": "nan"}]},
                                     expect={"kind": "documented"}),
        "version-1.0": _case(version=1.0),
        "version-str": _case(version="1.0"),
    }
    for name, text in bad_arrays.items():
        for verb in ("replay", "localize", "shrink"):
            extra = ["--kind", "error", "--max-runs", "2"] if verb == "shrink" else []
            out.append(Attack(f"case-arrays:{name}:{verb}", [verb, "{tmp}/case.json", "--subject", "chainer.embed_id",
                                                             *extra], setup=_write("case.json", text)))
        out.append(Attack(f"corpus-arrays:{name}", ["report", "--corpus", "{tmp}/c.jsonl", "--out", "{tmp}/run",
                                                    "--devices", "cpu", "--quiet"],
                          setup=_write("c.jsonl", CASE + "\n" + text + "\n")))
    lstm = {
        "xs-widths-short": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "xs_widths": [3]}},
        "xs-widths-valid-case": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "xs_widths": [3, 5]}},
        "bidirectional-on-uni": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "bidirectional": True}},
    }
    for name, d in lstm.items():
        for verb in ("replay", "localize", "shrink"):
            extra = ["--kind", "error", "--max-runs", "2"] if verb == "shrink" else []
            out.append(Attack(f"case-lstm:{name}:{verb}", [verb, "{tmp}/case.json", "--subject", "chainer.NStepLSTM",
                                                           *extra], setup=_write("case.json", json.dumps(d))))
    # An error in every run is exit 3, never "differs" (exit 1).
    out.append(Attack("replay-raises:every-run", ["replay", "{tmp}/case.json", "--subject", "espnet.embed_id"],
                      expect="raised", setup=_write("case.json", json.dumps({
                          "family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4],
                                                                 "w_dtype": "float16"},
                          "expect": {"kind": "raises", "errors": ["InvalidType"]}, "tags": ["bad:w_dtype_espnet"]}))))
    bad_audits: dict[str, Callable[[dict], None]] = {
        "version-str-1.0": lambda d: d.__setitem__("version", "1.0"),
        "version-float": lambda d: d.__setitem__("version", 1.0),
        "unknown-top-field": lambda d: d.__setitem__("colour", 1),
        "unknown-entry-field": _entry("colour", 1), "unknown-tensor-field": _tensor("colour", 1),
        "empty-digest": _tensor("digest", ""), "digest-other-algorithm": _tensor("digest", "sha256:" + "ab" * 32),
        "digest-garbage": _tensor("digest", "xxh3_128:zz"), "dtype-nothing": _tensor("dtype", "float8"),
        "dtype-object": _tensor("dtype", "object"), "device-nothing": _entry("device", "tpu"),
        "family-nothing": _entry("family", "conv"), "array-file-path": _entry("array_file", "../../etc/passwd"),
        "settings-unknown": lambda d: d["settings"].__setitem__("colour", 1),
    }
    for name, mutate in bad_audits.items():
        for verb in (["compare", "{tmp}/a.json", "{tmp}/b.json"], ["merge", "{tmp}/a.json", "{tmp}/b.json", "--out",
                                                                   "{tmp}/m"]):
            out.append(Attack(f"audit-field:{name}:{verb[0]}", verb,
                              setup=_both(_write("a.json", _audit_text(mutate)), _write("b.json", _audit_text()))))
    for kind in ("corrupt", "pickled", "npy", "shape"):
        out.append(Attack(f"audit-arrays:{kind}", ["compare", "{tmp}/a.json", "{tmp}/b.json"], setup=_npz(kind)))
    out.append(Attack("audit-name:mathtext", ["compare", "{tmp}/a.json", "{tmp}/b.json", "--out", "{tmp}/cmp"],
                      expect="finish", setup=_both(_write("a.json", _audit_text(subject="$\\foo{$")),
                                                   _write("b.json", _audit_text(_tensor("digest", _audit_digest()),
                                                                                subject="$\\foo{$")))))
    base = (ROOT / "contracts.toml").read_text()
    line = '\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "blas1"\nreason = "r"\n'
    defect = '\n[[known_defect]]\nsubjects = ["chainer.embed_id"]\nreason = "r"\nreference = "x"\n'
    contradictions = {
        "version-1.0": base.replace("version = 1\n", "version = 1.0\n", 1),
        "invariant-not-reproducible": base + line + 'reproducible = false\ninvariant_under = ["order"]\n',
        "invariant-declared-nondeterministic": base + line.replace('"cpu"', '"gpu"')
        + 'reproducible = true\ninvariant_under = ["order"]\n',
        "identical-across-itself": base + line + 'reproducible = true\nidentical_across = ["blas1"]\n',
        "identical-across-star": base + line + 'reproducible = true\nidentical_across = ["*"]\n',
        "errors-with-no-error": base + '\n[[bad_input]]\ntag = "bad:w_rank"\noutcome = "no_error"\nerrors = []\n'
                                       'reason = "r"\n',
        "wrong-names-no-tensor": base + defect + 'tags = ["ids:empty"]\nwrong = ["grad.Q"]\n',
        "tag-nothing-generates": base + defect + 'tags = ["bad:nope"]\nerror = "ValueError"\nphase = "forward"\n',
        "rule-tag-nothing-generates": base + '\n[[bad_input]]\ntag = "colour:red"\noutcome = "no_error"\n'
                                             'reason = "r"\n',
        "error-not-exception": base + defect + 'tags = ["ids:empty"]\nerror = "it broke!"\nphase = "forward"\n',
    }
    for name, text in contradictions.items():
        out.append(Attack(f"contracts-contradiction:{name}", ["gate", "--devices", "cpu", "--out", "{tmp}/run",
                                                              "--quiet", "--contracts", "{tmp}/c.toml"],
                          setup=_write("c.toml", text)))
    return out


def _audit_digest() -> str:
    import numpy as np

    from harness.judge.bitwise import digest

    return digest(np.ones((2, 3), np.float32))


#: Per verb, a cheap valid command line that an option under attack is added to (the last value of a flag wins).
_BASE = {
    "cases": ["cases", "--family", "embed", "--examples", "1", "--out", "{tmp}/c.jsonl"],
    "replay": ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id"],
    "localize": ["localize", "{tmp}/case.json", "--subject", "chainer.embed_id"],
    "shrink": ["shrink", "{tmp}/case.json", "--subject", "chainer.embed_id", "--kind", "error", "--max-runs", "2"],
    "report": ["report", "--out", "{tmp}/run", *SMALL],
    "gate": ["gate", "--out", "{tmp}/run", "--quiet"],
    "audit": ["audit", "--out", "{tmp}/a.json", "--examples", "1", "--quiet"],
    "subjects": ["subjects"],
}
#: Verbs whose full run is cheap: a value that may be valid there ("0", "-1") is tried too.
_CHEAP = ("cases", "replay", "localize", "shrink", "report", "subjects")


def _option_grid() -> list[Attack]:
    """Every int/float option of every verb with malformed values (must be refused), and with edge values where
    the verb is cheap (refused or run: either, but never a traceback, crash or hang); the name options with
    names that do not exist."""
    import argparse

    from harness.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out: list[Attack] = []
    for verb, base in _BASE.items():
        sp = sub.choices[verb]
        for a in sp._actions:
            if not a.option_strings:
                continue
            flag = a.option_strings[0]
            bad: list[str] = []
            edge: list[str] = []
            parse = getattr(a.type, "parse", a.type)  # argcheck's converters say what they parse
            if parse is int:
                bad = ["x", "", "1e400", "1.5", "0x10", "9" * 5000, "-", "1_0_", " ", "nan", "inf", "--1"]
                edge = ["0", "-1", "-99999999999999999999", "99999999999999999999"]
            elif parse is float:
                bad = ["x", "", "nan", "-inf", "inf", "1e400x", "1e400", "-1e400", "NaN", "-nan", "0x1p3", "--1"]
                edge = ["0", "-1", "1e-300", "1e308"]
            elif flag in ("--devices", "--device"):
                bad = ["tpu", "", "gpu:x", ",", "cpu,tpu", "gpu:-1", "cpu:7"]
            elif flag in ("--contexts", "--context"):
                bad = ["nope", "", ",", "default,nope"]
            elif flag in ("--subjects", "--subject"):
                bad = ["nope", "", ",", "chainer.embed_id,nope"]
            elif flag == "--subject-plugin":
                bad = ["nocolon", "no_such_module_xyz:X", f"{PLUGIN}:NOPE", f"{PLUGIN}:INT_NAME"]
            for v in bad:
                out.append(Attack(f"option:{verb}:{flag}={v[:14]}", [*base, flag, v], setup=_write("case.json", CASE)))
            if verb in _CHEAP:
                for v in edge:
                    out.append(Attack(f"edge:{verb}:{flag}={v[:14]}", [*base, flag, v], expect="either",
                                      setup=_write("case.json", CASE)))
    return out


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for f in setups:
            f(tmp)
    return setup


def _finished_run(tmp: Path) -> None:
    subprocess.run([sys.executable, "-m", "harness", "report", "--subjects", "chainer.embed_id", "--out", str(tmp / "run"),
                    *SMALL], cwd=tmp, env=_env({}), capture_output=True, check=True)
    gz = tmp / "run" / "tasks.jsonl.gz"
    if gz.exists():
        (tmp / "run" / "tasks.jsonl").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()


def _damaged_run(line: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _finished_run(tmp)
        with open(tmp / "run" / "tasks.jsonl", "a") as f:
            f.write(line)
    return setup


def _torn_run(tmp: Path) -> None:
    _finished_run(tmp)
    p = tmp / "run" / "tasks.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    (tmp / "keys.json").write_text(json.dumps(sorted(json.loads(ln)["key"] for ln in lines)))
    p.write_text("".join(lines[:2] + [lines[2][:len(lines[2]) // 2] + "\n"] + lines[3:5] + [lines[5][:30]]))


def _lost_tasks(tmp: Path) -> str:
    want = json.loads((tmp / "keys.json").read_text())
    p = tmp / "run" / "tasks.jsonl"
    data = gzip.decompress(p.with_suffix(".jsonl.gz").read_bytes()) if not p.exists() else p.read_bytes()
    got = sorted(json.loads(ln)["key"] for ln in data.decode().splitlines() if ln.strip())
    return "" if got == want else f"{len(want)} tasks planned, {len(got)} ({len(set(got))} distinct) on disk"


def _running_dir(tmp: Path) -> None:
    d = tmp / "reports" / "20200101T000000Z-1"
    d.mkdir(parents=True)
    (d / "corpus.jsonl").write_text("")
    # The holder: a process that keeps the lock for the attack's duration (as a running report does).
    code = ("import fcntl,sys,time;f=open(sys.argv[1],'a+');fcntl.flock(f,fcntl.LOCK_EX);"
            "open(sys.argv[2],'w').close();time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d / ".lock"), str(tmp / "locked")])
    (tmp / "holder.pid").write_text(str(proc.pid))
    while not (tmp / "locked").exists():
        if proc.poll() is not None:
            raise RuntimeError("lock holder died")


def _running_lost(tmp: Path) -> str:
    pid = int((tmp / "holder.pid").read_text())
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (OSError, ChildProcessError):
        pass
    ok = (tmp / "reports" / "20200101T000000Z-1" / "corpus.jsonl").exists()
    return "" if ok else "the running report's directory was deleted"


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_PLUGIN_TIMEOUT": "10", "HARNESS_PROFILE": "ci", **extra}


_TAG = "HARNESS_ATTACK_TAG"


def _tagged(tag: str) -> list[int]:
    """The processes whose environment carries ``tag`` (every process a harness started inherits it)."""
    needle = f"{_TAG}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


def _run_killed(a: Attack, argv: list[str], tmp: Path, timeout: float) -> tuple[str, str]:
    """Start the harness, SIGKILL it once the plug-in hangs, and look for what it leaves alive."""
    tag, mark = uuid.uuid4().hex, tmp / "hung"
    env = _env({**a.env, _TAG: tag, "HARNESS_TEST_HANG_MARK": str(mark)})
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None and not (mark.exists() and mark.read_text().strip()):
        time.sleep(0.2)
    if proc.poll() is not None:
        err = proc.stderr.read() if proc.stderr else ""
        proc.stderr.close()
        if "Traceback" in err:
            return "traceback", err.strip().splitlines()[-1][:160]
        return "handled", f"ended (exit {proc.returncode}) before the plug-in hung: nothing to kill"
    os.kill(proc.pid, 9)
    proc.wait()
    proc.stderr.close()
    end = time.monotonic() + 60
    while _tagged(tag) and time.monotonic() < end:
        time.sleep(0.2)
    left = _tagged(tag)
    for pid in left:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return ("orphan", f"{len(left)} process(es) alive 60 s after the harness was killed") if left else \
        ("handled", "nothing left")


def run_one(a: Attack, timeout: float) -> tuple[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="attack-"))
    try:
        if a.setup:
            a.setup(tmp)
        argv = [x.replace("{tmp}", str(tmp)) for x in a.argv]
        if a.expect == "killed":
            return _run_killed(a, argv, tmp, timeout)
        proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=tmp, env=_env(a.env), text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        if a.stdout_closed:
            proc.stdout.close()
        try:
            if a.stdout_closed:
                err = proc.stderr.read() if proc.stderr else ""
                proc.wait(timeout=timeout)
                out = ""
            else:
                out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return "hang", f"still running after {timeout:g} s"
        rc = proc.returncode
        lost = a.lost(tmp) if a.lost else ""
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if rc < 0:
            return "crash", f"signal {-rc}"
        if "Traceback" in err:
            return "traceback", next((ln for ln in reversed(lines) if ln.strip()), "")[:160]
        if lost:
            return "loss", lost
        if a.expect == "error":
            if rc == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "):
                return "clear", lines[0][:160]
            return "silent", f"exit {rc}, {len(lines)} stderr line(s): {(lines or [''])[-1][:120]}"
        ran = (0, 1, 3) if a.argv[0] == "replay" else (0, 1)  # replay: 3 when every run raised the same way
        if a.expect == "either":  # refused in one line, or it ran: both fine
            if rc == 2:
                ok = len(lines) == 1 and lines[0].startswith("harness: error: ")
                return ("clear", lines[0][:160]) if ok else ("silent", f"exit 2, {len(lines)} stderr line(s)")
            return ("handled", f"exit {rc}") if rc in ran else ("silent", f"exit {rc}: {(lines or [''])[-1][:120]}")
        if a.expect == "raised":  # every run raised the same way: exit 3, never "differs"
            ok = rc == 3 and "comparison(s) differ" not in out
            return ("handled", "exit 3") if ok else ("silent", f"exit {rc}: {(out.splitlines() or [''])[-1][:120]}")
        if a.expect == "finish":
            return ("handled", f"exit {rc}") if rc in ran else ("silent", f"exit {rc}: {(lines or [''])[-1][:120]}")
        return "handled", f"exit {rc}"
    finally:
        try:
            from tools.attacks_files import undo_read_only
        except ImportError:
            from attacks_files import undo_read_only  # type: ignore[no-redef]
        undo_read_only(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2, help="attacks at once (default %(default)s)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before an attack is a hang (default %(default)s)")
    p.add_argument("--only", default="", help="run the attacks whose name starts with this")
    p.add_argument("--list", action="store_true", help="list the attacks and stop")
    args = p.parse_args(argv)
    todo = [a for a in attacks() if a.name.startswith(args.only)]
    if args.list:
        print("\n".join(a.name for a in todo))
        return 0
    counts = dict.fromkeys(CLASSES, 0)
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, a, args.timeout): a for a in todo}
        for f in cf.as_completed(futures):
            a = futures[f]
            try:
                cls, why = f.result()
            except Exception as exc:  # noqa: BLE001 - a set-up that failed is the tool's problem: say it
                cls, why = "traceback", f"(attack set-up) {type(exc).__name__}: {exc}"
            counts[cls] += 1
            if cls not in ("clear", "handled"):
                print(f"{cls:9} {a.name}: {why}", flush=True)
    print(f"{len(todo)} attacks: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES))
    return 0 if not any(counts[c] for c in CLASSES[2:]) else 1


if __name__ == "__main__":
    sys.exit(main())
