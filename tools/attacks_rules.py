"""Attacks on what the harness promises beyond one value: a contracts rule the judge can never satisfy, an
environment variable the harness reads, an option a verb accepts (used, or refused), a resume that changes an
option, a value whose shape only looks right, an output over a file every verb reads (the plug-in modules, the
shipped contracts). Each category is a group of attacks named ``GROUP:NAME``; each must be refused in one line
(exit 2), or, where marked ``ran``, run what it was asked (never skip it quietly)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

try:
    from tools.attacks_spec import CASE, ROOT, SMALL, Attack, write
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_spec import CASE, ROOT, SMALL, Attack, write  # type: ignore[no-redef]

#: The groups of this module, in the order :func:`rule_attacks` lists them.
GROUPS = ("contracts-never", "env-var", "option-used", "resume-option", "value-shape", "output-over-read")

_GATE = ["gate", "--devices", "cpu", "--out", "{tmp}/run", "--quiet"]
_REPLAY = ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id", "--repeats", "1"]


def _contracts_never() -> list[Attack]:
    """Rules no measure could ever satisfy, each in a copy of the shipped contracts read by ``gate``."""
    base = (ROOT / "contracts.toml").read_text()
    line = '\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "{ctx}"\nreason = "r"\n'
    defect = ('\n[[known_defect]]\nsubjects = {subjects}\nreason = "r"\nreference = "x"\ntags = ["ids:empty"]\n'
              'error = "ValueError"\nphase = "backward"\n')
    texts = {
        "padding-on-embed": base + line.format(ctx="blas1") + 'reproducible = true\ninvariant_under = ["padding"]\n',
        "alone-on-embed": base + line.format(ctx="blas1") + 'reproducible = true\ninvariant_under = ["alone"]\n',
        "context-never-on-device": base + line.format(ctx="debug")
        + 'reproducible = true\nidentical_across = ["cublas_ws"]\n',
        "context-not-reproducible": base.replace(
            'subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"',
            'subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "debug"', 1)
        + '\n[[contract]]\nsubject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"\nreproducible = true\n'
          'identical_across = ["debug"]\nreason = "r"\n',
        "defect-no-subjects": base + defect.format(subjects="[]"),
        "defect-on-oracle": base + defect.format(subjects='["oracle.embed"]'),
        "defect-on-reference": base + defect.format(subjects='["reference.embed_sequential"]'),
        "defect-twice": base + defect.format(subjects='["espnet.embed_id"]') * 2,
    }
    return [Attack(f"contracts-never:{name}:gate", [*_GATE, "--contracts", "{tmp}/c.toml"],
                   setup=write("c.toml", text)) for name, text in texts.items()]


#: Per variable the harness reads: values it must refuse in one line naming it.
_BAD_ENV = {
    "HARNESS_PROFILE": ["nonsense", "CI", " ci"],
    "HARNESS_GPU": ["yes", "2", "off"], "HARNESS_ZYGOTE": ["no"], "HARNESS_WORKER_STDERR": ["true"],
    "HARNESS_ALLOW_UNUSABLE_GPU": ["y"], "HARNESS_PLUGIN_IN_PROCESS": ["on"],
    "HARNESS_PROGRESS_SECONDS": ["soon", "-1", "0", "1e9", "nan"],
    "HARNESS_JOBS": ["many", "-1", "0", "1e3"],
    "HARNESS_PLUGIN_TIMEOUT": ["abc", "-1", "nan"],
    "HARNESS_MAX_CASE_BYTES": ["-5", "lots", "0"],
    "HARNESS_WORKER_MEMORY": ["lots", "-1", "134217728", "1"],
    "HARNESS_MAX_OUTPUT_BYTES": ["lots", "-1"],
    "HARNESS_PARENT_PID": ["1", "x12", "-4"],
}


def _env_var() -> list[Attack]:
    out = []
    for name, values in _BAD_ENV.items():
        for v in values:
            for verb, argv in (("subjects", ["subjects"]), ("replay", _REPLAY)):
                out.append(Attack(f"env-var:{name}={v[:12]}:{verb}", argv, env={name: v}, setup=write("case.json",
                                                                                                       CASE)))
    return out


def _without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value."""
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:]


