"""SIGKILLed pool processes must not leave the worker deadlocked on the queue lock they held:
the cluster restarts its pool (brainsite/ops/worker.py) and jobs run again, with no restart of
the worker itself."""

import os
import signal
import time

from tests.ops.conftest import wait_for


def _last_beat(brain, name: str) -> float:
    return brain.count(
        "SELECT coalesce(extract(epoch FROM max(beat_at)), 0) FROM knowledge_heartbeat WHERE name = %s",
        [name],
    )


def test_killed_pool_processes_are_replaced_and_jobs_run_again(brain):
    brain.wait_healthy()
    main, sentinel, *pool = brain.worker_pids()
    assert len(pool) >= 3  # two workers, the monitor, the pusher
    for pid in pool:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    brain.enqueue("time.sleep", 0)
    # A job queued after the kill went through the broker, the pusher and a new pool process:
    # jobs are taken and run again.
    wait_for(
        lambda: _last_beat(brain, "job") > killed_at + 1, timeout=60, what="a job to start after the kill"
    )
    main_now, sentinel_now, *_ = brain.worker_pids()
    assert (main_now, sentinel_now) == (main, sentinel)  # healed inside the cluster
    assert "restarting the whole pool" in brain.log_text()
    assert brain.wait_healthy()["worker"] == "ok"


def test_health_stays_ok_while_the_worker_is_busy_and_turns_degraded_when_it_stops(brain):
    brain.wait_healthy()
    # Two workers, 60 jobs of 3 s: the queue stays full for the whole check below.
    brain.enqueue("time.sleep", 3, times=60)
    wait_for(lambda: _last_beat(brain, "job") > time.time() - 5, timeout=60, what="the jobs to start")
    # Beats every second, stale after three: a beat that waited behind the jobs would be minutes old.
    for _ in range(8):
        status, body = brain.healthz()
        assert (status, body["status"], body["worker"]) == (200, "ok", "ok"), body
        assert brain.count("SELECT count(*) FROM django_q_ormq WHERE lock <= now()") > 0  # jobs wait
        time.sleep(1)
    frozen = brain.worker_pids()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        body = wait_for(
            lambda: (lambda s, b: b if b["status"] == "degraded" else None)(*brain.healthz()),
            timeout=30,
            what="/healthz to say degraded",
        )
        assert body["worker"] == "stale" and "the worker's heartbeat is stale" in body["problems"]
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        brain.count("WITH gone AS (DELETE FROM django_q_ormq RETURNING 1) SELECT count(*) FROM gone")
    assert brain.wait_healthy()["worker"] == "ok"
