"""The compatibility layer (harness/compat.py): Chainer 7.8.1 and ESPnet's embedding on NumPy 2.

Checked here: Chainer and ``espnet.nets.chainer_backend.deterministic_embed_id`` import through
``harness.core.compat`` and run forward and backward; ``apply()`` is idempotent, keeps what NumPy has and
what this process imported already, and puts its stand-ins in without importing the real modules; the
stand-in ``pkg_resources.require`` answers as the real one (missing, version conflict, satisfied); every
patch names a Chainer file that exists and needs it; the import still
works where ``numpy.distutils`` and ``pkg_resources`` cannot be imported; site-packages is never
edited; a wrong or missing Chainer is a one-line SetupError; and the harness works without CuPy.
Blocking a module is done in a subprocess with a ``sys.meta_path`` finder that raises ImportError.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness.core import compat
from harness.core.compat import import_chainer
from harness.core.errors import SetupError

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 120

chainer = import_chainer()
import chainer.functions as F  # noqa: E402  (after the compat layer)
import chainer.links as L  # noqa: E402

CHAINER_DIR = Path(chainer.__file__).resolve().parent
SITE = CHAINER_DIR.parent


def blocker_source(*prefixes: str) -> str:
    """Python source that makes every module named ``p`` or ``p.*`` (for p in prefixes) unimportable."""
    return textwrap.dedent(f"""
        import sys, importlib.abc
        _BLOCK = {tuple(prefixes)!r}
        class _Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                for p in _BLOCK:
                    if name == p or name.startswith(p + "."):
                        raise ImportError("blocked by the test: " + name)
                return None
        for _m in list(sys.modules):
            if any(_m == p or _m.startswith(p + ".") for p in _BLOCK):
                del sys.modules[_m]
        sys.meta_path.insert(0, _Blocker())
    """)


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(ROOT) + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True,
                          text=True, timeout=TIMEOUT)


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


# ---- Chainer and ESPnet run on NumPy 2 ------------------------------------------------------------
def test_numpy_is_2_and_chainer_is_the_pinned_version():
    assert int(np.__version__.split(".")[0]) >= 2, np.__version__
    assert chainer.__version__ == "7.8.1"
    # On NumPy 2 the sctypes table is gone, so this process must have needed the patch.
    assert "numpy.sctypes" in compat.applied()
    assert set(np.sctypes) == {"int", "uint", "float", "complex", "others"}


def test_embed_id_forward_backward_on_numpy2():
    rng = np.random.default_rng(0)
    W = chainer.Variable(rng.standard_normal((7, 3)).astype(np.float32))
    x = np.array([[0, 6, 2], [2, 2, -1]], dtype=np.int32)
    y = F.embed_id(x, W, ignore_label=-1)
    assert y.shape == (2, 3, 3) and y.dtype == np.float32
    np.testing.assert_array_equal(y.array[0, 1], W.array[6])
    np.testing.assert_array_equal(y.array[1, 2], np.zeros(3, np.float32))  # the ignore label embeds to 0
    y.grad = np.ones(y.shape, np.float32)
    W.cleargrad()
    y.backward()
    assert W.grad.shape == (7, 3) and np.isfinite(W.grad).all()
    np.testing.assert_array_equal(W.grad[:, 0], np.array([1, 0, 3, 0, 0, 0, 1], np.float32))


def test_espnet_module_imports_and_runs_through_compat():
    from harness.subjects.embed import ESPNET_MODULE, espnet_module

    mod = espnet_module()
    assert mod.__name__ == ESPNET_MODULE == "espnet.nets.chainer_backend.deterministic_embed_id"
    rng = np.random.default_rng(1)
    W = chainer.Variable(rng.standard_normal((5, 4)).astype(np.float32))
    x = np.array([4, 0, 4, 4], dtype=np.int32)
    y = mod.embed_id(x, W)
    assert y.shape == (4, 4) and np.isfinite(y.array).all()
    y.grad = np.ones(y.shape, np.float32)
    W.cleargrad()
    y.backward()
    assert W.grad.shape == (5, 4) and np.isfinite(W.grad).all()
    np.testing.assert_array_equal(W.grad[:, 0], np.array([1, 0, 0, 0, 3], np.float32))
    link = mod.EmbedID(5, 4)
    assert link(x).shape == (4, 4)


def test_nsteplstm_forward_backward_on_numpy2():
    rng = np.random.default_rng(2)
    lstm = L.NStepLSTM(2, 3, 4, 0.0)
    xs = [chainer.Variable(rng.standard_normal((n, 3)).astype(np.float32)) for n in (3, 1, 2)]
    hy, cy, ys = lstm(None, None, xs)
    assert hy.shape == cy.shape == (2, 3, 4)
    assert [y.shape for y in ys] == [(3, 4), (1, 4), (2, 4)]
    loss = F.sum(hy) + F.sum(cy) + sum(F.sum(y * y) for y in ys)
    lstm.cleargrads()
    loss.backward()
    for x in xs:
        assert x.grad.shape == x.shape and np.isfinite(x.grad).all()
    grads = [p.grad for p in lstm.params()]
    assert len(grads) == 2 * 16 and all(g is not None and np.isfinite(g).all() for g in grads)
    assert any(np.abs(g).sum() > 0 for g in grads)


# ---- apply() -----------------------------------------------------------------------------------
def test_second_apply_does_nothing():
    before = compat.applied()
    assert compat.apply() == ()
    assert compat.apply() == ()
    assert compat.applied() == before
    assert len(set(compat.applied())) == len(compat.applied())  # no duplicates


def test_apply_keeps_what_is_there_and_never_imports_the_real_modules():
    code = textwrap.dedent("""
        import json, sys, types, numpy
        mine = {"int": [numpy.int32]}
        numpy.sctypes = mine
        earlier = sys.modules["pkg_resources"] = types.ModuleType("pkg_resources")  # imported before apply()
        from harness.core import compat
        first = compat.apply()
        second = compat.apply()
        print(json.dumps({"first": list(first), "second": list(second), "kept": numpy.sctypes is mine,
                          "pkg_kept": sys.modules["pkg_resources"] is earlier,
                          "system_info": sys.modules["numpy.distutils.system_info"].__doc__,
                          "real": sorted(m for m in ("setuptools", "distutils") if m in sys.modules)}))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    out = last_json(p.stdout)
    assert out["first"] == ["numpy.distutils.system_info"] and out["second"] == [], out
    assert out["kept"] and out["pkg_kept"], out  # what NumPy has and what was imported are left alone
    assert "harness.core.compat stand-in" in out["system_info"], out
    assert out["real"] == [], out  # the stand-ins cost nothing to import: neither setuptools nor distutils ran


