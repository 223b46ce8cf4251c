"""Attacks on the files around a verb (``tools/attacks.py`` adds them to its list): an output that is one of the
verb's inputs, names and sizes at the system's limits, options a mode ignores, run-directory and baseline records
damaged the ways a disk, a copy or a kill damage them, and a harness killed with SIGKILL while a plug-in hangs.

Each attack builds its own files under the attack's directory ``{tmp}``; a finished run directory is made once per
attack that needs one (a small report, a few seconds)."""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

CASE = json.dumps({"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]}})
SMALL = ["--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats", "1", "--examples", "1",
         "--relations", "none", "--no-shrink", "--no-localize", "--quiet"]
LONG = "n" * 300


def _files(tmp: Path) -> None:
    """A case, a corpus, an audit-looking file, a contracts file: the inputs the verbs read."""
    (tmp / "case.json").write_text(CASE + "\n")
    (tmp / "corpus.jsonl").write_text(CASE + "\n")
    (tmp / "a.json").write_text("{}\n")
    (tmp / "c.toml").write_text("")


def _digests(tmp: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tmp.iterdir()) if p.is_file()}


def _unchanged(setup: Callable[[Path], None]) -> tuple[Callable[[Path], None], Callable[[Path], str]]:
    """A setup that also records every input's digest, and the check that none changed."""
    def wrapped(tmp: Path) -> None:
        setup(tmp)
        (tmp.parent / (tmp.name + ".digests")).write_text(json.dumps(_digests(tmp)))

    def lost(tmp: Path) -> str:
        path = tmp.parent / (tmp.name + ".digests")
        before = json.loads(path.read_text())
        path.unlink()
        now = _digests(tmp)
        changed = [k for k, v in before.items() if now.get(k) != v]
        return f"input overwritten: {', '.join(changed)}" if changed else ""
    return wrapped, lost


def _linked(kind: str, target: str, name: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _files(tmp)
        if kind == "hard":
            os.link(tmp / target, tmp / name)
        elif kind == "soft":
            os.symlink(tmp / target, tmp / name)
    return setup


def output_over_input(Attack: Any) -> list[Any]:
    """Every verb's output given as one of its inputs: the same path, a hard link, a symbolic link."""
    out = []
    grid = {
        "cases": (["cases", "--coverage", "--corpus", "{tmp}/corpus.jsonl", "--out"], "corpus.jsonl"),
        "shrink": (["shrink", "{tmp}/corpus.jsonl", "--subject", "chainer.embed_id", "--kind", "error", "--out"],
                   "corpus.jsonl"),
        "audit": (["audit", "--corpus", "{tmp}/corpus.jsonl", "--devices", "cpu", "--out"], "corpus.jsonl"),
        "gate-junit": (["gate", "--corpus", "{tmp}/corpus.jsonl", "--junit"], "corpus.jsonl"),
        "gate-contracts": (["gate", "--contracts", "{tmp}/c.toml", "--junit"], "c.toml"),
        "export": (["export", "{tmp}/case.json", "--subject", "chainer.embed_id", "--out"], "case.json"),
        "export-markdown": (["export", "{tmp}/case.json", "--subject", "chainer.embed_id", "--out",
                             "{tmp}/x.py", "--markdown"], "case.json"),
    }
    for verb, (argv, target) in grid.items():
        for kind in ("same", "hard", "soft"):
            name = target if kind == "same" else f"{kind}-{target}"
            setup, lost = _unchanged(_linked(kind, target, name))
            out.append(Attack(f"output-over-input:{verb}:{kind}", [*argv, "{tmp}/" + name], setup=setup, lost=lost))
    for verb, name in (("compare", "compare.md"), ("merge", "merge.md")):
        def setup(tmp: Path, name: str = name) -> None:
            _files(tmp)
            shutil.copy(tmp / "a.json", tmp / name)
        wrapped, lost = _unchanged(setup)
        argv = (["compare", "{tmp}/" + name, "{tmp}/a.json", "--out", "{tmp}"] if verb == "compare"
                else ["merge", "{tmp}/" + name, "--out", "{tmp}"])
        out.append(Attack(f"output-over-input:{verb}:writes-there", argv, setup=wrapped, lost=lost))
    return out


def _read_only(tmp: Path) -> None:
    """``{tmp}/ro``: a folder this process cannot write (mode 0555; for root, the immutable attribute)."""
    _files(tmp)
    ro = tmp / "ro"
    ro.mkdir()
    shutil.copy(tmp / "case.json", ro / "case.json")
    if os.geteuid() != 0:
        ro.chmod(0o555)
    else:
        subprocess.run(["chattr", "+i", str(ro)], capture_output=True)


def undo_read_only(tmp: Path) -> None:
    """Before the attack's directory is removed."""
    ro = tmp / "ro"
    if ro.exists():
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(ro)], capture_output=True)
        ro.chmod(0o755)


