"""harness.core.argcheck: an output never overwrites an input (by device and inode, links included), for every
verb that writes one, refused in one line with exit 2 before any work."""

from __future__ import annotations

import argparse
import os

import pytest

from harness.core import argcheck
from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.errors import InvalidArgument

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [40], "id_kind": "collision", "distinct": 2})


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_corpus([CASE], str(path))
    return path


def test_same_file_sees_through_hard_and_symbolic_links(corpus, tmp_path) -> None:
    os.link(corpus, tmp_path / "hard")
    os.symlink(corpus, tmp_path / "soft")
    (tmp_path / "copy").write_bytes(corpus.read_bytes())
    assert argcheck.same_file(str(tmp_path / "hard"), str(corpus))
    assert argcheck.same_file(str(tmp_path / "soft"), str(corpus))
    assert not argcheck.same_file(str(tmp_path / "copy"), str(corpus))
    assert not argcheck.same_file(str(tmp_path / "absent"), str(corpus))


def test_a_directory_output_is_refused_only_where_it_writes_an_input(tmp_path) -> None:
    (tmp_path / "compare.md").write_text("x")
    (tmp_path / "a.json").write_text("x")
    with pytest.raises(InvalidArgument, match=r"out='.*' would overwrite the input a=.*compare\.md"):
        argcheck.outputs_apart({"out": (str(tmp_path), ("compare.md",))}, {"a": str(tmp_path / "compare.md")})
    argcheck.outputs_apart({"out": (str(tmp_path), ("compare.md",))}, {"a": str(tmp_path / "a.json")})


def test_a_file_inside_an_input_directory_is_an_input(tmp_path) -> None:
    base = tmp_path / "baseline"
    (base / "arrays").mkdir(parents=True)
    (base / "arrays" / "t.npz").write_bytes(b"x")
    with pytest.raises(InvalidArgument, match="junit=.* would overwrite the input baseline="):
        argcheck.outputs_apart({"junit": (str(base / "arrays" / "t.npz"), None)}, {"baseline": str(base)})


