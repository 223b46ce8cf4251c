"""The harness's exceptions: one root, each subclass one kind of trouble; and an exception as one line."""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""


class SetupError(HarnessError):
    """The stack is missing or wrong: Chainer, ESPnet, CuPy or a driver."""


class InvalidArgument(HarnessError, ValueError):
    """An argument's value is not allowed; the message names the argument and the value."""


class CaseError(HarnessError):
    """A case spec cannot be parsed or its arrays cannot be rebuilt."""


class UnknownSubject(HarnessError, KeyError):
    """No subject is registered under that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownContext(HarnessError, KeyError):
    """No execution context is registered under that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginError(HarnessError):
    """A subject plug-in could not be loaded or does not satisfy the protocol."""


class ContractError(HarnessError):
    """The contracts file is malformed or names things that do not exist."""


class ContractViolation(HarnessError, AssertionError):
    """A determinism contract was broken; the message is the dossier."""


class ComparisonFailure(HarnessError, AssertionError):
    """An assert_* comparison failed; the message carries the statistics."""


class AuditFileError(HarnessError):
    """An audit file is corrupt or of another version; nothing was loaded."""


class WorkerError(HarnessError):
    """A worker process could not be started or spoke out of turn."""


class RecordError(HarnessError):
    """A run record (tasks.jsonl, measures.jsonl, campaign.json) is malformed; the message names the field."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message as one line of a harness error (whitespace runs and newlines as one space)."""
    return " ".join(str(exc).split())[:limit]
