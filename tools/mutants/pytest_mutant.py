"""pytest plug-in (``-p tools.mutants.pytest_mutant``): registers the mutant named by ``$HARNESS_MUTANT``
(``tools.mutants.plugin:NAME``) before the gate suites collect, so they test it in place of the real subject."""

from __future__ import annotations

import os


def pytest_configure(config):  # noqa: ANN001 - pytest hook
    spec = os.environ.get("HARNESS_MUTANT")
    if spec:
        from harness.subjects.registry import load_plugin

        load_plugin(spec)
