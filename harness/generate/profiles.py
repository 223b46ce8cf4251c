"""Hypothesis settings profiles: ``ci``, ``dev``, ``audit`` and ``realistic``.

``register_profiles()`` registers them (idempotent); ``load_profile()`` loads one by name, else
from the ``HARNESS_PROFILE`` environment variable, else ``ci`` where ``CI`` is set and ``dev``
otherwise. Under pytest, Hypothesis's own ``--hypothesis-profile=NAME`` option also works once
the profiles are registered (e.g. from a conftest). The example database lives at
``<project>/.hypothesis/examples`` unless ``HARNESS_HYPOTHESIS_DB`` names another directory;
``ci`` is derandomized and so uses no database, and does not shrink a failing example (it reports the first
one found, the same every run): a failing gate then costs no more than a passing one.

The sizes of the cases each profile draws are in :data:`harness.generate.profile_sizes.SIZE_BOUNDS`; the
``realistic`` profile draws around the named configurations of :data:`harness.generate.recipes.RECIPES` instead
(its bounds there are their envelope).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import InvalidArgument

if TYPE_CHECKING:
    from hypothesis.database import DirectoryBasedExampleDatabase

# Hypothesis is imported where a profile is registered or loaded, not here: the command line reads the profiles'
# names for its --profile choices, and every `python -m harness` (a localization child among them) would
# otherwise import Hypothesis (a tenth of a second) for nothing.

__all__ = ["PROFILE_ENV", "DB_ENV", "Profile", "PROFILES", "register_profiles", "load_profile", "default_profile",
           "database_path", "example_database"]

PROFILE_ENV = "HARNESS_PROFILE"
DB_ENV = "HARNESS_HYPOTHESIS_DB"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Profile:
    """How hard the property tests look: examples per test, derandomized or not, whether examples are kept.
    The sizes of the cases a profile draws are :data:`harness.generate.profile_sizes.SIZE_BOUNDS`[name]."""

    name: str
    max_examples: int
    derandomize: bool
    keep_examples: bool
    purpose: str
    #: Whether a failing example is shrunk in process. Shrinking reruns the subjects, R times per step, for up
    #: to the minutes Hypothesis allows itself; the ci gate reports the first failing example instead (the same
    #: one every run: derandomized), so a failing gate costs no more than a passing one. ``dev`` shrinks.
    shrink: bool = True


#: The one definition of each profile (the command line's choices, the strategies' bounds and Hypothesis's
#: registered profiles all take their names from here).
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("ci", 12, True, False, "the CI gate: few examples, derandomized, no database, failures not shrunk",
            shrink=False),
    Profile("dev", 50, False, True, "local work: more examples, failures kept in the example database"),
    Profile("audit", 500, False, True, "driver audits: many examples at large sizes, where GPU atomics race"),
    # Each example is a real model's shapes (seconds a run on a CPU): few, derandomized, not shrunk (a shrink
    # reruns them for minutes); the cases come from harness.generate.recipes.
    Profile("realistic", 4, True, False, "real model shapes from published recipes (harness.generate.recipes): "
            "few examples, each seconds a run", shrink=False),
)}

def database_path() -> Path:
    """Where the example database lives: ``$HARNESS_HYPOTHESIS_DB`` or ``<project>/.hypothesis/examples``."""
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else PROJECT_ROOT / ".hypothesis" / "examples"


def example_database() -> DirectoryBasedExampleDatabase:
    """The project's example database (the directory is created on the first save)."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(str(database_path()))


def register_profiles() -> None:
    """Register every profile of :data:`PROFILES` with Hypothesis (safe to call more than once)."""
    from hypothesis import HealthCheck, Phase, settings

    quiet_health = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)
    # every phase but shrinking (and explaining, which needs it)
    no_shrink = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
    db = example_database()
    for p in PROFILES.values():
        # No deadline in any profile: a verdict must not depend on how busy the machine is.
        settings.register_profile(
            p.name, max_examples=p.max_examples, derandomize=p.derandomize, database=db if p.keep_examples else None,
            deadline=None, print_blob=True, suppress_health_check=quiet_health,
            phases=tuple(Phase) if p.shrink else no_shrink)


def default_profile() -> str:
    """``$HARNESS_PROFILE`` if set, else ``ci`` where ``$CI`` is set, else ``dev``."""
    name = os.environ.get(PROFILE_ENV)
    if name:
        return name
    return "ci" if os.environ.get("CI") else "dev"


def load_profile(name: str | None = None) -> str:
    """Register the profiles and load ``name`` (default: :func:`default_profile`); returns the name."""
    chosen = default_profile() if name is None else name
    if chosen not in PROFILES:
        source = f"${PROFILE_ENV}" if name is None and os.environ.get(PROFILE_ENV) else "profile"
        raise InvalidArgument(f"{source}={chosen!r} is not one of {', '.join(PROFILES)}")
    from hypothesis import settings

    register_profiles()
    settings.load_profile(chosen)
    return chosen
