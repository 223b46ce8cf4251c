"""Validators for command-line values: each a small function that returns the checked value or raises
:class:`~harness.core.errors.InvalidArgument` with one line naming the argument and the value.

The command line's parser runs them as argparse ``type=`` converters (:func:`converter`), so every value is
checked while the command line is read, before any work starts: a typo costs a second, not a campaign, and no
verb checks again what the parser checked. The bounds of the numbers are :data:`LIMITS` (one table).
The file-system checks touch nothing that stays: a writability check creates and removes one probe
file in the nearest existing directory.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence, TypeVar, cast

from harness.core.errors import InvalidArgument, RecordError
from harness.core.record_files import record_file, record_lines
from harness.core.schemas import MAX_TIMEOUT

__all__ = ["positive_seconds", "int_at_least", "name_list", "readable_file", "writable_dir", "writable_file",
           "run_dir_for_output", "baseline_dir", "jsonl_records", "shard", "Shard", "shards", "device_name",
           "converter", "ints", "seconds", "count", "duration", "kept", "names", "Parsing", "parsed_text", "one_of",
           "file_or_stdout", "one_device", "one_context", "one_relation", "LIMITS", "MAX_TIMEOUT",
           "profile_or_corpus", "same_file", "outputs_apart", "verb_files_apart", "output_not_input", "plugin_file",
           "SHIPPED_CONTRACTS", "JUDGING_VERBS", "DEFAULT_LIMIT_TEXT"]

T = TypeVar("T")

#: The upper bound of each counted argument, and why: beyond it the run would take days or the value is a typo
#: (``--examples 1000000000`` generated nothing for minutes before it was bounded).
LIMITS: dict[str, tuple[int, str]] = {
    "examples": (100_000, "generating more takes hours; give a --corpus, or split with --shard"),
    "repeats": (10_000, "more repetitions show nothing new; use --fresh for other processes"),
    "fresh": (1_000, "each is a new worker process"),
    "jobs": (256, "each lane holds 1 + fresh worker processes"),
    "keep": (100_000, "run directories to keep"),
    "max-runs": (10_000_000, "worker runs"),
    "cluster-workers": (1_024, "worker processes on this machine"),
    "seed": (2 ** 63 - 1, "seeds are 64-bit"),
    "max-case-bytes": (2 ** 62, "bytes"),
}


#: What the per-case limit (:func:`harness.core.case_limits.max_case_bytes_default`) is where
#: ``$HARNESS_MAX_CASE_BYTES`` is not set, in the words of the messages and the options' help (one text: the
#: documented default is the code's; here, where the parser reads it without NumPy).
DEFAULT_LIMIT_TEXT = "half this machine's memory"


def positive_seconds(name: str, value: float, maximum: float = MAX_TIMEOUT) -> float:
    """A finite number of seconds > 0 and at most ``maximum`` (a week; ``nan``, ``inf``, 0, negatives and
    ``1e308``, which overflows every deadline computed from it, are refused)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise InvalidArgument(f"{name}={value!r} must be a finite number of seconds > 0")
    if value > maximum:
        raise InvalidArgument(f"{name}={value!r} must be at most {maximum:g} seconds ({maximum / 86400:g} days)")
    return float(value)


