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
What each attack is (:class:`Attack`) and the set-ups they share are in ``tools/attacks_spec.py``; the attacks on
a verb's inputs in ``tools/attacks_inputs.py``; the option grid in ``tools/attacks_options.py``; the report
directories of the ``--resume`` and ``--keep`` attacks in ``tools/attacks_rundirs.py``; the attacks on files
(outputs over inputs, the system's limits, damaged run directories and baselines) and the killed harness in
``tools/attacks_files.py``; the attacks on rules, environment variables, options used or refused, resumes that
change an option, values that only look right and outputs over the files every verb reads in
``tools/attacks_rules.py``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

try:
    from tools.attacks_inputs import input_check_attacks
    from tools.attacks_options import option_grid
    from tools.attacks_rundirs import damaged_run, lost_tasks, running_dir, running_lost, torn_run
    from tools.attacks_spec import CASE, PLUGIN, SMALL, Attack, both, harness_env, write
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_inputs import input_check_attacks  # type: ignore[no-redef]
    from attacks_options import option_grid  # type: ignore[no-redef]
    from attacks_rundirs import damaged_run, lost_tasks, running_dir, running_lost, torn_run  # type: ignore[no-redef]
    from attacks_spec import CASE, PLUGIN, SMALL, Attack, both, harness_env, write  # type: ignore[no-redef]

CLASSES = ("clear", "handled", "traceback", "silent", "loss", "hang", "crash", "orphan")


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
                              setup=write("case.json", CASE)))
    for mode in ("exit0", "os_exit", "segv", "hang", "raise"):
        for verb in loaders:
            out.append(Attack(f"plugin-import:{mode}:{verb}", verb_argv(verb, f"{PLUGIN}:OK"),
                              env={"ATTACK_AT_IMPORT": mode}, setup=write("case.json", CASE)))
    for spec in ("nocolon", "no_such_module_xyz:X", ":X", "os:path", "json:dumps", "harness:__version__"):
        out.append(Attack(f"plugin-spec:{spec}", verb_argv("subjects", spec)))
    # Plug-ins in accepts(): the report finishes with error rows.
    for obj in ("ACCEPTS_RAISE", "ACCEPTS_EXIT", "ACCEPTS_OS_EXIT", "ACCEPTS_SEGV", "ACCEPTS_HANG",
                "ACCEPTS_INTERRUPT"):
        out.append(Attack(f"plugin-accepts:{obj}",
                          ["report", "--out", "{tmp}/run", "--subject-plugin", f"{PLUGIN}:{obj}",
                           "--subjects", "attack." + obj.lower(), *SMALL], expect="finish"))
    out.append(Attack("plugin-name:dollar", ["report", "--out", "{tmp}/run", "--subject-plugin", f"{PLUGIN}:DOLLAR",
                                             "--subjects", "adv.$\\foo{$", *SMALL], expect="finish"))
    # Bad option values: refused before any work.
    bad_values = {
        "--examples": ["-1", "x", "1e400", "", "9" * 5000, "nan"], "--seed": ["x", "1.5", "9" * 5000],
        "--timeout": ["0", "-1", "nan", "inf", "x"], "--repeats": ["0", "-3", "x"], "--fresh": ["-1", "x"],
        "--keep": ["-1", "x"], "--shard": ["0/0", "a", "2/1", "1/0", "-1/2"],
        "--devices": ["tpu", "", "gpu:x", "cpu,,cpu"],
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
        out.append(Attack(f"replay-option:{flag}={v}", argv, setup=write("case.json", CASE)))
    out += option_grid()
    # Bad case files for replay.
    bad_cases = {
        "not-json": "{nope", "empty": "", "list": "[]", "deep": "[" * 900 + "]" * 900,
        "deep-object": '{"a":' * 700 + "1" + "}" * 700,
        "huge-int": '{"family":"embed","seed":' + "9" * 5000 + ',"spec":{}}',
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
                              setup=write("case.json", text)))
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
                              setup=both(write("c.toml", text), write("case.json", CASE))))
    # Bad audit files, in compare and merge: refused in one line.
    bad_audits = {
        "not-json": "{nope", "empty": "", "list": "[]", "deep": "[" * 900 + "]" * 900,
        "1e400": '{"format":"harness-audit","version":1,"x":1e400}', "huge-int": '{"version":' + "9" * 5000 + "}",
        "wrong-format": '{"format":"other","version":1}', "bad-utf8": b"\xff{",
    }
    for name, text in bad_audits.items():
        for verb in (["compare", "{tmp}/a.json", "{tmp}/a.json"], ["merge", "{tmp}/a.json", "--out", "{tmp}/m"]):
            out.append(Attack(f"audit-file:{name}:{verb[0]}", verb, setup=write("a.json", text)))
    out += input_check_attacks()
    for name, path in (("missing", "{tmp}/nope.json"), ("directory", "{tmp}"), ("dev-null", "/dev/null")):
        out.append(Attack(f"replay-file:{name}", ["replay", path, "--subject", "chainer.embed_id"]))
    # Resume of damaged runs.
    for name, text in (("garbage-line", "garbage\n"), ("empty-object", "{}\n"), ("list-line", "[1]\n")):
        out.append(Attack(f"resume:{name}", ["report", "--resume", "{tmp}/run", "--quiet"], setup=damaged_run(text)))
    out.append(Attack("resume:torn-middle",
                      ["report", "--resume", "{tmp}/run", "--quiet", "--no-shrink", "--no-localize"],
                      expect="finish", setup=torn_run, lost=lost_tasks))
    out.append(Attack("keep:running-dir", ["report", "--subjects", "chainer.embed_id", "--keep", "0", *SMALL],
                      expect="finish", setup=running_dir, lost=running_lost))
    # A reader that left.
    for verb in (["subjects"], ["subjects", "--json"], ["env"], ["replay", "{tmp}/case.json", "--subject",
                                                                  "chainer.embed_id"]):
        out.append(Attack(f"closed-stdout:{' '.join(verb[:2])}", verb, expect="any", stdout_closed=True,
                          setup=write("case.json", CASE)))
    try:
        from tools import attacks_files as files
    except ImportError:  # run as a script: tools/ is the path's first folder
        import attacks_files as files  # type: ignore[no-redef]
    for group in (files.output_over_input, files.system_limits, files.run_records, files.killed):
        out += group(Attack)
    try:
        from tools.attacks_rules import rule_attacks
        from tools.attacks_upstream import upstream_attacks
    except ImportError:  # run as a script: tools/ is the path's first folder
        from attacks_rules import rule_attacks  # type: ignore[no-redef]
        from attacks_upstream import upstream_attacks  # type: ignore[no-redef]
    return out + rule_attacks() + upstream_attacks()


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
    env = harness_env({**a.env, _TAG: tag, "HARNESS_TEST_HANG_MARK": str(mark)})
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
        proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=tmp, env=harness_env(a.env), text=True,
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
        if a.expect == "ran":  # it ran what it was asked: never a case skipped as over a limit it was told
            skipped = "needs about" in out + err
            return ("handled", f"exit {rc}") if rc in ran and not skipped else \
                ("silent", f"exit {rc}{', the case skipped' if skipped else ''}: {(lines or [''])[-1][:120]}")
        if a.expect == "refused":  # export's claim does not reproduce: exit 1, one line, nothing written
            written = [p.name for p in tmp.iterdir() if p.name.startswith("out")]
            ok = rc == 1 and len(lines) == 1 and lines[0].startswith("harness export: ") and not written
            return ("clear", lines[0][:160]) if ok else \
                ("silent", f"exit {rc}, wrote {written}: {(lines or [''])[-1][:120]}")
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
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds before an attack is a hang (default %(default)s)")
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