def test_a_fresh_process_imports_chainer_with_the_stand_ins():
    code = textwrap.dedent("""
        import json, sys
        from harness.core import compat
        compat.import_chainer()
        print(json.dumps({"applied": list(compat.applied()), "pkg": sys.modules["pkg_resources"].__doc__,
                          "setuptools": "setuptools" in sys.modules}))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    out = last_json(p.stdout)
    assert {"numpy.distutils.system_info", "pkg_resources"} <= set(out["applied"]), out
    assert "harness.core.compat stand-in" in out["pkg"] and out["setuptools"] is False, out


def test_the_stand_in_require_answers_as_pkg_resources_does():
    pr = compat._pkg_resources_module()
    with pytest.raises(pr.DistributionNotFound):
        pr.require("no-such-package-anywhere>=1")
    with pytest.raises(pr.VersionConflict):
        pr.require("numpy<1")  # installed, outside the range: Chainer warns on this
    assert pr.require("numpy>=2") == [] and pr.require("numpy") == []
    assert pr.get_distribution("numpy").version == np.__version__


def test_each_patch_names_a_chainer_file_that_needs_it():
    names = [p.name for p in compat.PATCHES]
    assert names == ["numpy.sctypes", "numpy.distutils.system_info", "pkg_resources"]
    what = {"numpy.sctypes": "sctypes", "numpy.distutils.system_info": "system_info",
            "pkg_resources": "pkg_resources"}
    for patch in compat.PATCHES:
        assert patch.needed_by.startswith("chainer/"), patch
        path = SITE / patch.needed_by
        assert path.is_file(), f"{patch.name}: {path} does not exist in the installed chainer"
        assert what[patch.name] in path.read_text(encoding="utf-8"), f"{path} does not use {patch.name}"
        assert patch.reason


def test_import_works_without_numpy_distutils_and_pkg_resources():
    code = blocker_source("numpy.distutils", "pkg_resources", "setuptools._vendor.pkg_resources") + textwrap.dedent("""
        import json
        import numpy as np
        try:
            import pkg_resources
            raise SystemExit("the blocker failed: pkg_resources imported")
        except ImportError:
            pass
        from harness.core.compat import import_chainer
        from harness.core import compat
        chainer = import_chainer()
        import chainer.functions as F
        W = chainer.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
        y = F.embed_id(np.array([1, 1, 3], np.int32), W)
        y.grad = np.ones((3, 3), np.float32)
        y.backward()
        import sys
        print(json.dumps({"applied": list(compat.applied()), "y": y.array.tolist(), "gW": W.grad.tolist(),
                          "stand_in": sys.modules["pkg_resources"].__doc__}))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    out = last_json(p.stdout)
    assert "pkg_resources" in out["applied"] and "numpy.distutils.system_info" in out["applied"], out
    assert "harness.core.compat stand-in" in out["stand_in"]
    assert out["y"][0] == [3.0, 4.0, 5.0] and out["gW"][1] == [2.0, 2.0, 2.0] and out["gW"][0] == [0.0] * 3


def test_a_module_that_raises_on_import_counts_as_missing():
    # pkg_resources is found, but importing it raises (as a broken setuptools would).
    code = textwrap.dedent("""
        import sys, json, importlib.abc, importlib.util
        class _Loader(importlib.abc.Loader):
            def create_module(self, spec): return None
            def exec_module(self, module): raise RuntimeError("broken pkg_resources")
        class _Finder(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "pkg_resources":
                    return importlib.util.spec_from_loader(name, _Loader())
                return None
        sys.modules.pop("pkg_resources", None)
        sys.meta_path.insert(0, _Finder())
        from harness.core.compat import import_chainer, applied
        import_chainer()
        print(json.dumps(list(applied())))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert "pkg_resources" in last_json(p.stdout)


def _chainer_tree_state() -> dict[str, tuple[int, str]]:
    out = {}
    for path in sorted(CHAINER_DIR.rglob("*.py")):
        data = path.read_bytes()
        out[str(path.relative_to(SITE))] = (path.stat().st_mtime_ns, hashlib.sha256(data).hexdigest())
    return out


def test_compat_never_edits_site_packages():
    targets = [SITE / p.needed_by for p in compat.PATCHES]
    before = _chainer_tree_state()
    assert all(str(t.relative_to(SITE)) in before for t in targets)
    code = blocker_source("numpy.distutils", "pkg_resources") + textwrap.dedent("""
        from harness.core import compat
        compat.apply(); compat.apply()
        compat.import_chainer()
        print(list(compat.applied()))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert "pkg_resources" in p.stdout  # the patches really ran
    after = _chainer_tree_state()
    changed = [k for k in before if before[k] != after.get(k)]
    assert not changed and set(after) == set(before), f"site-packages changed: {changed}"


# ---- errors ---------------------------------------------------------------------------------------
def test_wrong_chainer_version_is_a_one_line_setup_error(monkeypatch):
    monkeypatch.setattr(chainer, "__version__", "6.7.0")
    with pytest.raises(SetupError) as info:
        import_chainer()
    msg = str(info.value)
    assert "\n" not in msg and "6.7.0" in msg and "7.8.1" in msg, msg
    monkeypatch.undo()
    assert import_chainer() is chainer  # positive control: the right version passes


def test_missing_chainer_is_a_one_line_setup_error():
    code = blocker_source("chainer") + textwrap.dedent("""
        from harness.core.compat import import_chainer
        from harness.core.errors import SetupError
        try:
            import_chainer()
        except SetupError as exc:
            print("SETUP:" + str(exc))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip().splitlines()[-1]
    assert line.startswith("SETUP:chainer is not importable"), p.stdout
    assert "Traceback" not in p.stdout + p.stderr


def test_env_check_reports_a_wrong_chainer_in_one_line_per_problem():
    code = textwrap.dedent("""
        import sys
        from harness.core import compat
        compat.apply()
        import chainer
        chainer.__version__ = "7.0.0"
        from harness.cli import main
        sys.exit(main(["env", "--check"]))
    """)
    p = run_python(code)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert lines and all(ln.startswith("harness: ") for ln in lines), p.stderr
    assert any("chainer==7.0.0 is installed" in ln and "7.8.1" in ln for ln in lines), p.stderr
    assert "Traceback" not in p.stderr


# ---- no CuPy --------------------------------------------------------------------------------------
def test_harness_works_where_cupy_is_absent():
    code = blocker_source("cupy", "cupyx") + textwrap.dedent("""
        import json, sys
        import harness.cli, harness.execute.campaign, harness.core.env, harness.subjects.registry  # noqa: F401
        from harness.core.devices import Device, CPU
        from harness.core.compat import import_chainer
        import_chainer()
        ok, reason = Device("gpu", 0).availability()
        cpu_ok, _ = CPU.availability()
        print(json.dumps({"ok": ok, "reason": reason, "cpu": cpu_ok, "cupy": "cupy" in sys.modules and
                          sys.modules["cupy"] is not None}))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    out = last_json(p.stdout)
    assert out["ok"] is False and out["cpu"] is True and out["cupy"] is False, out
    assert out["reason"] and "\n" not in out["reason"] and len(out["reason"]) < 160, out
    import shutil

    if shutil.which("nvidia-smi") is None:  # no NVIDIA GPU at all: that is the reason, not CuPy
        assert out["reason"] == "no GPU: nvidia-smi not found", out
    else:
        assert "CuPy" in out["reason"]


def test_env_json_works_where_cupy_is_absent():
    code = blocker_source("cupy", "cupyx") + textwrap.dedent("""
        import sys
        from harness.cli import main
        sys.exit(main(["env", "--json"]))
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    fp = json.loads(p.stdout)
    assert fp["gpu"]["available"] is False and "not installed" in fp["gpu"]["reason"], fp["gpu"]
    assert fp["chainer"]["usable"] is True and fp["chainer"]["cuda_available"] is False
    assert "Traceback" not in p.stderr
