"""Hypothesis settings profiles: ``ci``, ``dev`` and ``audit``.

``register_profiles()`` registers them (idempotent); ``load_profile()`` loads one by name, else
from the ``HARNESS_PROFILE`` environment variable, else ``ci`` where ``CI`` is set and ``dev``
otherwise. Under pytest, Hypothesis's own ``--hypothesis-profile=NAME`` option also works once
the profiles are registered (e.g. from a conftest). The example database lives at
``<project>/.hypothesis/examples`` unless ``HARNESS_HYPOTHESIS_DB`` names another directory;
``ci`` is derandomized and so uses no database.

The sizes of the cases each profile draws are in :data:`harness.generate.strategies.SIZE_BOUNDS`.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from harness.core.errors import InvalidArgument

__all__ = ["PROFILE_ENV", "DB_ENV", "PROFILES", "register_profiles", "load_profile", "default_profile",
           "database_path", "example_database"]

PROFILE_ENV = "HARNESS_PROFILE"
DB_ENV = "HARNESS_HYPOTHESIS_DB"
PROFILES = ("ci", "dev", "audit")
PROJECT_ROOT = Path(__file__).resolve().parents[2]

_QUIET_HEALTH = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


def database_path() -> Path:
    """Where the example database lives: ``$HARNESS_HYPOTHESIS_DB`` or ``<project>/.hypothesis/examples``."""
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else PROJECT_ROOT / ".hypothesis" / "examples"


def example_database() -> DirectoryBasedExampleDatabase:
    """The project's example database (the directory is created on the first save)."""
    return DirectoryBasedExampleDatabase(str(database_path()))


def register_profiles() -> None:
    """Register ``ci``, ``dev`` and ``audit`` with Hypothesis (safe to call more than once)."""
    db = example_database()
    settings.register_profile(
        "ci", max_examples=12, derandomize=True, database=None, deadline=None, print_blob=True,
        suppress_health_check=_QUIET_HEALTH)
    settings.register_profile(
        "dev", max_examples=50, deadline=None, database=db, print_blob=True,
        suppress_health_check=_QUIET_HEALTH)
    settings.register_profile(
        "audit", max_examples=500, deadline=None, database=db, print_blob=True,
        suppress_health_check=_QUIET_HEALTH)


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
    register_profiles()
    settings.load_profile(chosen)
    return chosen
