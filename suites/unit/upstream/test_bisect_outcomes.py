"""A probe's saved outputs as an outcome (digests by name, or the error), and how two outcomes differ."""

from __future__ import annotations

import numpy as np
import pytest

from harness.upstream import bisect_envs as E
from harness.upstream import bisect_outcomes as O


def test_saved_outputs_are_digests_by_name_in_order_and_an_error_entry_is_the_outcome(tmp_path):
    a = np.arange(6, dtype=np.float32)
    np.savez(tmp_path / "a.npz", hy=a, **{"grad.W": a.reshape(2, 3)})
    got = O.read_outputs(str(tmp_path / "a.npz"))
    assert [n for n, _ in got] == ["hy", "grad.W"]
    assert got[0][1] != got[1][1]  # same bits, another shape: another digest
    b = a.copy()
    b.view(np.uint32)[5] ^= 1  # one bit
    np.savez(tmp_path / "b.npz", hy=b, **{"grad.W": a.reshape(2, 3)})
    assert O.first_difference(got, O.read_outputs(str(tmp_path / "b.npz"))) == "hy"
    np.savez(tmp_path / "e.npz", __error__=np.array("ValueError in backward: cannot reshape"))
    err = O.read_outputs(str(tmp_path / "e.npz"))
    assert err == "ValueError in backward: cannot reshape"
    assert O.first_difference(got, err) == "error"


def test_no_readable_outputs_cannot_be_judged(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "empty.npz")
    for name in ("bad.npz", "absent.npz", "empty.npz"):
        with pytest.raises(E.InstallFailed, match="outputs"):
            O.read_outputs(str(tmp_path / name))
