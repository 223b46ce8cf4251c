"""A test module's plug-in subjects, registered for the module's tests and removed after them."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from harness.subjects.registry import SUBJECTS, load_plugin


def registered(spec: str, name: str) -> Any:
    """A module-scoped, autouse fixture named ``name`` that loads the plug-in ``spec`` (``MOD:OBJ``), yields its
    subjects and unregisters them at the module's end."""
    @pytest.fixture(scope="module", autouse=True, name=name)
    def fixture() -> Iterator[list[Any]]:
        subjects = load_plugin(spec)
        yield subjects
        for s in subjects:
            SUBJECTS.pop(s.name, None)

    return fixture
