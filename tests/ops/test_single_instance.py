"""One `make run` per embedded data directory, and a database this run did not start is never
stopped by it."""

import subprocess

from brainsite.ops.supervisor import EmbeddedDatabase
from tests.ops.conftest import PY, ROOT, free_port


def test_a_second_run_on_the_same_data_refuses_and_leaves_the_first_alone(brain):
    brain.wait_healthy()
    postmaster = brain.postmaster_pid()
    second = subprocess.run(
        [PY, "-m", "brainsite.run"],
        cwd=ROOT,
        env={**brain.env, "PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 1
    assert f"Brain is already running on the embedded database in {brain.pgdata}" in second.stderr
    assert brain.postmaster_pid() == postmaster
    assert brain.wait_healthy()["database_reachable"] is True


def test_a_database_found_running_is_used_but_not_stopped(brain):
    brain.wait_healthy()
    postmaster = brain.postmaster_pid()
    database = EmbeddedDatabase(brain.pgdata, PY, ROOT)
    assert database.start().endswith(f"/brain?host={brain.pgdata}")
    assert database.started_here is False
    database.stop()
    assert database.running() and brain.postmaster_pid() == postmaster
    assert brain.healthz()[0] == 200
