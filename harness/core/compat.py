"""The listed patches that let Chainer 7.8.1 import on today's NumPy, Python and setuptools.

Every import of Chainer in the harness goes through :func:`import_chainer`, which calls
:func:`apply` first. ``numpy.sctypes`` is added only where NumPy lacks it. The two modules that
Chainer's environment check imports, ``numpy.distutils.system_info`` and ``pkg_resources``, are
small stand-ins unless this process imported the real one already: the stand-ins answer exactly
the calls Chainer makes (``get_info`` on macOS; ``require`` with its version check, and
``get_distribution``), the same on every Python, and importing the real ones (distutils,
setuptools) is a large share of the CPU time of every process that imports Chainer (workers, the
zygote, sandboxed children). Files in site-packages are never edited: the patches add attributes to ``numpy`` or
insert small stand-in modules into ``sys.modules``.

Each patch, why, and the Chainer file that needs it:

- ``numpy.sctypes``: removed in NumPy 2.0; read at import time (``chainer/functions/array/as_strided.py``).
- ``numpy.distutils.system_info``: gone on Python >= 3.12, slow elsewhere; imported at import time
  (``chainer/_environment_check.py``).
- ``pkg_resources``: gone from setuptools >= 80, slow elsewhere; imported at import time
  (``chainer/_environment_check.py``).
"""

from __future__ import annotations

import importlib.metadata
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy

__all__ = ["Patch", "PATCHES", "apply", "applied", "import_chainer"]


@dataclass(frozen=True)
class Patch:
    """One compatibility patch: what it provides, why, and the Chainer file that needs it."""

    name: str
    reason: str
    needed_by: str


PATCHES: tuple[Patch, ...] = (
    Patch("numpy.sctypes", "removed in NumPy 2.0; Chainer reads it at import time",
          "chainer/functions/array/as_strided.py"),
    Patch("numpy.distutils.system_info", "numpy.distutils is gone on Python >= 3.12; where it exists, importing it "
          "costs a tenth of a second per process", "chainer/_environment_check.py"),
    Patch("pkg_resources", "setuptools >= 80 no longer ships pkg_resources; where it does, importing it costs a "
          "tenth of a second per process", "chainer/_environment_check.py"),
)

_applied: list[str] = []


def applied() -> tuple[str, ...]:
    """Names of the patches applied in this process (empty where nothing was missing)."""
    return tuple(_applied)


def _sctypes() -> dict[str, list[Any]]:
    # The NumPy 1.x table, rebuilt from the types NumPy 2 still has.
    return {
        "int": [numpy.int8, numpy.int16, numpy.int32, numpy.int64],
        "uint": [numpy.uint8, numpy.uint16, numpy.uint32, numpy.uint64],
        "float": [numpy.float16, numpy.float32, numpy.float64, numpy.longdouble],
        "complex": [numpy.complex64, numpy.complex128, numpy.clongdouble],
        "others": [bool, object, bytes, str, numpy.void],
    }


def _system_info_module() -> types.ModuleType:
    # Chainer only calls get_info('blas_opt') on macOS to warn about Accelerate.
    mod = types.ModuleType("numpy.distutils.system_info")
    mod.__doc__ = "harness.core.compat stand-in for numpy.distutils.system_info (Chainer's environment check)."
    mod.get_info = lambda name, notfound_action=0: {}  # type: ignore[attr-defined]
    return mod


class _DistributionNotFound(Exception):
    pass


class _VersionConflict(Exception):
    pass


def _pkg_resources_module() -> types.ModuleType:
    # Just the calls chainer/_environment_check.py makes, answered by importlib.metadata (and, for a version
    # range, by packaging, as pkg_resources itself does).
    mod = types.ModuleType("pkg_resources")
    mod.__doc__ = "harness.core.compat stand-in for pkg_resources (Chainer's environment check)."
    mod.ResolutionError = Exception  # type: ignore[attr-defined]
    mod.DistributionNotFound = _DistributionNotFound  # type: ignore[attr-defined]
    mod.VersionConflict = _VersionConflict  # type: ignore[attr-defined]

    def require(requirement: str) -> list[Any]:
        name = requirement
        for sep in "<>=!~;[ ":
            name = name.split(sep, 1)[0]
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise _DistributionNotFound(requirement) from exc
        spec = requirement[len(name):].strip()
        if spec:  # only where the package is installed (CuPy on a GPU machine): Chainer warns on a conflict
            from packaging.specifiers import SpecifierSet

            if not SpecifierSet(spec).contains(version, prereleases=True):
                raise _VersionConflict(f"{name} {version} does not satisfy {requirement}")
        return []

    def get_distribution(name: str) -> Any:
        return types.SimpleNamespace(project_name=name, version=importlib.metadata.version(name))

    mod.require = require  # type: ignore[attr-defined]
    mod.get_distribution = get_distribution  # type: ignore[attr-defined]
    return mod


def apply() -> tuple[str, ...]:
    """Apply the patches (module docstring); idempotent. Returns the names applied now."""
    now: list[str] = []
    if "sctypes" not in numpy.__dict__:
        try:
            getattr(numpy, "sctypes")  # (NumPy 1.x: present, nothing to do)
        except AttributeError:
            numpy.sctypes = _sctypes()  # type: ignore[attr-defined]
            now.append("numpy.sctypes")
    # Never imported to see whether they work: the import is the cost the stand-ins save.
    if "numpy.distutils.system_info" not in sys.modules:
        sys.modules["numpy.distutils.system_info"] = _system_info_module()
        parent = sys.modules.get("numpy.distutils")
        if parent is None:
            parent = types.ModuleType("numpy.distutils")
            parent.__path__ = []
            sys.modules["numpy.distutils"] = parent
        parent.system_info = sys.modules["numpy.distutils.system_info"]  # type: ignore[attr-defined]
        numpy.distutils = parent
        now.append("numpy.distutils.system_info")
    if "pkg_resources" not in sys.modules:
        sys.modules["pkg_resources"] = _pkg_resources_module()
        now.append("pkg_resources")
    _applied.extend(n for n in now if n not in _applied)
    return tuple(now)


def import_chainer() -> types.ModuleType:
    """Import Chainer after :func:`apply`; a missing or wrong Chainer raises a one-line SetupError."""
    import warnings

    from harness.core.errors import SetupError

    apply()
    try:
        with warnings.catch_warnings():
            # numpy.distutils (where it still exists) warns on import; that says nothing about results.
            warnings.simplefilter("ignore", DeprecationWarning)
            import chainer
    except ImportError as exc:
        raise SetupError(f"chainer is not importable ({exc}); run `make test` or `make report` to build .venv") from exc
    except Exception as exc:  # noqa: BLE001 - anything deep inside Chainer becomes one line
        raise SetupError(f"chainer failed to import: {type(exc).__name__}: {exc}") from exc
    if chainer.__version__ != "7.8.1":
        raise SetupError(f"chainer=={chainer.__version__} is installed; the harness needs chainer==7.8.1")
    return chainer
