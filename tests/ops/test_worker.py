"""SIGKILLed pool processes must not leave the worker deadlocked on the queue lock they held:
the cluster restarts its pool (brainsite/ops/worker.py) and jobs run again, with no restart of
the worker itself."""

import os
import signal
import time

from tests.ops.conftest import wait_for


def _last_beat(brain) -> float:
    return brain.count("SELECT coalesce(extract(epoch FROM max(beat_at)), 0) FROM knowledge_heartbeat")


def test_killed_pool_processes_are_replaced_and_jobs_run_again(brain):
    brain.wait_healthy()
    main, sentinel, *pool = brain.worker_pids()
    assert len(pool) >= 3  # two workers, the monitor, the pusher
    for pid in pool:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    # A heartbeat written after the kill went through the broker, the pusher, a worker and the
    # monitor: jobs are taken and run again.
    wait_for(
        lambda: _last_beat(brain) > killed_at + 1, timeout=60, what="a heartbeat job to run after the kill"
    )
    main_now, sentinel_now, *_ = brain.worker_pids()
    assert (main_now, sentinel_now) == (main, sentinel)  # healed inside the cluster
    assert "restarting the whole pool" in brain.log_text()
    assert brain.wait_healthy()["worker"] == "ok"