def _exit(argv) -> int:
    """``python -m harness *argv``'s exit code, run in this process (argparse's refusals end in SystemExit)."""
    from harness.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _verbs(corpus, tmp_path):
    """(verb argv, the input the output names) for every verb with an output option."""
    os.symlink(corpus, tmp_path / "link.jsonl")
    os.link(corpus, tmp_path / "hard.jsonl")
    link, hard = str(tmp_path / "link.jsonl"), str(tmp_path / "hard.jsonl")
    audit = tmp_path / "compare.md"
    audit.write_text("{}")
    c = str(corpus)
    return {
        "cases": ["cases", "--coverage", "--corpus", c, "--out", link],
        "gate-junit": ["gate", "--corpus", c, "--junit", hard],
        "gate-contracts": ["gate", "--contracts", c, "--junit", link],
        "shrink": ["shrink", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--kind", "repeat",
                   "--out", hard],
        "audit": ["audit", "--corpus", c, "--out", link],
        "export": ["export", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--out", hard],
        "export-markdown": ["export", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--out",
                            str(tmp_path / "x.py"), "--markdown", link],
        "compare": ["compare", str(audit), c, "--out", str(tmp_path)],
        "merge": ["merge", c, str(tmp_path / "merge.md"), "--out", str(tmp_path)],
    }


@pytest.mark.parametrize("verb", ["cases", "gate-junit", "gate-contracts", "shrink", "audit", "compare", "merge",
                                  "export", "export-markdown"])
def test_every_verb_refuses_an_output_over_its_input(verb, corpus, tmp_path, capsys) -> None:
    argv = _verbs(corpus, tmp_path)[verb]
    if verb == "merge":
        os.link(corpus, tmp_path / "merge.md")
    before = corpus.read_bytes()
    assert _exit(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would overwrite the input" in err[0], err
    assert corpus.read_bytes() == before


# ---- names and sizes at the system's limits ---------------------------------------------------
LONG = "x" * 300


@pytest.mark.parametrize("argv", [
    ["cases", "--out", "{tmp}/" + LONG],
    ["cases", "--out", "{tmp}/" + LONG + "/c.jsonl"],
    ["audit", "--out", "{tmp}/" + LONG],
    ["gate", "--junit", "{tmp}/" + LONG],
    ["compare", "{corpus}", "{corpus}", "--out", "{tmp}/" + LONG],
    ["merge", "{corpus}", "--out", "{tmp}/" + LONG],
    ["report", "--out", "{tmp}/" + LONG],
    ["shrink", "{corpus}", "--subject", "chainer.embed_id", "--kind", "repeat", "--out", "{tmp}/" + LONG],
    ["cases", "--out", "{tmp}/" + "/".join(["d" * 200] * 21)],  # every name fits, the whole path does not
    ["cases", "--out", ""],
    ["replay", "", "--subject", "chainer.embed_id"],
    ["cases", "--coverage", "--out", "{tmp}/c.jsonl"],
    ["cases", "--coverage", "--examples", "3"],
    ["cases", "--coverage", "--family", "embed"],
], ids=lambda a: " ".join(a)[:40])
def test_a_path_the_system_cannot_name_or_an_ignored_option_is_one_line(argv, corpus, tmp_path, capsys) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{corpus}", str(corpus)) for a in argv]
    assert _exit(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: error:"), err
    assert not any(p.name.startswith("x" * 10) or p.name.startswith("d" * 10) for p in tmp_path.iterdir())


@pytest.fixture
def read_only(tmp_path):
    """A folder nobody can write into: mode 0555, or (root ignores modes) the immutable attribute."""
    import shutil
    import subprocess

    d = tmp_path / "ro"
    d.mkdir()
    write_corpus([CASE], str(d / "corpus.jsonl"))
    if os.geteuid() != 0:
        d.chmod(0o555)
        undo = lambda: d.chmod(0o755)  # noqa: E731
    elif shutil.which("chattr") and subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode == 0:
        undo = lambda: subprocess.run(["chattr", "-i", str(d)], check=True)  # noqa: E731
    else:
        pytest.skip("root, and no immutable attribute here: no folder this process cannot write")
    yield d
    undo()


@pytest.mark.parametrize("verb", ["shrink-beside", "shrink-out", "cases", "compare", "audit"])
def test_a_read_only_output_folder_is_refused_before_work(verb, read_only, capsys) -> None:
    c = str(read_only / "corpus.jsonl")
    argv = {"shrink-beside": ["shrink", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--kind", "repeat"],
            "shrink-out": ["shrink", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--kind", "repeat",
                           "--out", str(read_only / "min.json")],
            "cases": ["cases", "--out", str(read_only / "new.jsonl")],
            "compare": ["compare", c, c, "--out", str(read_only / "cmp")],
            "audit": ["audit", "--corpus", c, "--out", str(read_only / "a.json")]}[verb]
    assert _exit(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be written" in err[0], err


# ---- the inputs every verb has besides its options: plug-in modules, the shipped contracts ----------------
def test_the_one_rule_takes_a_list_of_inputs_and_follows_links(corpus, tmp_path) -> None:
    os.symlink(corpus, tmp_path / "link")
    with pytest.raises(InvalidArgument, match=r"out='.*link' would overwrite the input case="):
        argcheck.output_not_input("out", str(tmp_path / "link"), [("cache", str(tmp_path / "nothing")),
                                                                   ("case", str(corpus))])
    argcheck.output_not_input("out", str(tmp_path / "new.py"), [("case", str(corpus))])


def test_a_plugin_module_is_found_without_importing_it() -> None:
    path = argcheck.plugin_file("suites.plugins.stalls:SUBJECTS")
    assert path is not None and path.endswith(os.path.join("suites", "plugins", "stalls.py"))
    assert argcheck.plugin_file("no_such_module_xyz:X") is None and argcheck.plugin_file(":X") is None


@pytest.mark.parametrize("argv, names", [
    (["gate", "--devices", "cpu", "--junit", "{contracts}"], "the input contracts="),
    (["gate", "--devices", "cpu", "--junit", "{plugin}", "--subject-plugin", "suites.plugins.stalls:SUBJECTS"],
     "the input subject-plugin="),
    (["cases", "--out", "{plugin}", "--family", "embed"], None),  # cases loads no plug-in: written elsewhere below
], ids=["shipped-contracts", "plugin-module", "no-plugin"])
def test_an_output_over_the_shipped_contracts_or_a_plugin_module_is_refused(argv, names, tmp_path, capsys) -> None:
    link = tmp_path / "c.toml"
    os.symlink(argcheck.SHIPPED_CONTRACTS, link)
    plugin = tmp_path / "plugin.py"
    os.symlink(argcheck.plugin_file("suites.plugins.stalls:SUBJECTS"), plugin)
    before = {p: open(p, "rb").read() for p in (argcheck.SHIPPED_CONTRACTS, str(plugin))}
    if names is None:
        argv = [a.replace("{plugin}", str(tmp_path / "cases.jsonl")) for a in argv]
        assert _exit([*argv, "--examples", "1"]) == 0
    else:
        argv = [a.replace("{contracts}", str(link)).replace("{plugin}", str(plugin)) for a in argv]
        assert _exit(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and names in err[0], err
    assert {p: open(p, "rb").read() for p in before} == before


@pytest.mark.parametrize("text", ["1 / 2", " 1/2", "1/2 ", "+1/2", "1/ 2", "1_0/20"])
def test_a_shard_is_digits_slash_digits_and_nothing_else(text) -> None:
    with pytest.raises(InvalidArgument, match="must look like i/n"):
        argcheck.shard("shard", text)
    assert argcheck.shard("shard", "1/2") == (1, 2)


def test_cases_coverage_with_both_a_profile_and_a_corpus_is_one_line(corpus, capsys) -> None:
    assert _exit(["cases", "--coverage", "--profile", "dev", "--corpus", str(corpus)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("harness: error:") and "profile='dev'" in line and "corpus=" in line


def test_a_name_list_is_parsed_into_a_tuple_with_each_name_checked() -> None:
    relations = argcheck.names(argcheck.one_relation, alone=("all", "none"))("relations")
    assert relations("order, alone,order") == ("order", "alone")
    assert relations("none") == ("none",)
    with pytest.raises(argparse.ArgumentTypeError, match="relation='all' is not one of"):
        relations("all,order")  # "all" stands alone
    with pytest.raises(argparse.ArgumentTypeError, match="names nothing"):
        relations(",")


def test_a_device_name_is_cpu_gpu_gpu_n_or_all() -> None:
    devices = argcheck.names(argcheck.device_name)("devices")
    assert devices("cpu,gpu:1,all") == ("cpu", "gpu:1", "all")
    with pytest.raises(argparse.ArgumentTypeError, match="devices='tpu'"):
        devices("cpu,tpu")
