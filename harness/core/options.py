"""Options declared on the record fields that hold them: one field, one option.

An options record declares each of its command-line options on the field the option fills, with :func:`opt`:
the flag, the help text, the value check (a check of :mod:`harness.core.argcheck`, by the option's name), the
metavar, what None means in ``--help``, and whether the value is a file the verb reads or writes. A field holding
a nested record (:func:`group`) adds that record's options as an argument group. The parser, ``--help`` and the
record built back from the parsed values are all read from the fields (:func:`add_options`, :func:`record_from`):
adding an option is one field in one record.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class PingOptions:
...     count: int = opt("--count", "pings to send (default {default})", default=3)
>>> [f.flag for f in declared(PingOptions)]
['--count']
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

__all__ = ["Flag", "opt", "like", "declare", "origin_of", "origins", "group", "declared", "fields_with_flags",
           "add_flag", "add_options", "file_roles", "record_from", "help_of", "dest_of", "parse_text", "ROLES"]

#: What a file option is to its verb: read (an input) or written (an output); "" for any other option.
ROLES = ("", "input", "output")
_KEY = "option"
_GROUP = "group"
_ORIGIN = "origin"


@dataclass(frozen=True)
class Flag:
    """Every fact about one option (one field carries one; a nested record's field carries a :func:`group`)."""

    flag: str                              # "--cluster-workers"; a positional: its name ("files")
    help: str                              # "{default}": the field's default as --help shows it
    #: The value check by the option's name: returns argparse's ``type=`` (one of argcheck's, e.g.
    #: ``argcheck.count(1)``); None: the text as it is. An ``argcheck.Parsing`` parses the text into the form
    #: the field holds (a tuple of names, a shard), on the command line and in :func:`parse_text`.
    check: Callable[[str], Callable[[str], Any]] | None = None
    metavar: str | None = None
    none_says: str = "none"                # what a None default reads as in --help
    role: str = ""                         # ROLES: an input or an output file (argcheck.output_not_input)
    #: An output directory: the names the verb writes into it (() a directory made new); None: a file.
    writes: tuple[str, ...] | None = None
    switch: bool = False                   # present or not (the field: True when given)
    off: bool = False                      # "--no-x": the field is True unless given
    many: bool = False                     # repeatable, each value one item of a tuple
    nargs: str | None = None               # a positional taking several values ("+")
    choices: tuple[str, ...] | None = None
    required: bool = False
    #: The default --help shows where the field's is None ("not given") and another record's applies (a
    #: callable: asked when --help is written).
    shown: Any = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role={self.role!r} is not one of {ROLES}")

    @property
    def name(self) -> str:
        """The option's name in messages: ``--cluster-workers`` -> ``cluster-workers``."""
        return self.flag.lstrip("-")

    @property
    def positional(self) -> bool:
        return not self.flag.startswith("-")


def opt(flag: str, help: str, *, default: Any = dataclasses.MISSING,
        default_factory: Any = dataclasses.MISSING, **facts: Any) -> Any:
    """A record field declaring one option: ``count: int = opt("--count", "...", default=3, check=...)``."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_KEY: Flag(flag, help, **facts)})


def like(cls: type, name: str, *, default: Any = dataclasses.MISSING,
         default_factory: Any = dataclasses.MISSING, **changes: Any) -> Any:
    """A field declaring the option of ``cls``'s field ``name`` again in another record (the same flag and help: one
    declaration), with this record's own default and ``changes`` (its own check, metavar or requirement)."""
    src = {f.name: f for f in dataclasses.fields(cls)}[name]
    o = src.metadata[_KEY]
    return declare(dataclasses.replace(o, **changes) if changes else o, src.metadata.get(_ORIGIN, o),
                   default=default, default_factory=default_factory)