def system_limits(Attack: Any) -> list[Any]:
    """Output names over NAME_MAX and PATH_MAX, empty paths, read-only folders, options a mode ignores, and a
    plug-in whose outputs are larger than the harness takes from one run."""
    out = []
    deep = "/".join(["d" * 200] * 21)
    outputs = {
        "cases": ["cases", "--family", "embed", "--examples", "1", "--out"],
        "audit": ["audit", "--examples", "1", "--devices", "cpu", "--out"],
        "gate-junit": ["gate", "--devices", "cpu", "--junit"],
        "gate-out": ["gate", "--devices", "cpu", "--out"],
        "report": ["report", *SMALL, "--out"],
        "compare": ["compare", "{tmp}/a.json", "{tmp}/a.json", "--out"],
        "merge": ["merge", "{tmp}/a.json", "--out"],
        "shrink": ["shrink", "{tmp}/case.json", "--subject", "chainer.embed_id", "--kind", "error", "--out"],
        "export": ["export", "{tmp}/case.json", "--subject", "chainer.embed_id", "--out"],
        "audit-keep-arrays": ["audit", "--examples", "1", "--devices", "cpu", "--out", "{tmp}/x.json",
                              "--keep-arrays"],
    }
    for verb, argv in outputs.items():
        for what, path in (("name-max", "{tmp}/" + LONG), ("name-max-parent", "{tmp}/" + LONG + "/x"),
                           ("path-max", "{tmp}/" + deep), ("empty", ""), ("read-only", "{tmp}/ro/new")):
            out.append(Attack(f"os-limit:{verb}:{what}", [*argv, path],
                              setup=_read_only if what == "read-only" else _files))
    out.append(Attack("os-limit:shrink:beside-read-only", ["shrink", "{tmp}/ro/case.json", "--subject",
                                                           "chainer.embed_id", "--kind", "error"], setup=_read_only))
    for verb, argv in (("replay", ["replay", "", "--subject", "chainer.embed_id"]),
                       ("cases-corpus", ["cases", "--coverage", "--corpus", ""]),
                       ("replay-long", ["replay", "{tmp}/" + LONG, "--subject", "chainer.embed_id"])):
        out.append(Attack(f"os-limit:input:{verb}", argv, setup=_files))
    for extra in (["--out", "{tmp}/c.jsonl"], ["--examples", "3"], ["--family", "lstm"], ["--seed", "3"]):
        out.append(Attack(f"mode-ignores:cases-coverage:{extra[0]}", ["cases", "--coverage", *extra]))
    for limit in ("8", "x", "-1"):
        out.append(Attack(f"output-limit:{limit}", ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id",
                                                     "--repeats", "2"], setup=_files,
                          env={"HARNESS_MAX_OUTPUT_BYTES": limit}, expect="finish" if limit == "8" else "error"))
    return out


