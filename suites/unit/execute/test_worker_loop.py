"""harness/execute/worker_loop.py: a spawned worker says it is ready, answers each run of a request in order as a
framed answer, and leaves with exit 0 when told to stop; :func:`leave` exits at once with what was printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from harness.core.cases import Case
from harness.execute.answers import decode_answer, read_frame
from harness.execute.zygote import worker_env

CASE = Case("embed", 6, {"vocab": 5, "width": 3, "ids_shape": [4]})
CHILD = "import sys; from harness.execute.worker_loop import child_main; child_main(sys.argv[1:])"


def test_a_spawned_worker_answers_each_run_in_order_and_stops_when_asked(tmp_path) -> None:
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(req_r), str(ans_w), "[]", str(tmp_path)],
                            pass_fds=(req_r, ans_w), env=worker_env({}))
    os.close(req_r)
    os.close(ans_w)
    tx = Connection(req_w, readable=False)
    try:
        deadline = time.monotonic() + 240
        assert json.loads(read_frame(ans_r, deadline)) == {"ready": proc.pid}
        tx.send((CASE.to_json(), "control.deterministic", "cpu", "default", 0, 2))
        base = dict(subject="control.deterministic", case_id=CASE.id, device="cpu", context="default")
        first = decode_answer(read_frame(ans_r, deadline), base, str(tmp_path / "0.bin"))
        second = decode_answer(read_frame(ans_r, deadline), base, str(tmp_path / "1.bin"), previous=first)
        assert first.result.status == second.result.status == "ok"
        assert first.result.arrays and all(np.array_equal(first.result.arrays[k], second.result.arrays[k])
                                           for k in first.result.arrays)
        tx.send(None)
        assert proc.wait(120) == 0
    finally:
        tx.close()
        os.close(ans_r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_leave_exits_with_its_code_after_flushing_what_was_printed() -> None:
    code = ("import sys; from harness.execute.worker_loop import leave; "
            "sys.stdout.write('kept'); leave(7); print('never')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=worker_env({}), timeout=120)
    assert (p.returncode, p.stdout) == (7, "kept")