def declare(o: Flag, origin: Any, *, default: Any = dataclasses.MISSING,
            default_factory: Any = dataclasses.MISSING) -> Any:
    """A field declaring ``o``, an option first declared elsewhere (``origin``: that declaration)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_KEY: o, _ORIGIN: origin})


def origin_of(f: dataclasses.Field[Any]) -> Any:
    """Where the option of field ``f`` is declared: its own :class:`Flag`, or the one :func:`like` repeats."""
    return f.metadata.get(_ORIGIN, f.metadata[_KEY])


def group(title: str, factory: Callable[[], Any]) -> Any:
    """A record field holding a nested options record whose options form the argument group ``title``."""
    return dataclasses.field(default_factory=factory, metadata={_GROUP: title})


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def fields_with_flags(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """The fields of ``cls`` that declare an option, in order (a nested record's are not among them)."""
    for f in dataclasses.fields(cls):
        if _KEY in f.metadata:
            yield f, f.metadata[_KEY]


def _groups(cls: type) -> Iterator[tuple[dataclasses.Field[Any], str, type]]:
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if _GROUP in f.metadata:
            yield f, f.metadata[_GROUP], hints[f.name]


def declared(cls: type) -> list[Flag]:
    """Every option ``cls`` declares, its nested records' included."""
    return [o for _, o in fields_with_flags(cls)] + [o for _, _, sub in _groups(cls) for o in declared(sub)]


def origins(cls: type) -> list[tuple[str, Any]]:
    """(flag, where it is declared) of every option of ``cls``, its nested records' included."""
    return [(o.flag, origin_of(f)) for f, o in fields_with_flags(cls)] + [
        x for _, _, sub in _groups(cls) for x in origins(sub)]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def help_of(o: Flag, default: Any) -> str:
    """The help text with its default filled in (``o.shown`` where the field's is None)."""
    shown = (o.shown() if callable(o.shown) else o.shown) if default is None else default
    return o.help.replace("{default}", o.none_says if shown is None else str(shown))


def dest_of(f: dataclasses.Field[Any], prefix: str = "") -> str:
    """Where argparse keeps a field's value: its name (a nested record's: ``cluster.workers``)."""
    return prefix + f.name


def add_flag(parser: Any, o: Flag, dest: str, default: Any) -> None:
    """One option on ``parser`` (argparse's, or pytest's group: the same ``add_argument`` keywords); ``default``
    is what --help shows. A value left out parses as None (a switch as False): the record holds the default."""
    kw: dict[str, Any] = {"help": help_of(o, default), "dest": dest}
    if o.switch or o.off:
        kw["action"] = "store_true"
    else:
        if o.many:
            kw["action"] = "append"
        if o.check is not None:
            kw["type"] = o.check(o.name)
        kw.update(metavar=o.metavar, choices=o.choices, default=None)
    if o.positional:
        del kw["dest"]
        if o.nargs:
            kw["nargs"] = o.nargs
        parser.add_argument(dest, **kw)
        return
    if o.required:
        kw["required"] = True
    parser.add_argument(o.flag, **kw)


def add_options(parser: Any, cls: type, prefix: str = "", skip: tuple[str, ...] = ()) -> None:
    """Every option ``cls`` declares on ``parser``, in field order (but the fields ``skip``); a nested record's
    as an argument group."""
    for f, o in fields_with_flags(cls):
        if f.name not in skip:
            add_flag(parser, o, dest_of(f, prefix), _default(f))
    for f, title, sub in _groups(cls):
        add_options(parser.add_argument_group(title), sub, prefix=dest_of(f, prefix) + ".")


def file_roles(cls: type, got: Mapping[str, Any], prefix: str = "") -> tuple[
        dict[str, tuple[Any, tuple[str, ...] | None]], dict[str, Any]]:
    """The values of ``cls``'s file options by role, from parsed values as :func:`record_from` reads them:
    ``({name: (path, the names written into it or None for a file)}, {name: a path or a list of paths})``, for
    :func:`harness.core.argcheck.outputs_apart`."""
    outputs: dict[str, tuple[Any, tuple[str, ...] | None]] = {}
    inputs: dict[str, Any] = {}
    for f, o in fields_with_flags(cls):
        v = got.get(f.name if o.positional else dest_of(f, prefix))
        if o.role == "output":
            outputs[f.name] = (v, o.writes)
        elif o.role == "input":
            inputs[f.name] = v
    for f, _title, sub in _groups(cls):
        more_out, more_in = file_roles(sub, got, dest_of(f, prefix) + ".")
        outputs.update(more_out)
        inputs.update(more_in)
    return outputs, inputs


def _joined(o: Flag, values: list[Any]) -> tuple[Any, ...]:
    """A repeatable option's values as its field holds them: one tuple, a parsing check's items joined (each value
    of ``--good "a==1 b==2" --good c==3`` parsed into pins: the field holds the three pins)."""
    from harness.core.argcheck import Parsing

    return tuple(x for v in values for x in v) if o.many and isinstance(o.check, Parsing) else tuple(values)


def record_from(cls: type, got: Mapping[str, Any], prefix: str = "", **fixed: Any) -> Any:
    """``cls`` from parsed values by :func:`dest_of` (``vars`` of argparse's result): an option left out is left to
    the record's default; ``fixed`` fields are given as they are. The record's ``__post_init__`` checks what needs
    two options."""
    kw: dict[str, Any] = {}
    for f, o in fields_with_flags(cls):
        v = got.get(dest_of(f, prefix) if not o.positional else f.name)
        if o.off:
            if v:
                kw[f.name] = False
        elif o.switch:
            if v:
                kw[f.name] = True
        elif v is not None and v != []:
            kw[f.name] = _joined(o, v) if isinstance(v, list) else v
    for f, _title, sub in _groups(cls):
        kw[f.name] = record_from(sub, got, prefix=dest_of(f, prefix) + ".")
    return cls(**{**kw, **fixed})


def parse_text(record: Any) -> None:
    """Each field of ``record`` (a frozen options record, from its ``__post_init__``) that a Python caller gave as
    text where its option's check parses it (``argcheck.Parsing``: comma lists, ``i/n``): parsed by that check,
    as the command line parses it (the same form, the same refusal)."""
    from harness.core.argcheck import parsed_text

    for f, o in fields_with_flags(type(record)):
        value = getattr(record, f.name)
        if o.many and isinstance(value, tuple) and any(isinstance(v, str) for v in value):
            got: Any = _joined(o, [parsed_text(o.check, o.name, v) if isinstance(v, str) else (v,) for v in value])
        else:
            got = parsed_text(o.check, o.name, value)
        if got is not value:
            object.__setattr__(record, f.name, got)  # frozen: set once, while the record is made