# ---- run directories and baselines ------------------------------------------------------------------------------
def _finished(tmp: Path, name: str = "run") -> Path:
    d = tmp / name
    subprocess.run([sys.executable, "-m", "harness", "report", "--subjects", "chainer.embed_id", "--out", str(d),
                    "--keep-arrays", "all", *SMALL], cwd=tmp, capture_output=True, check=True,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    return d


def _records(d: Path, name: str) -> list[bytes]:
    packed = d / (name + ".xz")  # as a finished report packs its records (harness.core.record_files)
    if packed.exists():
        data = lzma.decompress(packed.read_bytes())
        packed.unlink()
    else:
        data = (d / name).read_bytes()
    return [ln for ln in data.split(b"\n") if ln.strip()]


def _put(d: Path, name: str, lines: list[bytes]) -> None:
    (d / name).write_bytes(b"\n".join(lines) + b"\n")


def _damage(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        fn(_finished(tmp))
    return setup


def _line(where: str, text: bytes) -> Callable[[Path], None]:
    def fn(d: Path) -> None:
        lines = _records(d, "tasks.jsonl")
        _put(d, "tasks.jsonl", lines[:2] + [text] + lines[2:] if where == "middle" else lines + [text])
    return fn


def _cut(name: str) -> Callable[[Path], None]:
    def fn(d: Path) -> None:
        raw = (d / name).read_bytes()
        (d / name).write_bytes(raw[:len(raw) // 2])
    return fn


def _bad_crc(name: str) -> Callable[[Path], None]:
    def fn(d: Path) -> None:
        raw = bytearray((d / name).read_bytes())
        raw[-6] ^= 0xFF
        (d / name).write_bytes(bytes(raw))
    return fn


def _json(name: str, text: str) -> Callable[[Path], None]:
    def fn(d: Path) -> None:
        (d / name).write_text(text)
    return fn


def _campaign(**changes: Any) -> Callable[[Path], None]:
    def fn(d: Path) -> None:
        meta = json.loads((d / "campaign.json").read_text())
        meta.update(changes)
        (d / "campaign.json").write_text(json.dumps(meta))
    return fn


def _drop_case(d: Path) -> None:
    lines = (d / "corpus.jsonl").read_bytes().split(b"\n")
    (d / "corpus.jsonl").write_bytes(b"\n".join(lines[1:]))


def _drop_case_and_stamp(d: Path) -> None:
    _drop_case(d)
    meta = json.loads((d / "campaign.json").read_text())
    meta.pop("corpus", None)
    (d / "campaign.json").write_text(json.dumps(meta))


def _flip_npz(d: Path) -> None:
    path = sorted((d / "arrays").iterdir())[0]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))


def _garbage_npz(d: Path) -> None:
    sorted((d / "arrays").iterdir())[0].write_bytes(b"PK\x03\x04 not a zip")


def _every_task_once(tmp: Path) -> str:
    d = tmp / "run"
    tasks = [json.loads(ln) for ln in _records(d, "tasks.jsonl")]
    keys = [t["key"] for t in tasks]
    runs: dict[str, int] = {}
    for ln in _records(d, "runs.jsonl"):
        k = json.loads(ln)["key"]
        runs[k] = runs.get(k, 0) + 1
    if len(keys) != len(set(keys)):
        return f"{len(keys) - len(set(keys))} task(s) recorded twice"
    short = [t["key"] for t in tasks if runs.get(t["key"], 0) != t["runs"]]
    return f"{len(short)} task(s) whose run lines are missing or doubled" if short else ""


def run_records(Attack: Any) -> list[Any]:
    """``report --resume`` of damaged run directories, and baselines whose files do not read whole."""
    resume = ["report", "--resume", "{tmp}/run", "--quiet", "--no-shrink", "--no-localize"]
    deep = b'{"key": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    refused = {
        "not-utf8-middle": _line("middle", b'{"key": "\xff\xfe"}'), "nested-5000": _line("middle", deep),
        "garbage-after-brace": _line("middle", b"{garbage"), "corpus-case-removed": _drop_case,
        "corpus-case-removed-no-stamp": _drop_case_and_stamp, "shard-9/2": _campaign(shard="9/2"),
        "shard-0/2": _campaign(shard="0/2"), "tasks-bad-crc": _bad_crc("tasks.jsonl.xz"),
        "runs-bad-crc": _bad_crc("runs.jsonl.xz"), "tasks-packed-garbage": _json("tasks.jsonl.xz", "not xz"),
        "campaign-list": _json("campaign.json", "[1]"),
    }
    out = [Attack(f"resume-records:{k}", resume, setup=_damage(fn)) for k, fn in refused.items()]
    repaired = {"tasks-packed-cut": _cut("tasks.jsonl.xz"), "runs-packed-cut": _cut("runs.jsonl.xz"),
                "npz-flipped": _flip_npz, "npz-garbage": _garbage_npz,
                "torn-middle": _line("middle", b'{"key": "abc", "subj')}
    out += [Attack(f"resume-records:{k}", resume, setup=_damage(fn), expect="finish", lost=_every_task_once)
            for k, fn in repaired.items()]
    baseline = {
        "environment-garbage": _json("environment.json", "garbage"),
        "environment-list": _json("environment.json", "[]"),
        "campaign-list": _json("campaign.json", "[]"), "measures-cut": _cut("measures.jsonl.xz"),
        "measures-bad-crc": _bad_crc("measures.jsonl.xz"), "tasks-cut": _cut("tasks.jsonl.xz"),
        "npz-flipped": _flip_npz, "shard-9/2": _campaign(shard="9/2"),
    }
    for k, fn in baseline.items():
        for verb in (["gate", "--devices", "cpu", "--quiet", "--out", "{tmp}/new"],
                     ["replay", "{tmp}/run/corpus.jsonl", "--case-id", "x", "--subject", "chainer.embed_id"]):
            out.append(Attack(f"baseline-records:{k}:{verb[0]}", [*verb, "--baseline", "{tmp}/run"],
                              setup=_damage(fn)))
    return out


# ---- no process outlives the harness ----------------------------------------------------------------------------
def killed(Attack: Any) -> list[Any]:
    """SIGKILL the harness once a plug-in hangs (at import, in accepts(), in a run): no process of it may stay."""
    plug = ["--subject-plugin", "suites.plugins.hangs:SUBJECTS"]
    small = ["--subjects", "hangs.subject", "--examples", "1", "--repeats", "1", "--fresh", "1", "--relations",
             "none", "--timeout", "3600", "--no-localize", "--quiet"]
    verbs = {
        "report": ["report", *plug, *small, "--out", "{tmp}/run"],
        "subjects": ["subjects", *plug],
        "replay": ["replay", "{tmp}/case.json", "--subject", "hangs.subject", "--repeats", "1", "--timeout", "3600",
                   *plug],
        "localize": ["localize", "{tmp}/case.json", "--subject", "hangs.subject", "--timeout", "3600", *plug],
        "gate": ["gate", "--devices", "cpu", "--quiet", "--out", "{tmp}/run", *plug],
    }
    out = []
    for verb, argv in verbs.items():
        for where in ("import", "accepts", "run"):
            if verb in ("subjects", "gate") and where != "import":  # (gate refuses a plug-in its contracts lack)
                continue
            out.append(Attack(f"killed:{verb}:{where}", argv, expect="killed", setup=_files,
                              env={"HARNESS_TEST_HANG": where, "HARNESS_PLUGIN_TIMEOUT": "3600"}))
    return out