def _option_used() -> list[Attack]:
    """An option the check takes must hold the run too: a case limit above the default (a tiny one here) runs
    the case; one below the case's peak refuses it, in replay and shrink alike."""
    tiny = {"HARNESS_MAX_CASE_BYTES": "1"}
    return [
        Attack("option-used:replay:--max-case-bytes-above-default", [*_REPLAY, "--max-case-bytes", str(1 << 40)],
               env=tiny, expect="ran", setup=write("case.json", CASE)),
        Attack("option-used:replay:--max-case-bytes-below-peak", [*_REPLAY, "--max-case-bytes", "1000"],
               setup=write("case.json", CASE)),
        Attack("option-used:shrink:--max-case-bytes-below-peak",
               ["shrink", "{tmp}/case.json", "--subject", "chainer.embed_id", "--kind", "error", "--max-runs", "2",
                "--max-case-bytes", "1000"], setup=write("case.json", CASE)),
        Attack("option-used:report:--max-case-bytes-above-default",
               ["report", "--subjects", "chainer.embed_id", "--out", "{tmp}/run", "--max-case-bytes", str(1 << 40),
                "--corpus", "{tmp}/c.jsonl", *_without(SMALL, "--examples")], env=tiny,
               expect="ran", setup=write("c.jsonl", CASE + "\n")),
    ]


def _stored_run(meta: dict[str, Any]) -> Callable[[Path], None]:
    """A run directory as an interrupted report leaves it before its first task: its corpus and campaign.json."""
    def setup(tmp: Path) -> None:
        run = tmp / "run"
        run.mkdir()
        (run / "corpus.jsonl").write_text(CASE + "\n")
        (run / "campaign.json").write_text(json.dumps({
            "subjects": ["chainer.embed_id"], "devices": ["cpu"], "contexts": ["default"], "relations": [],
            "repeats": 1, "fresh": 0, "timeout": None, "plugins": [], "profile": "ci", **meta}))
    return setup


def _resume_option() -> list[Attack]:
    resume = ["report", "--resume", "{tmp}/run", "--quiet", "--no-shrink", "--no-localize"]
    return [
        Attack("resume-option:--max-case-bytes-other", [*resume, "--max-case-bytes", "123456789"],
               setup=_stored_run({"max_case_bytes": 987654321})),
        Attack("resume-option:--max-case-bytes-unset-before", [*resume, "--max-case-bytes", "123456789"],
               setup=_stored_run({})),
        Attack("resume-option:--timeout-other", [*resume, "--timeout", "77"], setup=_stored_run({})),
    ]


def _value_shape() -> list[Attack]:
    out = [Attack(f"value-shape:--shard={v}", ["report", "--out", "{tmp}/run", "--shard", v, *SMALL])
           for v in ("1 / 2", " 1/2", "1/2 ", "+1/2", "1_0/20", "1/2/3", "1//2")]
    out.append(Attack("value-shape:cases-coverage-profile-and-corpus",
                      ["cases", "--coverage", "--profile", "dev", "--corpus", "{tmp}/c.jsonl"],
                      setup=write("c.jsonl", CASE + "\n")))
    return out


def _digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _output_over_read() -> list[Attack]:
    """An output named as a file the verb reads without an option naming it: the plug-in module it loads, the
    shipped contracts file it judges by (each through a symbolic link too). Refused; the file unchanged."""
    shipped = ROOT / "contracts.toml"
    before = _digest_of(shipped)

    def shipped_lost(tmp: Path) -> str:
        return "" if _digest_of(shipped) == before else "the shipped contracts.toml was overwritten"

    plugin = (ROOT / "suites" / "plugins" / "stalls.py").read_text()

    def plugin_setup(tmp: Path) -> None:
        (tmp / "myplug.py").write_text(plugin)
        (tmp / "case.json").write_text(CASE)
        (tmp / "link.py").symlink_to(tmp / "myplug.py")

    def plugin_lost(tmp: Path) -> str:
        return "" if (tmp / "myplug.py").read_text() == plugin else "the plug-in module was overwritten"

    def link_shipped(tmp: Path) -> None:
        (tmp / "c.toml").symlink_to(shipped)

    out = [Attack("output-over-read:gate-junit:shipped-contracts", ["gate", "--devices", "cpu", "--junit",
                                                                    str(shipped)], lost=shipped_lost),
           Attack("output-over-read:gate-junit:shipped-contracts-link", ["gate", "--devices", "cpu", "--junit",
                                                                         "{tmp}/c.toml"], setup=link_shipped,
                  lost=shipped_lost)]
    for target in ("myplug.py", "link.py"):
        out.append(Attack(f"output-over-read:gate-junit:plugin-{target}",
                          ["gate", "--devices", "cpu", "--junit", "{tmp}/" + target, "--subject-plugin",
                           "myplug:SUBJECTS"], setup=plugin_setup, lost=plugin_lost))
        out.append(Attack(f"output-over-read:shrink-out:plugin-{target}",
                          ["shrink", "{tmp}/case.json", "--subject", "stalls.spins", "--kind", "error", "--out",
                           "{tmp}/" + target, "--subject-plugin", "myplug:SUBJECTS"], setup=plugin_setup,
                          lost=plugin_lost))
    return out


def rule_attacks() -> list[Attack]:
    """Every attack of :data:`GROUPS`."""
    return [*_contracts_never(), *_env_var(), *_option_used(), *_resume_option(), *_value_shape(),
            *_output_over_read()]
