"""What one attack is and what every group of attacks builds on (``tools/attacks.py`` lists them all and runs
them): :class:`Attack` (the command line after ``python -m harness``, the outcome it must give, its set-up and its
check for lost files), the small valid arguments and case the attacks start from, the set-ups that write an
attack's files, and the environment each attacked harness runs in. The lowest of the ``tools/attacks*.py``
modules: it imports none of them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "suites.plugins.attacks"
SMALL = ["--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats", "1", "--examples", "1",
         "--relations", "none", "--no-shrink", "--no-localize", "--quiet"]
CASE = json.dumps({"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]}})


@dataclass
class Attack:
    name: str
    argv: list[str]                    # after ``python -m harness``; {tmp} is the attack's directory
    expect: str = "error"              # "error": refused (exit 2, one line); "finish": finishes (0 or 1); "either";
    #                                    "raised": every run raised the same way (exit 3); "ran": finishes and
    #                                    skipped no case as over a limit; "refused": export's claim does not
    #                                    reproduce (exit 1, one line, nothing written)
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    lost: Callable[[Path], str] | None = None   # after the run: what was lost ("" = nothing)
    stdout_closed: bool = False


def write(rel: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for f in setups:
            f(tmp)
    return setup


def harness_env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_PLUGIN_TIMEOUT": "10", "HARNESS_PROFILE": "ci", **extra}
