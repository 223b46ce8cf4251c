"""The issue text that goes upstream with an exported reproducer, in the library's own template.

:func:`issue_text` renders one :class:`IssueFacts` as the body of a GitHub issue for Chainer (the sections of
chainer/chainer's ``.github/ISSUE_TEMPLATE.md``: conditions with ``chainer.print_runtime_info()``'s fields, code to
reproduce, error messages and stack traces) or ESPnet (``.github/ISSUE_TEMPLATE/bug_report.md``: describe the
bug, basic environments, environments, task information, to reproduce, error logs), beginning with a description
and the expected and actual behaviour and ending with the harness's diagnosis (a known defect's reason and
reference). A behaviour note (``note``: an allowed divergence or an expected error) is titled as a note, quotes the
contract's reason, and has none of the bug template's expected-against-actual framing. The data file is named,
never inlined; the whole text is at most :data:`MAX_CHARS` characters (GitHub refuses a longer body): the middle
of the script's output is cut where needed, and the text says so.

:func:`runtime_fields` asks a child interpreter (``python -I``, :mod:`harness.upstream.runtime_probe`) for the
environment fields: Chainer is never imported in the harness's own process.

Pure text otherwise: nothing here runs a subject.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core import lifeline
from harness.core.compat import PATCHES
from harness.core.errors import SetupError
from harness.judge.findings import library_frame

__all__ = ["IssueFacts", "issue_text", "issue_title", "runtime_fields", "recipe_facts", "MAX_CHARS", "LIBRARIES",
           "PROBE", "CHAINER_INSTALL", "ESPNET_INSTALL", "ESPNET_MODULE"]

#: GitHub refuses an issue body longer than this.
MAX_CHARS = 65_536
LIBRARIES = ("chainer", "espnet")
#: The child program that prints the runtime fields.
PROBE = Path(__file__).with_name("runtime_probe.py")
#: How Chainer 7.8.1 installs from a clean pip cache (its sdist's setup.py needs pkg_resources, which
#: setuptools >= 70 no longer provides to an isolated build).
CHAINER_INSTALL = ("pip install 'setuptools<70' numpy", "pip install --no-build-isolation chainer==7.8.1")
#: ESPnet without its dependencies: the module under test is ESPnet1's chainer backend, which needs no torch.
ESPNET_INSTALL = ("pip install --no-deps espnet==202511",)
ESPNET_MODULE = "espnet.nets.chainer_backend.deterministic_embed_id"
_TIMEOUT = 120.0


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), str(v)) for k, v in items)


@dataclass(frozen=True)
class IssueFacts:
    """Everything an issue text says. ``environment`` and ``conditions`` may be given as mappings (kept as
    (name, value) pairs, in order)."""

    library: str                 # "chainer" | "espnet": whose tracker and template
    title: str                   # in the library's words: "EmbedID backward fails on an empty batch"
    description: str             # what the call is and what goes wrong, in a few sentences
    expected: str                # what the call should do (a defect); unused in a note
    actual: str                  # what it does here
    script_name: str             # "reproduce-embedid-empty-batch.py"
    script_text: str             # the script itself (<= 60 lines of code)
    output: str                  # the script's output here, in full (a traceback with its file:line)
    exit_code: int               # the script's exit code here (1: the claim observed)
    diagnosis: str               # the harness's: a known defect's reason, or the contract's reason for a note
    reference: str = ""          # where in the library's code (a known defect's reference)
    data_name: str = ""          # the data file beside the script (named, never inlined); "" where none
    #: :func:`runtime_fields` (print_runtime_info's fields, CPU model, OpenBLAS core type and threads, ESPnet)
    environment: tuple[tuple[str, str], ...] = ()
    #: What the claim holds under: device, dtype, BLAS kernels and threads, the variables the script sets.
    conditions: tuple[tuple[str, str], ...] = ()
    #: The Chainer compatibility patches the script applies before ``import chainer`` (names of
    #: :data:`harness.core.compat.PATCHES`); empty where Chainer imports as shipped.
    patches: tuple[str, ...] = ()
    recipe: str = ""             # ESPnet: the recipe the case comes from (its ``recipe:`` tag), "" where none
    recipe_source: str = ""      # ... and where its numbers come from
    note: bool = False           # a behaviour note (allowed divergence, expected error), not a defect
    command: str = ""            # how to run the script (default ``python -I <script_name>``)

    def __post_init__(self) -> None:
        if self.library not in LIBRARIES:
            raise ValueError(f"library={self.library!r} must be one of {', '.join(LIBRARIES)}")
        object.__setattr__(self, "environment", _pairs(self.environment))
        object.__setattr__(self, "conditions", _pairs(self.conditions))
        object.__setattr__(self, "patches", tuple(self.patches))

    @property
    def run(self) -> str:
        return self.command or f"python -I {self.script_name}"

    def env(self, name: str, default: str = "not reported") -> str:
        return dict(self.environment).get(name, default)


def issue_title(facts: IssueFacts) -> str:
    """The issue's title: the library's words, a note said to be one."""
    return f"Behaviour note: {facts.title}" if facts.note else facts.title


def issue_text(facts: IssueFacts) -> str:
    """The issue's body (title as its first line, ``# ...``) in the library's template, at most
    :data:`MAX_CHARS` characters: the middle of the output is cut where it must be, and the text says where."""
    text = _render(facts, facts.output)
    if len(text) <= MAX_CHARS:
        return text
    out = facts.output
    over = len(text) - MAX_CHARS
    marker = ("\n[... {n:,} characters of the output cut here: GitHub refuses an issue body over "
              f"{MAX_CHARS:,} characters; run the script for all of it ...]\n")
    cut = over + len(marker.format(n=len(out))) + 16
    if cut >= len(out):
        raise ValueError(f"the issue text is {len(text):,} characters without its output: over {MAX_CHARS:,}")
    head = (len(out) - cut) // 2
    short = out[:head] + marker.format(n=cut) + out[len(out) - (len(out) - cut - head):]
    text = _render(facts, short)
    assert len(text) <= MAX_CHARS, len(text)
    return text


# ---- sections ---------------------------------------------------------------------------------------------


def _fence(body: str, lang: str = "") -> str:
    """A fenced block longer than any run of backticks inside ``body``."""
    run, longest = 0, 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body.rstrip()}\n{ticks}"


def _bullets(pairs: tuple[tuple[str, str], ...], indent: str = "") -> list[str]:
    return [f"{indent}- {k}: {v}" for k, v in pairs]


def _versions(facts: IssueFacts) -> str:
    return f"chainer=={facts.env('Chainer', '7.8.1').split()[0]}"


def _install(facts: IssueFacts) -> list[str]:
    numpy = facts.env("NumPy", "")
    steps = [CHAINER_INSTALL[0].replace(" numpy", f" numpy=={numpy}" if numpy else " numpy"),
             CHAINER_INSTALL[1].replace("chainer==7.8.1", _versions(facts))]
    if facts.library == "espnet":
        steps += [ESPNET_INSTALL[0].replace("202511", facts.env("ESPnet", "202511"))]
    lines = ["How the libraries were installed (a fresh virtual environment):", "", _fence("\n".join(steps), "sh"),
             "", "Chainer 7.8.1's sdist needs `pkg_resources` at build time: `setuptools<70` and "
             "`--no-build-isolation` let it build from a clean pip cache."]
    if facts.library == "espnet":
        lines += ["", "ESPnet is installed with `--no-deps` and without torch: the code under test is "
                      f"`{ESPNET_MODULE}`, ESPnet1's chainer backend, which imports only Chainer and NumPy."]
    if facts.patches:
        known = {p.name: p for p in PATCHES}
        what = "; ".join(f"`{n}` ({known[n].reason.split(';')[0]}; needed by `{known[n].needed_by}`)"
                         if n in known else f"`{n}`" for n in facts.patches)
        lines += ["", f"Chainer 7.8.1 does not import as shipped on NumPy {facts.env('NumPy', '2')}: the script "
                     f"patches, in one labelled block before `import chainer`, {what}. Nothing in site-packages "
                     "is edited, and nothing the call computes is changed."]
    return lines


def _conditions(facts: IssueFacts) -> list[str]:
    if not facts.conditions:
        return []
    return ["The claim holds under:", *_bullets(facts.conditions)]


def _code(facts: IssueFacts) -> list[str]:
    lines = [f"`{facts.script_name}`:", "", _fence(facts.script_text, "python"), ""]
    if facts.data_name:
        lines.append(f"It reads its inputs from `{facts.data_name}` (attached beside the script; the script names "
                     "it): they cannot be drawn from a seed.")
    lines.append(f"Run: `{facts.run}`. Exit 1: the {'behaviour' if facts.note else 'defect'} is observed; 0: the "
                 "same call ran and it is not; 2: something prevented a judgement (a missing import, a context that "
                 "cannot be set up here, another exception than the one claimed).")
    return lines


def _output(facts: IssueFacts, output: str) -> list[str]:
    frame = library_frame(output)
    lines = [f"The script's output here (exit code {facts.exit_code}):", "", _fence(output or "(no output)")]
    if frame:
        lines += ["", f"Raised at `{frame}`."]
    return lines


def _diagnosis(facts: IssueFacts) -> list[str]:
    if facts.note:
        lines = ["Why this is reported as a behaviour, not a defect: the determinism contract the harness checks "
                 "allows it --", "", *[f"> {ln}" for ln in facts.diagnosis.splitlines()]]
    else:
        lines = [f"The harness's diagnosis: {facts.diagnosis}"]
    if facts.reference:
        lines += ["", f"Where: {facts.reference}"]
    return lines


def _chainer(facts: IssueFacts, output: str) -> list[str]:
    head = ["## Description", "", facts.description, ""]
    if facts.note:
        head += ["## What happens", "", facts.actual, ""]
    else:
        head += ["## Expected behavior", "", facts.expected, "", "## Actual behavior", "", facts.actual, ""]
    runtime = [(k, v) for k, v in facts.environment if k != "ESPnet"]  # (ESPnet says nothing to Chainer)
    return [
        *head,
        "## Conditions", "", "`chainer.print_runtime_info()` and the CPU's BLAS:", "", *_bullets(tuple(runtime)), "",
        *_conditions(facts), *([""] if facts.conditions else []), *_install(facts), "",
        "## Code to reproduce", "", *_code(facts), "",
        "## Error messages, stack traces, or logs" if not facts.note else "## Output", "", *_output(facts, output), "",
        "## Diagnosis" if not facts.note else "## Why it is not a defect", "", *_diagnosis(facts),
    ]


def _task(facts: IssueFacts) -> str:
    part = facts.recipe.split(".")
    return part[1].upper() if len(part) > 1 and part[0].startswith("espnet") else "not tied to one task"


def _espnet(facts: IssueFacts, output: str) -> list[str]:
    describe = ["**Describe the bug**" if not facts.note else "**Describe the behaviour**", "", facts.description, ""]
    if not facts.note:
        describe += [f"Expected: {facts.expected}", "", f"Actual: {facts.actual}", ""]
    else:
        describe += [f"What happens: {facts.actual}", ""]
    basic = [("OS information", facts.env("Platform")), ("python version", f"`{facts.env('Python')}`"),
             ("espnet version", f"`espnet {facts.env('ESPnet', 'not installed')}`"),
             ("Git hash", "none: installed from PyPI"),
             ("pytorch version", "not installed (the module under test does not import torch)")]
    recipe = (f"{facts.recipe}" + (f" ({facts.recipe_source})" if facts.recipe_source else "")) if facts.recipe \
        else "none: a case drawn by the harness, not from a recipe"
    return [
        *describe,
        "**Basic environments:**", *_bullets(tuple(basic), " "), "",
        "**Environments from `torch.utils.collect_env`:**", "",
        "Not collected: torch is not installed. `chainer.print_runtime_info()` and the CPU's BLAS instead:", "",
        *_bullets(facts.environment), "", *_conditions(facts), *([""] if facts.conditions else []),
        *_install(facts), "",
        "**Task information:**", f" - Task: {_task(facts)}", f" - Recipe: {recipe}",
        f" - ESPnet1 or ESPnet2: ESPnet1 (`{ESPNET_MODULE}`, the chainer backend)", "",
        "**To Reproduce**", "", *_code(facts), "",
        "**Error logs**" if not facts.note else "**Output**", "", *_output(facts, output), "",
        "**Diagnosis**" if not facts.note else "**Why it is not a bug**", "", *_diagnosis(facts),
    ]


def _render(facts: IssueFacts, output: str) -> str:
    body = _chainer(facts, output) if facts.library == "chainer" else _espnet(facts, output)
    return "\n".join([f"# {issue_title(facts)}", "", *body]).rstrip() + "\n"


def recipe_facts(tags: Iterable[str]) -> tuple[str, str]:
    """The recipe a case comes from (its ``recipe:<name>`` tag) and where its numbers come from, for
    :attr:`IssueFacts.recipe` and :attr:`IssueFacts.recipe_source`; ``("", "")`` where no tag names one."""
    from harness.generate.recipes import RECIPES

    name = next((t.split(":", 1)[1] for t in tags if t.startswith("recipe:")), "")
    return name, next((r.source for r in RECIPES if r.name == name), "") if name else ""


# ---- the runtime fields, from a child interpreter ------------------------------------------------------


def runtime_fields(python: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment fields of the interpreter ``python`` under ``env`` (the whole environment of the child):
    what ``chainer.print_runtime_info()`` prints (Platform, Chainer, ChainerX, NumPy, CuPy, iDeep), Python, the
    CPU model, the BLAS, ``OPENBLAS_CORETYPE``, OpenBLAS's core type, the BLAS threads, and ESPnet's version
    where installed; asked of a child ``python -I`` (:data:`PROBE`). A child that fails raises
    :class:`SetupError` with its last line."""
    res = lifeline.run_guarded([python, "-I", str(PROBE)], _TIMEOUT, env=dict(env))
    last = (res.stderr.strip().splitlines() or ["no output"])[-1]
    if res.code != 0:
        raise SetupError(f"python={python!r} cannot report its runtime fields (exit {res.code}): {last}")
    try:
        data = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise SetupError(f"python={python!r} printed no runtime fields: {last}") from exc
    return {str(k): str(v) for k, v in data.items()}
