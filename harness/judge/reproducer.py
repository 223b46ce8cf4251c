"""The record of what reproduces a finding, and the one place its commands are rendered.

A :class:`Reproducer` names the case, the subject, the device or devices, the context or contexts, the
relation, the baseline, the plug-ins, the contracts file and the environment a finding needs. Every printed
command of the harness (``replay``, ``shrink``, ``localize``, ``export``) is rendered from one
(:meth:`Reproducer.argv`, :meth:`Reproducer.command`), and the command line declares the same options from
:data:`OPTIONS` and builds one back from the parsed values (:meth:`Reproducer.from_options`):
``from_options(parse(r.argv(verb))) == r.for_verb(verb)``.

Each option's value check is one of :mod:`harness.core.argcheck`'s (by the option's name, it gives the ``type=``);
:meth:`Option.flag_for` is the option as a verb's parser and options records take it (:mod:`harness.core.options`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.core import argcheck, rundir
from harness.core.errors import InvalidArgument
from harness.core.options import Flag

__all__ = ["Reproducer", "VERBS", "Option", "OPTIONS", "OPTION", "harness_argv", "command", "split_command",
           "export_path", "env_for_reproducer", "Origin", "contracts_argument"]

#: The verbs a reproducer renders a command for.
VERBS = ("replay", "shrink", "localize", "export")

_ALL = VERBS
_RUNS = ("replay", "shrink", "export")  # the verbs that judge (they read a contracts file)
_FINDING = ("shrink", "export")  # the verbs that keep to one finding (its kind, tensor kind and error)


@dataclass(frozen=True)
class Option:
    """One option of the reproducer: how the command line spells it and which field of the record it fills."""

    flag: str                  # "--devices"; "case" for the positional case file
    field: str                 # the Reproducer field it fills
    help: str                  # ("{default}": the verb's default, which the command line fills in)
    check: Callable[[str], Any] | None = None  # the value check by the option's name (argcheck's): the type=
    verbs: tuple[str, ...] = _ALL
    metavar: str | None = None
    #: How the field is spelled: "value" (one text), "one" (the field's only name), "pair" (its two names,
    #: A,B), "many" (repeatable, each one value), "switch" (present or not), "count" (an integer).
    shape: str = "value"
    required: tuple[str, ...] = ()   # the verbs that need it
    #: A verb whose value check differs from ``check``: (verb, check) pairs.
    check_for: tuple[tuple[str, Callable[[str], Any]], ...] = ()
    role: str = ""             # "input": a file or directory the verb reads (harness.core.options.ROLES)

    @property
    def dest(self) -> str:
        """The name argparse gives the parsed value (``--case-id`` -> ``case_id``)."""
        return self.flag.lstrip("-").replace("-", "_")

    def check_of(self, verb: str) -> Callable[[str], Any] | None:
        """The value check ``verb`` applies to this option."""
        return dict(self.check_for).get(verb, self.check)

    def flag_for(self, verb: str) -> Flag:
        """This option as ``verb`` declares it (:mod:`harness.core.options`): its check and requirement there."""
        return Flag(self.flag, self.help, check=None if self.shape in ("many", "switch") else self.check_of(verb),
                    metavar=self.metavar, many=self.shape == "many", switch=self.shape == "switch",
                    required=verb in self.required, role=self.role)


_FILE = argcheck.kept(argcheck.readable_file)
_PAIR = argcheck.names(argcheck.device_name)
_COUNTS = {n: argcheck.count(n) for n in (0, 1, 2)}

#: Every option of the reproducer, in the order a command prints them.
OPTIONS: tuple[Option, ...] = (
    Option("case", "case", "a case JSON file, or a JSON-lines corpus (with --case-id)", _FILE,
           metavar="CASE.json", role="input"),
    Option("--case-id", "case_id", "the case to take from a corpus"),
    Option("--subject", "subject", "registered subject name", required=(*_ALL, "bisect")),
    Option("--subject-plugin", "plugins", "load and register subjects from package.module:object (repeatable)",
           metavar="MOD:OBJ", shape="many"),
    Option("--contracts", "contracts", "the contracts TOML the verdicts use (default: the shipped contracts.toml)",
           _FILE, verbs=_RUNS, metavar="FILE", role="input"),
    Option("--device", "devices", "cpu, gpu or gpu:N; must be usable here (default cpu)",
           argcheck.kept(argcheck.one_device), shape="one"),
    Option("--devices", "devices", "comma list of cpu, gpu, gpu:N or all: the devices a campaign runs (default "
           "all: cpu and every usable GPU; a GPU named must be usable); replay, shrink, localize and export take "
           "two, A,B: B compared with A (instead of --device)", _PAIR, metavar="DEVICES", shape="pair"),
    Option("--context", "contexts", "execution context name (default: default)",
           argcheck.kept(argcheck.one_context), shape="one"),
    Option("--contexts", "contexts", "comma list of execution context names: the contexts a campaign runs "
           "(default: the default set; audit: default); replay, shrink, localize and export take two, A,B: B "
           "compared with A (instead of --context)", argcheck.names(argcheck.one_context), metavar="CONTEXTS",
           shape="pair"),
    Option("--repeats", "repeats", "repetitions in one process, >= 1 (audit and localize: >= 2) (default "
           "{default})", _COUNTS[1], verbs=("replay", "localize"), shape="count",
           check_for=(("localize", _COUNTS[2]), ("audit", _COUNTS[2]))),
    Option("--fresh", "fresh", "runs in fresh worker processes, one each, >= 0 (default {default})", _COUNTS[0],
           verbs=("replay",), shape="count"),
    Option("--relation", "relation", "an invariance relation (alone, subbatch, order, padding, duplicate): run the "
           "case and its members under it and compare them",
           argcheck.kept(argcheck.one_relation), metavar="NAME"),
    Option("--baseline", "baseline", "a stored run directory (tasks.jsonl[.xz], corpus.jsonl, campaign.json): "
           "compare this run's digests with its tasks of the same case, subject, device and context (shrink "
           "refuses it: a baseline holds only its own cases)",
           argcheck.kept(rundir.baseline_dir), verbs=("replay", "shrink", "export"), metavar="DIR", role="input"),
    Option("--tensor", "tensor", "the tensor kind that must still show the finding (outputs, input gradients, "
           "parameter gradients)", verbs=_FINDING),
    Option("--error", "error", "for an error finding: the error that must still happen, 'Type in phase'",
           verbs=_FINDING),
    Option("--flaky", "flaky", "the subject diverges run to run: keep a step only where the finding shows in "
           "each of 3 tries of 6 runs (export: its claim is tried 20 times)", verbs=_FINDING, shape="switch"),
    Option("--kind", "kind", "the finding kind that must still reproduce (as findings.csv and the dossiers name "
           "it; export without it: the script checks what replay checks)", verbs=_FINDING, required=("shrink",)),
    Option("--note", "note", "write a behaviour note, not a defect report: the finding is an allowed divergence "
           "or an expected error, and the text quotes the contract's reason", verbs=("export",), shape="switch"),
)
#: The options by flag.
OPTION: dict[str, Option] = {o.flag: o for o in OPTIONS}

#: What the record holds where a command says nothing.
_DEFAULT_DEVICES = ("cpu",)
_DEFAULT_CONTEXTS = ("default",)


@dataclass(frozen=True)
class Reproducer:
    """What reproduces one finding. Two devices (or two contexts) mean "B compared with A"."""

    case: str                                   # a case JSON file, or a JSON-lines corpus with case_id
    subject: str
    case_id: str = ""
    devices: tuple[str, ...] = _DEFAULT_DEVICES  # one device, or (A, B)
    contexts: tuple[str, ...] = _DEFAULT_CONTEXTS  # one context, or (A, B)
    relation: str = ""                          # an invariance relation's name
    baseline: str = ""                          # a baseline run directory
    plugins: tuple[str, ...] = ()               # --subject-plugin MOD:OBJ, each
    contracts: str = ""                         # the contracts file (empty: the shipped one)
    #: Environment variables the reproducing process needs (NAME, value; value None: unset it).
    env: tuple[tuple[str, str | None], ...] = ()
    repeats: int | None = None                  # None: the verb's default
    fresh: int | None = None
    # What must still reproduce (shrink): the finding's kind, tensor kind, error ("Type in phase"), flakiness.
    kind: str = ""
    tensor: str = ""
    error: str = ""
    flaky: bool = False
    #: export: a behaviour note (an allowed divergence or an expected error, the contract's reason quoted), not
    #: a defect report
    note: bool = False

    # ---- the verbs' views ------------------------------------------------------------------------
    def for_verb(self, verb: str) -> "Reproducer":
        """The record as ``verb`` takes it: the fields no option of ``verb`` carries at their defaults.
        ``localize`` compares repeats only on one device and context without a relation (two devices, two
        contexts or a relation's members are one run each), so its repeats go elsewhere."""
        _check_verb(verb)
        taken = {o.field for o in OPTIONS if verb in o.verbs} | {"env"}
        blank: dict[str, Any] = {f.name: f.default for f in fields(self) if f.name not in taken}
        r = replace(self, **blank)
        if verb == "localize" and (len(r.devices) > 1 or len(r.contexts) > 1 or r.relation):
            r = replace(r, repeats=None)
        return r

    def argv(self, verb: str, extra: Sequence[str] = ()) -> list[str]:
        """``python -m harness VERB ...``: the command that runs ``verb`` on this record (``extra``: the verb's
        own options, as ``export``'s ``--out FILE``)."""
        r = self.for_verb(verb)
        out = [*harness_argv(), verb]
        for o in OPTIONS:
            if verb in o.verbs:
                out += _render(o, getattr(r, o.field))
        return out + list(extra)

    def command(self, verb: str, extra: Sequence[str] = ()) -> str:
        """:meth:`argv` as one shell line, ``env NAME=value -u NAME ...`` first where the record needs an
        environment."""
        return command(self.argv(verb, extra), self.env)

    @classmethod
    def from_options(cls, verb: str, values: Mapping[str, Any],
                     env: Sequence[tuple[str, str | None]] = ()) -> "Reproducer":
        """The record from the parsed values of ``verb``'s options (by :attr:`Option.dest`; an absent or None
        value is an option not given). Checks what needs two options: ``--device`` with ``--devices``,
        ``--context`` with ``--contexts``, a pair that is not two names, a relation with two devices or
        contexts, and localize's repeats (two at least)."""
        _check_verb(verb)
        given = {o.flag: values.get(o.dest) for o in OPTIONS if verb in o.verbs}
        kw: dict[str, Any] = {}
        for o in OPTIONS:
            v = given.get(o.flag)
            if v is None or o.shape == "pair":
                continue
            if o.shape == "one":
                kw[o.field] = (v,)
            elif o.shape == "many":
                kw[o.field] = tuple(v)
            elif o.shape == "switch":
                kw[o.field] = bool(v)
            else:
                kw[o.field] = v
        for one, pair, what in (("--device", "--devices", "devices"), ("--context", "--contexts", "contexts")):
            if given.get(pair) is None:
                continue
            # parsed by the option's check on the command line; a Python caller's text by the same check here
            names = argcheck.parsed_text(OPTION[pair].check, pair[2:], given[pair])
            text = ",".join(names)
            if given.get(one) is not None:
                raise InvalidArgument(f"{one[2:]}={given[one]!r} and {pair[2:]}={text!r}: give one of them")
            if len(names) != 2:
                raise InvalidArgument(f"{pair[2:]}={text!r} must name two {what}, A,B")
            kw[OPTION[pair].field] = tuple(names)
        r = cls(**kw, env=tuple(env))
        if r.relation and (len(r.devices) > 1 or len(r.contexts) > 1):
            raise InvalidArgument(f"relation={r.relation!r} compares related cases in one device and context: "
                                  f"leave out --devices/--contexts")
        if verb == "localize" and r.repeats is not None and r.repeats < 2:
            raise InvalidArgument(f"repeats={r.repeats} must be >= 2 for localize (two runs to compare)")
        return r

    # ---- as data -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["env"] = [list(e) for e in self.env]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reproducer":
        return cls(**{**d, "devices": tuple(d.get("devices", _DEFAULT_DEVICES)),
                      "contexts": tuple(d.get("contexts", _DEFAULT_CONTEXTS)),
                      "plugins": tuple(d.get("plugins", ())),
                      "env": tuple((str(k), v) for k, v in d.get("env", ()))})


def _check_verb(verb: str) -> None:
    if verb not in VERBS:
        raise InvalidArgument(f"verb={verb!r} renders no reproducer: one of {', '.join(VERBS)}")


def _render(o: Option, value: Any) -> list[str]:
    """One option of a command: nothing where the field says nothing to this spelling."""
    if o.flag == "case":
        return [value]
    if o.shape == "one":
        return _words(o.flag, value[0]) if len(value) == 1 else []
    if o.shape == "pair":
        return _words(o.flag, ",".join(value)) if len(value) == 2 else []
    if o.shape == "many":
        return [w for v in value for w in _words(o.flag, v)]
    if o.shape == "switch":
        return [o.flag] if value else []
    return [] if value is None or value == "" else _words(o.flag, str(value))


def _words(flag: str, text: str) -> list[str]:
    """``--flag value``; ``--flag=value`` where argparse would read the value as an option (a leading dash)."""
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


# ---- command lines -------------------------------------------------------------------------------------
def harness_argv() -> list[str]:
    """How to call the harness in a printed command: the interpreter running now, relative to the working
    directory where it lies below it (``.venv/bin/python``), else ``python``."""
    exe = sys.executable or "python"
    try:
        rel = os.path.relpath(exe)
    except ValueError:
        rel = exe
    python = rel if not rel.startswith("..") and os.path.isabs(exe) else "python"
    return [python, "-m", "harness"]


def command(argv: Sequence[str], env: Sequence[tuple[str, str | None]] = ()) -> str:
    """A shell command line: ``env NAME=value -u NAME ...`` first where the finding needs an environment."""
    prefix: list[str] = []
    if env:
        prefix = ["env"]
        for name, value in env:
            prefix += ["-u", name] if value is None else [f"{name}={value}"]
    return shlex.join([*prefix, *argv])


def export_path(name: str) -> str:
    """Where a printed ``export`` command writes its script: ``reproduce-<name>.py`` in the working directory
    (``name``: a finding's id, a case id, or a case file whose stem names it)."""
    return f"reproduce-{os.path.splitext(os.path.basename(name))[0]}.py"


def split_command(line: str) -> tuple[tuple[tuple[str, str | None], ...], list[str]]:
    """:func:`command` read back: the environment it sets (in order) and the argv after ``python -m harness``."""
    words = shlex.split(line)
    env: list[tuple[str, str | None]] = []
    if words and words[0] == "env":
        i = 1
        while i < len(words):
            if words[i] == "-u":
                env.append((words[i + 1], None))
                i += 2
            elif "=" in words[i] and not words[i].startswith("-"):
                name, _, value = words[i].partition("=")
                env.append((name, value))
                i += 1
            else:
                break
        words = words[i:]
    if words[1:3] != ["-m", "harness"]:
        raise InvalidArgument(f"command={line!r} does not run python -m harness")
    return tuple(env), words[3:]


_BLAS_VARS = {"openblas": "OPENBLAS_NUM_THREADS", "mkl": "MKL_NUM_THREADS", "blis": "BLIS_NUM_THREADS"}


def env_for_reproducer(diff: Iterable[tuple[str, Any, Any]]) -> tuple[tuple[str, str | None], ...]:
    """The environment a reproducer must set, from fingerprint fields that differ from a baseline's
    ``(field, baseline value, value now)``: ``env.NAME`` fields as they are now, and a BLAS thread count no
    variable explains as that BLAS's own variable."""
    out: dict[str, str | None] = {}
    blas: list[tuple[str, Any]] = []
    internal: dict[str, str] = {}
    for name, _old, new in diff:
        if name.startswith("env."):
            out[name[4:]] = None if new in (None, "", "(missing)") else str(new)
        elif re.fullmatch(r"blas\.\d+\.num_threads", name) and new not in (None, "(missing)"):
            blas.append((name.split(".")[1], new))
        elif re.fullmatch(r"blas\.\d+\.internal_api", name):
            internal[name.split(".")[1]] = str(new)
    for idx, threads in blas:
        var = _BLAS_VARS.get(internal.get(idx, "openblas"), "OMP_NUM_THREADS")
        if var not in out and "OMP_NUM_THREADS" not in out:
            out[var] = str(threads)
    return tuple(sorted(out.items()))


@dataclass(frozen=True)
class Origin:
    """Where a campaign's findings come from: what every reproducer needs besides the finding itself."""

    run_dir: str
    contracts: str = ""           # the contracts file given (empty: the shipped one)
    plugins: tuple[str, ...] = ()  # --subject-plugin MOD:OBJ, each
    baseline: str = ""            # the baseline directory of a gate
    #: Environment variables the run had that a reproducer must set (NAME, value; value None: unset it).
    env: tuple[tuple[str, str | None], ...] = ()

    def case_file(self, case_id: str) -> str:
        return os.path.join(self.run_dir, "cases", f"{case_id}.json")

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "contracts": self.contracts, "plugins": list(self.plugins),
                "baseline": self.baseline, "env": [list(e) for e in self.env]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Origin":
        return cls(str(d["run_dir"]), str(d.get("contracts", "")), tuple(d.get("plugins", ())),
                   str(d.get("baseline", "")), tuple((str(k), v) for k, v in d.get("env", ())))


def contracts_argument(path: str | os.PathLike[str] | None) -> str:
    """What a reproducer's ``--contracts`` must be to judge as the run did (:attr:`Origin.contracts`): the file
    the run used, or empty for the shipped one (which every verb reads when given none)."""
    from harness.judge.contracts import DEFAULT_CONTRACTS

    if not path:
        return ""
    return "" if os.path.realpath(path) == os.path.realpath(DEFAULT_CONTRACTS) else os.fspath(path)
