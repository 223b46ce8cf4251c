"""The option grid: every int and float option of every verb with malformed values (each must be refused in one
line), with edge values where the verb is cheap to run, and the name options (devices, contexts, subjects,
plug-ins) with names that do not exist. Read from the command line's own parser, so a new option is attacked too."""

from __future__ import annotations

try:
    from tools.attacks_spec import CASE, PLUGIN, SMALL, Attack, write
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_spec import CASE, PLUGIN, SMALL, Attack, write  # type: ignore[no-redef]


#: Per verb, a cheap valid command line that an option under attack is added to (the last value of a flag wins).
_BASE = {
    "cases": ["cases", "--family", "embed", "--examples", "1", "--out", "{tmp}/c.jsonl"],
    "replay": ["replay", "{tmp}/case.json", "--subject", "chainer.embed_id"],
    "localize": ["localize", "{tmp}/case.json", "--subject", "chainer.embed_id"],
    "shrink": ["shrink", "{tmp}/case.json", "--subject", "chainer.embed_id", "--kind", "error", "--max-runs", "2"],
    "report": ["report", "--out", "{tmp}/run", *SMALL],
    "gate": ["gate", "--out", "{tmp}/run", "--quiet"],
    "audit": ["audit", "--out", "{tmp}/a.json", "--examples", "1", "--quiet"],
    "subjects": ["subjects"],
}
#: Verbs whose full run is cheap: a value that may be valid there ("0", "-1") is tried too.
_CHEAP = ("cases", "replay", "localize", "shrink", "report", "subjects")


def option_grid() -> list[Attack]:
    """Every int/float option of every verb with malformed values (must be refused), and with edge values where
    the verb is cheap (refused or run: either, but never a traceback, crash or hang); the name options with
    names that do not exist."""
    import argparse

    from harness.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out: list[Attack] = []
    for verb, base in _BASE.items():
        sp = sub.choices[verb]
        for a in sp._actions:
            if not a.option_strings:
                continue
            flag = a.option_strings[0]
            bad: list[str] = []
            edge: list[str] = []
            parse = getattr(a.type, "parse", a.type)  # argcheck's converters say what they parse
            if parse is int:
                bad = ["x", "", "1e400", "1.5", "0x10", "9" * 5000, "-", "1_0_", " ", "nan", "inf", "--1"]
                edge = ["0", "-1", "-99999999999999999999", "99999999999999999999"]
            elif parse is float:
                bad = ["x", "", "nan", "-inf", "inf", "1e400x", "1e400", "-1e400", "NaN", "-nan", "0x1p3", "--1"]
                edge = ["0", "-1", "1e-300", "1e308"]
            elif flag in ("--devices", "--device"):
                bad = ["tpu", "", "gpu:x", ",", "cpu,tpu", "gpu:-1", "cpu:7"]
            elif flag in ("--contexts", "--context"):
                bad = ["nope", "", ",", "default,nope"]
            elif flag in ("--subjects", "--subject"):
                bad = ["nope", "", ",", "chainer.embed_id,nope"]
            elif flag == "--subject-plugin":
                bad = ["nocolon", "no_such_module_xyz:X", f"{PLUGIN}:NOPE", f"{PLUGIN}:INT_NAME"]
            for v in bad:
                out.append(Attack(f"option:{verb}:{flag}={v[:14]}", [*base, flag, v], setup=write("case.json", CASE)))
            if verb in _CHEAP:
                for v in edge:
                    out.append(Attack(f"edge:{verb}:{flag}={v[:14]}", [*base, flag, v], expect="either",
                                      setup=write("case.json", CASE)))
    return out
