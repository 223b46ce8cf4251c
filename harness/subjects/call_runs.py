"""A subject's run function made from one library call (:mod:`harness.subjects.library_calls`), and the record of it.

:func:`call_run` wraps ``call(env, a, spec, emit, **params)`` into the ``run(case, device, context, rec)`` a
:class:`~harness.subjects.base.Subject` holds, and remembers the call on the function (:func:`call_of`): that is
what ``harness export`` writes into a standalone script. A run function made any other way -- including a
plug-in's wrapper around a shipped subject's run -- carries no call, so it cannot be exported with the wrong one.

Rule for plug-ins: a plug-in subject is exportable when its run is ``call_run(fn, **params)`` and ``fn``'s module
imports no harness code (the script embeds that module's source verbatim, after this package's calls module,
so ``fn`` may use any function defined there, e.g. ``lstm_link``); its ``params`` are JSON values.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping

from harness.core.cases import Case, build_arrays, receives_gradient
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.env import ESPNET_MODULE
from harness.core.errors import SetupError
from harness.subjects import library_calls as calls
from harness.subjects.base import Recorder

__all__ = ["Call", "call_run", "call_of", "CallEnv", "espnet_module"]


@dataclass(frozen=True)
class Call:
    """One library call: the function and its fixed keyword parameters (JSON values)."""

    fn: Callable[..., None]
    params: Mapping[str, Any] = field(default_factory=dict)


class CallEnv:
    """What a call needs of the harness's worker: Chainer, the device, the recorder's phases, the context."""

    def __init__(self, case: Case, device: Device, context: Context, rec: Recorder) -> None:
        self.chainer = import_chainer()
        self.xp = device.xp
        self._device = device
        self._rec = rec
        self.case_seed = case.seed
        self.context = context.to_dict()
        self.receives_gradient = receives_gradient
        self.calls = calls  # the shipped calls, for a plug-in's call that wraps one

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self._rec.phase(name)

    def to_device(self, link: Any) -> None:
        link.to_device(self._device.chainer_device())

    def seed(self, n: int) -> None:
        self._device.seed(n)

    def espnet(self) -> Any:
        return espnet_module()


def espnet_module() -> ModuleType:
    """The installed ESPnet module under test (imported after the compat layer)."""
    import_chainer()
    try:
        return importlib.import_module(ESPNET_MODULE)
    except ImportError as exc:
        raise SetupError(f"{ESPNET_MODULE} is not importable ({exc}); make installs espnet==202511 --no-deps") from exc


def call_run(fn: Callable[..., None], **params: Any) -> Callable[[Case, Device, Context, Recorder], None]:
    """The run function of a subject that is ``fn(env, arrays on the device, spec, rec.output, **params)``."""

    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        env = CallEnv(case, device, context, rec)
        built = build_arrays(case)  # this run's own copies: on the host they are the device's arrays already
        a = built if device.kind == "cpu" else {k: device.put(v) for k, v in built.items()}
        fn(env, a, case.spec, rec.output, **params)

    run.harness_call = Call(fn, dict(params))  # type: ignore[attr-defined]
    return run


def call_of(run: Callable[..., Any]) -> Call | None:
    """The library call a run function was made from; None for a run made any other way."""
    call = getattr(run, "harness_call", None)
    return call if isinstance(call, Call) else None