def int_at_least(name: str, value: int | None, minimum: int, maximum: int | None = None) -> int | None:
    """An int >= ``minimum`` and <= ``maximum`` (default :data:`LIMITS` of ``name``, if any); None passes
    through: the option was not given."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be an integer")
    if value < minimum:
        raise InvalidArgument(f"{name}={value} must be >= {minimum}")
    top, why = (maximum, "") if maximum is not None else LIMITS.get(name, (None, ""))
    if top is not None and value > top:
        raise InvalidArgument(f"{name}={value} must be <= {top:,}" + (f" ({why})" if why else ""))
    return value


def profile_or_corpus(profile: str | None, corpus: str | None) -> None:
    """A profile sizes the generated cases and a corpus brings its own: refuse both at once, in one line."""
    if profile is not None and corpus is not None:
        raise InvalidArgument(f"profile={profile!r} sizes the generated cases; corpus={corpus!r} runs its own: give "
                              f"one of them")


class Shard(NamedTuple):
    """Shard ``number`` of ``of`` (1-based) of a corpus; written ``i/n`` (:func:`shard` reads it)."""

    number: int
    of: int

    def __str__(self) -> str:
        return f"{self.number}/{self.of}"


def shard(name: str, text: str | None) -> Shard | None:
    """``i/n`` (1-based, 1 <= i <= n) -> :class:`Shard` (i, n); None passes through."""
    if text is None:
        return None
    try:
        if not re.fullmatch(r"[0-9]+/[0-9]+", text):  # the digits themselves: no space, sign or underscore
            raise ValueError(text)
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} must look like i/n, for example 1/4") from None
    if n < 1 or not 1 <= i <= n:
        raise InvalidArgument(f"{name}={text!r} needs 1 <= i <= n")
    return Shard(i, n)


def device_name(name: str, value: str) -> None:
    """A check: ``cpu``, ``gpu``, ``gpu:N`` or ``all``, one name of a comma list (whether a device is usable here
    is :func:`harness.core.devices.select_devices`'s question, asked by the verb)."""
    from harness.core.devices import parse_device

    if value.lower() not in ("all", "default", "gpu", "cuda"):
        try:
            parse_device(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{name}={value!r}: {exc} (or 'all')") from None


# ---- argparse ----------------------------------------------------------------------------------
def converter(name: str, check: Callable[[str, Any], T], parse: Callable[[str], Any] = str,
              kind: str = "") -> Callable[[str], T]:
    """An argparse ``type=`` from a check: the text is parsed (``parse``; a ValueError says ``name`` must be
    ``kind``) and checked; a problem is argparse's usage error, one line, exit 2."""
    def convert(text: str) -> T:
        try:
            value = parse(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{name}={text!r} must be {kind or 'valid'}") from None
        try:
            return check(name, value)
        except InvalidArgument as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except Exception as exc:  # a registry's own error (UnknownContext ...): still one line
            from harness.core.errors import HarnessError

            if isinstance(exc, HarnessError):
                raise argparse.ArgumentTypeError(" ".join(str(exc).split())) from None
            raise

    convert.__name__ = name  # argparse names the converter in its messages
    convert.parse = parse  # type: ignore[attr-defined]  # (it reads int, float or str; tools/attacks_options.py asks)
    return convert


def ints(name: str, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """``type=`` for an integer >= ``minimum`` (and <= ``maximum`` or :data:`LIMITS`)."""
    return converter(name, lambda n, v: cast(int, int_at_least(n, v, minimum, maximum)), int, "an integer")


def seconds(name: str, maximum: float = MAX_TIMEOUT) -> Callable[[str], float]:
    """``type=`` for a number of seconds > 0 and <= ``maximum``."""
    return converter(name, lambda n, v: positive_seconds(n, v, maximum), float, "a number of seconds")


# ---- value checks by an option's name (harness.core.options.Flag.check): each gives the ``type=`` ---------
def count(minimum: int, maximum: int | None = None) -> Callable[[str], Callable[[str], int]]:
    """An integer >= ``minimum`` (and <= ``maximum`` or :data:`LIMITS` of the option's name)."""
    return lambda name: ints(name, minimum, maximum)


def duration(zero: bool = False) -> Callable[[str], Callable[[str], float]]:
    """A number of seconds > 0 and at most :data:`MAX_TIMEOUT` (``zero``: 0 too, "none at all")."""
    def check(name: str, value: float) -> float:
        return 0.0 if zero and value == 0 else positive_seconds(name, value)

    return lambda name: converter(name, check, float, "a number of seconds")


def kept(check: Callable[[str, str], Any]) -> Callable[[str], Callable[[str], str]]:
    """The text as given, once ``check(name, text)`` has passed it."""
    def keep(name: str, value: str) -> str:
        check(name, value)
        return value

    return lambda name: converter(name, keep)


@dataclass(frozen=True)
class Parsing:
    """A value check that parses the text into another form (a tuple of names, a :class:`Shard`): called with the
    option's name it gives argparse's ``type=``. A record given the text from Python parses it with the same
    check (:func:`parsed_text`), so both refuse a bad value alike."""

    make: Callable[[str], Callable[[str], Any]]

    def __call__(self, name: str) -> Callable[[str], Any]:
        return self.make(name)


def parsed_text(check: Any, name: str, value: Any) -> Any:
    """``value`` in the form ``check`` (a :class:`Parsing`) parses to, where it is still text (a Python caller's);
    any other value as it is. A bad text is the parser's one line, as an :class:`InvalidArgument`."""
    if not isinstance(check, Parsing) or not isinstance(value, str):
        return value
    try:
        return check(name)(value)
    except argparse.ArgumentTypeError as exc:
        raise InvalidArgument(str(exc)) from None


def names(check: Callable[[str, str], Any] | None = None, alone: tuple[str, ...] = ()) -> Parsing:
    """A comma list parsed once into a tuple of names (repeats dropped), each passed by ``check(name, one)``
    unless it is one of ``alone``: words that stand only by themselves (a relation list's ``all`` or ``none``)."""
    def each(name: str, value: str) -> tuple[str, ...]:
        got = tuple(name_list(name, value) or ())
        if len(got) == 1 and got[0] in alone:
            return got
        for one in got:
            if check is not None:
                check(name, one)
        return got

    return Parsing(lambda name: converter(name, each))


def shards() -> Parsing:
    """``i/n`` parsed once into a :class:`Shard`."""
    return Parsing(lambda name: converter(name, shard))


def one_of(*values: str) -> Callable[[str, str], None]:
    """A check: the text is one of ``values``."""
    def check(name: str, value: str) -> None:
        if value not in values:
            raise InvalidArgument(f"{name}={value!r} must be one of {', '.join(values)}")

    return check


def file_or_stdout(name: str, value: str) -> None:
    """A check: ``-`` (standard output) or a file that can be written."""
    if value != "-":
        writable_file(name, value)


def one_device(name: str, value: str) -> None:
    """A check: one device, ``cpu``, ``gpu`` or ``gpu:N`` (whether it is usable here is the verb's question)."""
    from harness.core.devices import parse_device

    parse_device(value)


def one_context(name: str, value: str) -> None:
    """A check: a registered context's name (:class:`~harness.core.errors.UnknownContext` names the known ones)."""
    from harness.core.contexts import get_context

    get_context(value)


def one_relation(name: str, value: str) -> None:
    """A check: an invariance relation's name."""
    from harness.core.vocabulary import RELATIONS

    if value not in RELATIONS:
        raise InvalidArgument(f"relation={value!r} is not one of {', '.join(RELATIONS)}")


def name_list(name: str, text: str | None) -> list[str] | None:
    """A comma list of names; None passes through, but an empty list (``''``, ``','``) is refused."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InvalidArgument(f"{name}={text!r} names nothing: give a comma list, or leave the option out")
    return list(dict.fromkeys(names))


def readable_file(name: str, path: str) -> str:
    """An existing regular file this process can open for reading. A directory, a FIFO (reading it would wait
    for a writer forever), a device (``/dev/zero`` never ends) or a socket is refused before anything is read."""
    if not path:
        raise InvalidArgument(f"{name}='' names no file: give a path, or leave the option out")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InvalidArgument(f"{name}={path!r} cannot be read: it does not exist") from None
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InvalidArgument(f"{name}={path!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InvalidArgument(f"{name}={path!r} is {what}, not a regular file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be read: {exc.strerror}") from None
    return path


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _short(path: str) -> str:
    return repr(path) if len(path) <= 80 else repr(path[:80]) + "..."


def _fits(name: str, path: str, room: int = 0) -> None:
    """A path the system can name: not empty, no component over the file system's name limit (255 bytes on most),
    the whole (absolute, with ``room`` bytes more for the names written inside it) under ``PATH_MAX``."""
    if not path:
        raise InvalidArgument(f"{name}='' names no file: give a path, or leave the option out")
    if "\0" in path:
        raise InvalidArgument(f"{name}={path[:80]!r} holds a NUL byte: no file has that name")
    full = os.path.abspath(path)
    base = _nearest_existing(os.path.dirname(full))
    try:
        name_max = os.pathconf(base if os.path.isdir(base) else "/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in full.split(os.sep):
        if len(os.fsencode(part)) > name_max:
            raise InvalidArgument(f"{name}={_short(path)}: the name {part[:40]!r}... is {len(os.fsencode(part))} "
                                  f"bytes, more than the {name_max} this file system allows")
    if len(os.fsencode(full)) + room >= path_max:
        raise InvalidArgument(f"{name}={_short(path)}: the path is {len(os.fsencode(full))} bytes"
                              + (f" (and {room} more for the files inside)" if room else "")
                              + f", more than the {path_max} the system allows")


def _probe(name: str, path: str, directory: str) -> None:
    # os.access is fooled by root, read-only mounts and ACLs; a real create-and-remove is not.
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".harness-probe-")
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be written: {directory}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(tmp)


def writable_dir(name: str, path: str) -> str:
    """A directory that exists and is writable, or that can be created (nothing is created here), with room
    under ``PATH_MAX`` for the longest name a file inside it may have."""
    _fits(name, path, room=256)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is an existing file, not a directory")
    base = _nearest_existing(path)
    if not os.path.isdir(base):
        raise InvalidArgument(f"{name}={path!r} cannot be created: {base!r} is a file")
    _probe(name, path, base)
    return path


def writable_file(name: str, path: str) -> str:
    """A file path that can be written: not a directory, its directory exists-and-is-writable or can be made."""
    _fits(name, path)
    if os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is a directory, not a file")
    if os.path.islink(path) and not os.path.exists(path):
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InvalidArgument(f"{name}={path!r} is a loop of symbolic links") from None
    parent = os.path.dirname(os.path.abspath(path))
    base = _nearest_existing(parent)
    if not os.path.isdir(base):
        raise InvalidArgument(f"{name}={path!r} cannot be created: {base!r} is a file")
    _probe(name, path, base)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InvalidArgument(f"{name}={path!r} exists and is not writable")
    return path


def run_dir_for_output(name: str, path: str) -> str:
    """A new run directory: writable, and either absent or empty (an existing run is never mixed into)."""
    writable_dir(name, path)
    if os.path.isdir(path) and os.listdir(path):
        raise InvalidArgument(f"{name}={path!r} is an existing non-empty directory: choose a new one, "
                              f"or continue it with --resume {path}")
    return path


def jsonl_records(name: str, path: str, required: tuple[str, ...] = ()) -> int:
    """Check a JSON-lines record file line by line (plain or packed:
    :func:`harness.core.record_files.record_file`): every line an object holding ``required`` keys. A torn
    *last* line (an interrupted write) is allowed, as the campaign allows it. Returns the record count."""
    from harness.core.input_parsing import InputProblem, parse_json

    n = 0
    try:
        lines = record_lines(path)
    except (OSError, EOFError, UnicodeDecodeError, RecordError) as exc:  # a damaged packed file: RecordError
        raise InvalidArgument(f"{name}={path!r} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rec = parse_json(raw, f"{path}:{i + 1}")
        except InputProblem as exc:
            if i == last and raw.strip().startswith("{") and not raw.strip().endswith("}"):
                continue  # a torn last line
            raise InvalidArgument(f"{name}: {exc}") from None
        if not isinstance(rec, dict):
            raise InvalidArgument(f"{name}: {path}:{i + 1} is not a JSON object line")
        missing = [k for k in required if k not in rec]
        if missing:
            raise InvalidArgument(f"{name}: {path}:{i + 1} lacks {', '.join(map(repr, missing))}")
        n += 1
    return n


def baseline_dir(name: str, path: str) -> str:
    """A stored report directory that ``gate --baseline`` can read: a directory with a non-empty,
    well-formed ``tasks.jsonl``, plain or packed as a finished report leaves it (checked in well under a
    second, before any campaign runs)."""
    if not os.path.exists(path):
        raise InvalidArgument(f"{name}={path!r} does not exist")
    if not os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is not a directory (give a report directory)")
    tasks = os.path.join(path, "tasks.jsonl")
    if record_file(tasks) is None:
        raise InvalidArgument(f"{name}={path!r} holds no tasks.jsonl (or tasks.jsonl.xz): not a report directory")
    if jsonl_records(name, tasks, ("key", "subject", "device", "context", "status")) == 0:
        raise InvalidArgument(f"{name}={path!r}: tasks.jsonl holds no task records")
    return path


# ---- an output is never one of the inputs ------------------------------------------------------
def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (device and inode, after links): False where either does not exist."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _input_files(path: str) -> list[str]:
    """An input option's files: the file itself, or every file under a directory (a baseline, a resumed run)."""
    if not os.path.isdir(path):
        return [path]
    out: list[str] = []
    for root, _dirs, files in os.walk(path):
        out.extend(os.path.join(root, f) for f in files)
    return out


def output_not_input(name: str, output: str, inputs: Sequence[tuple[str, str]], writes: Sequence[str] = ()) -> None:
    """The one rule: refuse output ``name=output`` where it is one of ``inputs`` ((option name, path) pairs: a
    directory stands for every file in it), by device and inode, hard and symbolic links followed. ``writes``:
    the names the verb writes into ``output`` where it is a directory (each is checked), else ``output`` is the
    file written. Any verb calls it with its own list (``export`` and ``bisect`` among them)."""
    if not output or output == "-":
        return
    files = [(n, f) for n, p in inputs if p and p != "-" for f in _input_files(p)]
    for target in ([os.path.join(output, w) for w in writes] if writes else [output]):
        for in_name, f in files:
            if same_file(target, f):
                where = "" if target == output else f" (it writes {os.path.basename(target)} there)"
                raise InvalidArgument(f"{name}={output!r} would overwrite the input {in_name}={f!r}{where}: "
                                      f"write the output somewhere else")


def outputs_apart(outputs: dict[str, tuple[str | None, tuple[str, ...] | None]],
                  inputs: dict[str, Any]) -> None:
    """:func:`output_not_input` for each output. ``outputs``: name -> (path, None for a file or the names written
    into that directory); ``inputs``: name -> a path, a list of paths or None."""
    pairs = [(name, path) for name, value in inputs.items()
             for path in ([value] if isinstance(value, str) else list(value or ())) if isinstance(path, str)]
    for out_name, (path, writes) in outputs.items():
        if path is not None and writes is not None and not writes:
            continue  # a directory the verb makes new: nothing in it is an input
        output_not_input(out_name, path or "", pairs, writes or ())


def verb_files_apart(verb: str, outputs: dict[str, tuple[str | None, tuple[str, ...] | None]],
                     inputs: dict[str, Any], plugins: Any) -> None:
    """:func:`outputs_apart` for ``verb``, its file options by role (:func:`harness.core.options.file_roles`) and
    the inputs every verb has besides: the plug-in modules it loads (``plugins``, each ``MOD:OBJ``) and, for a verb
    that judges, the contracts file it reads where none is given (the shipped one)."""
    ins = dict(inputs)
    ins["subject-plugin"] = [f for spec in plugins or () if (f := plugin_file(spec))]
    if verb in JUDGING_VERBS and not ins.get("contracts"):
        ins["contracts"] = SHIPPED_CONTRACTS
    outputs_apart(outputs, ins)


#: The shipped contracts file: what a verb that judges reads where ``--contracts`` is not given.
SHIPPED_CONTRACTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                 "contracts.toml")
#: The verbs that read a contracts file (the shipped one where ``--contracts`` is not given).
JUDGING_VERBS = frozenset({"report", "gate", "replay", "shrink", "localize", "export", "contracts", "bisect"})


def plugin_file(spec: str) -> str | None:
    """The file of plug-in ``MODULE:OBJECT``'s module, found on ``sys.path`` without importing anything (nothing of
    a plug-in runs in the harness's own process); None where it is no plain module file (the loader then says
    what is wrong)."""
    import sys

    module = str(spec).split(":", 1)[0].strip()
    if not module or not all(p.isidentifier() for p in module.split(".")):
        return None
    rel = os.path.join(*module.split("."))
    for entry in sys.path:
        base = entry or os.getcwd()
        for candidate in (rel + ".py", os.path.join(rel, "__init__.py")):
            path = os.path.join(base, candidate)
            if os.path.isfile(path):
                return path
    return None
