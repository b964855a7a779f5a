"""Benchmark settings: the same server, a separate database (`brain_bench`) made fresh by
`make bench`, so benchmarks never touch your data."""

import os

from brainsite.settings import *  # noqa: F403
from brainsite.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ.get("BRAIN_BENCH_DATABASE", "brain_bench")
DATABASES["default"]["CONN_MAX_AGE"] = 0
Q_CLUSTER = {**Q_CLUSTER, "sync": True}  # noqa: F405
# One `brain.request` line per request would bury the figures a benchmark prints, so it is off
# here: what that line costs a request (one formatted line to stderr) is not in these figures.
LOGGING["loggers"]["brain.request"]["level"] = "WARNING"  # noqa: F405
# The benchmarks' counters (knowledge.metrics) stay out of the folder a running Brain sums.
BRAIN_METRICS_DIR = VAR_DIR / "bench-metrics"  # noqa: F405
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(BRAIN_METRICS_DIR)
