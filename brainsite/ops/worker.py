"""`python -m brainsite.ops.worker`: the django-q2 cluster, made to survive killed pool processes
and to prove it works with a heartbeat.

Why not plain `manage.py qcluster`: django-q2's pool processes share one task queue (and one
result queue), a `multiprocessing.Queue` whose reads are serialised by a process-shared lock.
An idle worker waits for the next task *holding* that lock. When such a worker is SIGKILLed (the
OOM killer, an operator, a crash in native code) the lock is never released: the sentinel
spawns replacements, but each one blocks on the dead worker's lock forever, the pusher fills
the queue to its limit and stops, and no job runs again until the cluster is restarted. A
killed monitor does the same to the result queue, a killed pusher to the task queue's write
lock, and a worker killed while it reports a result to its own timer lock, on which the
sentinel's guard loop then blocks.

So here a pool process that died by a signal is never replaced on its own: the sentinel kills
the rest of the pool, builds new queues and starts a new pool (`BrainSentinel.restart_pool`).
Jobs that were in the old queues stay claimed in the ORM broker and are handed out again after
Q_CLUSTER `retry` seconds; nothing is acknowledged that did not run. Processes that exit
normally (recycled after `recycle` tasks, or after a task timeout) are replaced as django-q2
does it.

The sentinel also writes the worker's heartbeat itself every BRAIN_WORKER_HEARTBEAT_SECONDS,
from its guard loop, once it found its pool, monitor and pusher alive: a beat never waits in
the queue behind the work, so a worker busy with a backlog still reports. Each pool process
records when it starts a job (`job_started`), so /healthz can also tell a worker that beats but
takes no job (knowledge.health)."""

import logging
import os
import time

logger = logging.getLogger("brain.worker")


def beat_write(name: str) -> None:
    """Record that `name` ("worker": the sentinel's beat; "job": a pool process started a job)
    happened now; a database that is away is logged, and the next beat tries again."""
    from django.utils import timezone

    from knowledge.models import Heartbeat

    try:
        if not Heartbeat.objects.filter(name=name).update(beat_at=timezone.now()):
            Heartbeat.objects.update_or_create(name=name, defaults={"beat_at": timezone.now()})
    except Exception as exc:
        logger.warning("could not record the %s beat: %s", name, str(exc).splitlines()[0][:200])


def job_started(sender, **kwargs) -> None:
    """django-q2's pre_execute, in the pool process that is about to run a job."""
    beat_write("job")


def _sentinel_class():
    from django.conf import settings
    from django.db import close_old_connections
    from django_q import cluster
    from django_q.conf import Conf
    from django_q.queues import Queue
    from django_q.scheduler import scheduler
    from django_q.status import Stat

    class BrainSentinel(cluster.Sentinel):
        next_beat = 0.0

        def restart_pool(self, reason: str) -> None:
            logger.error("%s; the queues it shared may be locked: restarting the whole pool", reason)
            for process in [*self.pool, self.monitor, self.pusher]:
                if process is not None and process.is_alive():
                    process.kill()
            for process in [*self.pool, self.monitor, self.pusher]:
                if process is not None:
                    process.join(timeout=5)
            self.task_queue = Queue(maxsize=Conf.QUEUE_LIMIT) if Conf.QUEUE_LIMIT else Queue()
            self.result_queue = Queue()
            self.spawn_cluster()
            self.reincarnations += 1

        def killed(self) -> str | None:
            """Why the pool must restart: a pool process that died by a signal, else None."""
            for role, processes in (
                ("worker", self.pool),
                ("monitor", [self.monitor]),
                ("pusher", [self.pusher]),
            ):
                for process in processes:
                    if process is not None and not process.is_alive() and (process.exitcode or 0) < 0:
                        return f"{role} process {process.pid} was killed by signal {-process.exitcode}"
            return None

        def beat(self) -> None:
            if time.monotonic() < self.next_beat:
                return
            self.next_beat = time.monotonic() + settings.BRAIN_WORKER_HEARTBEAT_SECONDS
            close_old_connections()  # one the database dropped is reopened, as a job's would be
            beat_write("worker")

        def guard(self):
            """django-q2's guard loop, with restart_pool for killed processes, the heartbeat,
            and a bounded wait for a worker's timer lock."""
            logger.info("worker cluster %s running (pid %s)", self.name, os.getpid())
            self.start_event.set()
            Stat(self).save()
            counter = 0
            cycle = Conf.GUARD_CYCLE
            while True:
                reason = self.killed()
                if reason:
                    self.restart_pool(reason)
                for p in list(self.pool):
                    lock = p.timer.get_lock()
                    if not lock.acquire(timeout=cycle):
                        continue  # held by a process that died just now: next cycle restarts the pool
                    try:
                        if not p.is_alive() or p.timer.value == 0:
                            self.reincarnate(p)
                            continue
                        if p.timer.value > 0:
                            p.timer.value -= cycle
                    finally:
                        lock.release()
                if not self.monitor.is_alive():
                    self.reincarnate(self.monitor)
                if not self.pusher.is_alive():
                    self.reincarnate(self.pusher)
                counter += cycle
                if counter >= 30 and Conf.SCHEDULER:
                    counter = 0
                    scheduler(broker=self.broker)
                self.beat()
                Stat(self).save()
                if self.stop_event.wait(cycle):
                    break
            self.stop()

    return BrainSentinel


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
    import django

    from brainsite.ops.tracing import tracing_setup

    tracing_setup()  # model and webhook calls (httpx) of the jobs; off unless OTEL_* say so
    django.setup()
    from django_q import cluster
    from django_q.signals import post_execute, pre_execute

    from knowledge.metrics import job_observed

    post_execute.connect(job_observed, dispatch_uid="brain-job-metrics")  # counted in the monitor process
    pre_execute.connect(job_started, dispatch_uid="brain-job-started")  # in the pool process

    cluster.Sentinel = _sentinel_class()  # Cluster.start spawns the module's Sentinel
    q = cluster.Cluster()
    q.start()
    q.sentinel.join()  # returns when the sentinel stops (SIGTERM/SIGINT) or dies
    code = q.sentinel.exitcode or 0
    if code:
        logger.error("the worker's sentinel exited with %s", code)
    return 1 if code else 0


if __name__ == "__main__":
    raise SystemExit(main())
