"""The supervisor behind `make run`: keeps the web server, the worker and (with no DATABASE_URL)
the embedded PostgreSQL running, restarting whichever stops with a back-off, and says why.

- Each child runs in a process group of its own, so a restart also ends what the dead child
  left behind (a killed worker's pool processes) and Ctrl-C reaches the children only through
  the supervisor, which stops them in order.
- Back-off: the first restart comes BACKOFF_FIRST seconds after the stop, each failure in a
  row doubles the wait up to BACKOFF_MAX; a child that stayed up for STABLE_AFTER seconds
  starts again from the first wait.
- The embedded database is owned by one supervisor at a time: `acquire_data_dir` takes an
  exclusive lock next to the data directory, and a second `make run` on the same directory
  stops with a clear message instead of sharing it. A database that was already running when
  the supervisor started (a test run's, or one started by hand) is used but never stopped."""

import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0
POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 20.0


def say(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} supervisor: {message}", flush=True)


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Backoff:
    def __init__(self):
        self.failures = 0
        self.started = 0.0

    def started_now(self) -> None:
        self.started = time.monotonic()

    def next_delay(self) -> float:
        if time.monotonic() - self.started >= STABLE_AFTER:
            self.failures = 0
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2**self.failures)
        self.failures += 1
        return delay


@dataclass
class Child:
    name: str
    argv: list[str]
    cwd: Path
    process: subprocess.Popen | None = None
    backoff: Backoff = field(default_factory=Backoff)
    restart_at: float | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, start_new_session=True)
        self.backoff.started_now()
        self.restart_at = None

    def kill_group(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, deadline: float) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()  # the child's main process stops its own (django-q2, gunicorn)
            try:
                self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{self.name} did not stop in time; killing it")
        self.kill_group(signal.SIGKILL)  # and whatever it left behind
        self.process.wait()


class EmbeddedDatabase:
    """The embedded PostgreSQL as a supervised child. It runs detached (pg_ctl starts it), so it
    is watched through its postmaster.pid and restarted by brainsite.embedded_db in a fresh
    interpreter (a crashed server's leftovers make the first attempts fail; the back-off
    retries)."""

    name = "database"

    def __init__(self, pgdata: Path, python: str, cwd: Path):
        self.pgdata, self.python, self.cwd = pgdata, python, cwd
        self.backoff = Backoff()
        self.restart_at: float | None = None
        self.started_here = False

    def pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            try:
                os.kill(pid, 0)
            except OSError:
                return False
            return True
        return state not in ("Z", "X")

    def start(self) -> str:
        """Start it unless it runs (then it is not ours to stop); return its URL."""
        if not self.running():
            self.started_here = True
        result = subprocess.run(
            [self.python, "-c", "from brainsite.embedded_db import embedded_url; print(embedded_url())"],
            cwd=self.cwd,
            env={**os.environ, "BRAIN_PGDATA": str(self.pgdata)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError((result.stderr.strip().splitlines() or ["no output"])[-1])
        self.backoff.started_now()
        self.restart_at = None
        return result.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        if not self.started_here:
            say("leaving the embedded PostgreSQL running: this supervisor did not start it")
            return
        from brainsite.embedded_db import embedded_stop

        say("stopping the embedded PostgreSQL")
        embedded_stop(self.pgdata)


def acquire_data_dir(pgdata: Path):
    """Lock the embedded database's data directory for this process (the lock goes with it,
    however it ends). Exits with a message naming the holder when another one has it."""
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    path = pgdata.parent / f"{pgdata.name}.run.lock"
    handle = open(path, "a+")  # noqa: SIM115  (held for the process's lifetime)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        print(
            f"Brain is already running on the embedded database in {pgdata} (pid {holder}).\n"
            "Stop that one first (Ctrl-C in its terminal), give this one its own data with "
            "BRAIN_PGDATA, or point it at a shared PostgreSQL with DATABASE_URL.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


class Supervisor:
    def __init__(self, children: list[Child], database: EmbeddedDatabase | None = None):
        self.children = children
        self.database = database
        self.stopping = False

    def request_stop(self, signum, frame) -> None:
        self.stopping = True

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)
        for child in self.children:
            child.start()
        while not self.stopping:
            self.check_database()
            for child in self.children:
                self.check_child(child)
            time.sleep(POLL_SECONDS)
        return self.stop()

    def check_database(self) -> None:
        db = self.database
        if db is None:
            return
        now = time.monotonic()
        if db.restart_at is None:
            if db.running():
                return
            delay = db.backoff.next_delay()
            say(
                f"the embedded PostgreSQL is not running (postmaster.pid: {db.pid()}); restarting in {delay:.0f} s"
            )
            db.restart_at = now + delay
        if now < db.restart_at or self.stopping:
            return
        try:
            db.start()
            say("the embedded PostgreSQL is running again")
        except Exception as exc:
            delay = db.backoff.next_delay()
            say(f"could not start the embedded PostgreSQL ({exc}); next try in {delay:.0f} s")
            db.restart_at = time.monotonic() + delay

    def check_child(self, child: Child) -> None:
        now = time.monotonic()
        if child.restart_at is None:
            code = child.process.poll()
            if code is None:
                return
            child.kill_group(signal.SIGKILL)  # what it left behind
            delay = child.backoff.next_delay()
            say(f"{child.name} {exit_reason(code)}; restarting in {delay:.0f} s")
            child.restart_at = now + delay
        if now >= child.restart_at and not self.stopping:
            child.start()
            say(f"{child.name} restarted (pid {child.process.pid})")

    def stop(self) -> int:
        say("stopping the web server and the worker")
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.terminate()
        for child in self.children:
            child.stop(deadline)
        if self.database is not None:
            self.database.stop()
        say("stopped")
        return 0
