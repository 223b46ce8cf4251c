"""``harness bisect``: which package, and which release of it, changes a case's bits (the engine is
:mod:`harness.upstream.bisect`).

The verb reads and checks the case and the subject (registered, of the case's family) before anything else,
then hands the question to the engine. Exit codes: 0 the two ends agree, 1 a package named, 2 bad input, an end
that cannot be probed, or an error at both ends; 130 interrupted (the probes that finished stay in the log,
and the same command goes on from them).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import like, opt, parse_text
from harness.upstream.bisect import Bisection, Writer, check_ends, parse_pins, pins_from_environment
from harness.upstream.bisect import bisect as run_bisection
from harness.upstream.bisect_conditions import parse_env, pinned_once
from harness.verbs.common import load_plugins, reproducer_option
from harness.verbs.report import ReportOptions

__all__ = ["BisectOptions", "BisectCommandOptions", "bisect", "bisect_command"]


@dataclass(frozen=True)
class BisectOptions(Bisection):
    """One bisection: the engine's question (:class:`harness.upstream.bisect.Bisection`: the case and subject,
    the two ends as pins, where environments come from, the conditions the user pins) and how much it says."""

    quiet: bool = False


def _pins(name: str, text: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_pins([text], name).items())


def _env_pins(name: str, text: str) -> tuple[tuple[str, str], ...]:
    return parse_env([text])


def _parsing(parse: Callable[[str, str], Any]) -> argcheck.Parsing:
    """Each value of a repeatable option parsed once into (NAME, VALUE) pins: the field holds them all."""
    return argcheck.Parsing(lambda name: argcheck.converter(name, parse))


def _exists(name: str, text: str) -> None:
    if not os.path.exists(text):
        raise InvalidArgument(f"{name}={text!r} does not exist")


def _a_dir(name: str, text: str) -> None:
    if not os.path.isdir(text):
        raise InvalidArgument(f"{name}={text!r} is not a directory")


def _end(end: str) -> Any:
    return opt(f"--{end}", f"a pin of the {end} end, NAME==VERSION (repeatable, or several separated by spaces or "
               "commas)", default=(), check=_parsing(_pins), metavar="NAME==VERSION", many=True)


def _end_env(end: str) -> Any:
    return opt(f"--{end}-env", f"the {end} end's fingerprint: a run or baseline directory, an environment.json or "
               "an audit file (its package versions)", default=None, check=argcheck.kept(_exists), metavar="PATH",
               role="input")


@dataclass(frozen=True)
class BisectCommandOptions:
    """``harness bisect`` as the command line gives it: each end as pins and a fingerprint, the conditions as
    (NAME, VALUE) pins (each name once); :meth:`question` is the :class:`BisectOptions` they ask. A Python caller
    may give the pins as the command line's text (``good=("numpy==2.2.6",)``)."""

    case: str = reproducer_option("case", "bisect")
    case_id: str = reproducer_option("--case-id", "bisect", default="")
    subject: str = reproducer_option("--subject", "bisect", default="")
    context: str = reproducer_option("--context", "bisect", default="default")
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "bisect", default=())
    good: tuple[tuple[str, str], ...] = _end("good")  # (name, version): the pins given
    good_env: str | None = _end_env("good")
    bad: tuple[tuple[str, str], ...] = _end("bad")
    bad_env: str | None = _end_env("bad")
    env: tuple[tuple[str, str], ...] = opt(
        "--env", "pin a variable in every probe beside the machine's own conditions, NAME=VALUE (repeatable; e.g. "
        "OPENBLAS_CORETYPE=SkylakeX)", default=(), check=_parsing(_env_pins), metavar="NAME=VALUE", many=True)
    cache: str = opt("--cache", "bisect's own directory: its logs (one per question, read back by a rerun) and its "
                     "throwaway environments (default $XDG_CACHE_HOME/harness/bisect)", default="", metavar="DIR")
    find_links: tuple[str, ...] = opt("--find-links", "a directory of wheels or sdists to install from (repeatable); "
                                      "their versions are bisected too", default=(), check=argcheck.kept(_a_dir),
                                      metavar="DIR", many=True)
    no_index: bool = opt("--no-index", "install only from --find-links (offline)", default=False, switch=True)
    installer: str = opt("--installer", "uv (refused where it is not installed), pip (python -m venv + pip), or "
                         "auto: uv where installed, else pip (default {default})", default="auto",
                         choices=("auto", "uv", "pip"))
    timeout: float = opt("--timeout", "wall seconds one probe's script may take in its environment before it is "
                         "killed (installing is bounded apart), > 0 (default {default})", default=Bisection.timeout,
                         check=argcheck.duration())
    quiet: bool = like(ReportOptions, "quiet", default=False)

    def __post_init__(self) -> None:
        parse_text(self)
        object.__setattr__(self, "env", pinned_once(self.env))  # frozen: set once, while the record is made

    def question(self) -> BisectOptions:
        """The bisection asked: each end's pins over its fingerprint's (only the packages both fingerprints
        name), refused in one line where an end has none."""
        found = {e: pins_from_environment(path) if path else {}
                 for e, path in (("good", self.good_env), ("bad", self.bad_env))}
        shared = set(found["good"]) & set(found["bad"])  # a fingerprint may list a package the other lacks
        ends = {e: {**{n: found[e][n] for n in shared}, **dict(getattr(self, e))} for e in found}
        for end, pins in ends.items():
            if not pins:
                raise InvalidArgument(f"{end}: no pins (give --{end} NAME==VERSION or --{end}-env PATH)")
        return BisectOptions(case=self.case, subject=self.subject, good=ends["good"], bad=ends["bad"],
                             case_id=self.case_id, context=self.context, plugins=self.plugins, cache=self.cache,
                             find_links=self.find_links, no_index=self.no_index, installer=self.installer,
                             timeout=self.timeout, env=self.env, quiet=self.quiet)


def bisect_command(opts: BisectCommandOptions) -> int:
    """:func:`bisect` of the question the command line asks."""
    return bisect(opts.question())


def bisect(opts: BisectOptions, say: Callable[[str], None] | None = None, write_script: Writer | None = None) -> int:
    """Check the case and subject, then bisect (:func:`harness.upstream.bisect.bisect`); the exit code.
    ``write_script``: what writes the probe's script (the exported reproducer's writer where None)."""
    from harness.subjects.registry import get_subject, load_case_for_subject

    check_ends(opts.good, opts.bad)
    load_plugins(opts.plugins)
    load_case_for_subject(opts.case, opts.case_id or None, get_subject(opts.subject), None)
    out = say or (lambda s: None if opts.quiet else print(f"bisect: {s}", file=sys.stderr, flush=True))
    try:
        return run_bisection(opts, out, write_script)
    except KeyboardInterrupt:
        print("harness: interrupted; the probes that finished are in bisect's log: the same command goes on from "
              "them", file=sys.stderr)
        return 130
