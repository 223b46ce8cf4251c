"""The ``bench`` verb's entry: the bench itself lives beside the harness in ``tools/bench/`` (one module per
section); this module only finds it, so ``python -m harness bench`` keeps working."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType

from harness.core.errors import SetupError

__all__ = ["cmd_bench", "load_bench"]

#: The checkout root: ``tools/`` sits next to ``harness/`` in a source checkout.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_bench() -> ModuleType:
    """``tools.bench``, from the checkout this harness was imported from.

    Raises:
        SetupError: where there is no ``tools/bench`` next to ``harness/`` (an installed, not checked-out, harness).
    """
    if not os.path.isfile(os.path.join(_ROOT, "tools", "bench", "__init__.py")):
        raise SetupError(f"the bench lives in tools/bench/ of a source checkout; there is none at {_ROOT!r}")
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)  # so `tools` resolves to this checkout's, not another's
    return importlib.import_module("tools.bench")


def cmd_bench(args: argparse.Namespace) -> int:
    """The ``bench`` verb: ``python -m harness bench [--out DIR] [--quick]`` (see :mod:`tools.bench`)."""
    return int(load_bench().cmd_bench(args))
