"""The record of what reproduces a finding, and the one place its commands are rendered.

A :class:`Reproducer` names the case, the subject, the device or devices, the context or contexts, the
relation, the baseline, the plug-ins, the contracts file and the environment a finding needs. Every printed
command of the harness (``replay``, ``shrink``, ``localize``, ``export``) is rendered from one, and the
command line parses the same options back into one: ``parse(render(r)) == r``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

__all__ = ["Reproducer", "VERBS"]

#: The verbs a reproducer renders a command for.
VERBS = ("replay", "shrink", "localize", "export")


@dataclass(frozen=True)
class Reproducer:
    """What reproduces one finding. Two devices (or two contexts) mean "B compared with A"."""

    case: str                                   # a case JSON file, or a JSON-lines corpus with case_id
    subject: str
    case_id: str = ""
    devices: tuple[str, ...] = ("cpu",)         # one device, or (A, B)
    contexts: tuple[str, ...] = ("default",)    # one context, or (A, B)
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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["env"] = [list(e) for e in self.env]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reproducer":
        return cls(**{**d, "devices": tuple(d.get("devices", ("cpu",))),
                      "contexts": tuple(d.get("contexts", ("default",))),
                      "plugins": tuple(d.get("plugins", ())),
                      "env": tuple((str(k), v) for k, v in d.get("env", ()))})
