"""harness/execute/contention.py: one busy process per GPU of the run, none for the CPU, all stopped at the end."""

from __future__ import annotations

import pytest

from harness.core.devices import CPU, Device, gpu_reason
from harness.execute.contention import Contention


def test_contention_keeps_only_the_gpus_and_starts_nothing_for_the_cpu() -> None:
    c = Contention([CPU, Device("gpu", 1)])
    assert c.devices == [Device("gpu", 1)]
    cpu_only = Contention([CPU]).start()
    assert cpu_only.procs == []
    cpu_only.stop()
    assert cpu_only.stop_event.is_set()


@pytest.mark.gpu
def test_a_gpu_busy_process_runs_until_stopped() -> None:
    if gpu_reason() is not None:
        pytest.skip(f"no usable GPU: {gpu_reason()}")
    c = Contention([Device("gpu", 0)]).start()
    try:
        assert len(c.procs) == 1 and c.procs[0].is_alive()
    finally:
        c.stop()
    assert c.procs == []
