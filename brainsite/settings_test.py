"""Test settings: the same embedded server, a throw-away database per run (named per process,
so two runs on one machine never share one)."""

import os

from brainsite.settings import *  # noqa: F403
from brainsite.settings import DATABASES

DATABASES["default"]["TEST"] = {"NAME": f"test_brain_{os.getpid()}"}
DATABASES["default"]["CONN_MAX_AGE"] = 0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    # Originals of a test run go to a folder of their own, removed by the tests' session fixture.
    "materials": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "test-media" / str(os.getpid()))},  # noqa: F405
    },
}
# This run's counters (knowledge.metrics) in a folder of their own, removed with the originals.
BRAIN_METRICS_DIR = VAR_DIR / "test-metrics" / str(os.getpid())  # noqa: F405
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(BRAIN_METRICS_DIR)
Q_CLUSTER = {**Q_CLUSTER, "sync": True}  # noqa: F405  tasks run inline in tests
BRAIN_EMBEDDINGS = "local"
# Lanes are threads with their own connections, which cannot see a test's open transaction;
# the tests of lanes ask for them (tests/knowledge/embeddings/test_backlog.py).
BRAIN_EMBEDDING_LANES = 1
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STATIC_ROOT = None
# Tests are hermetic: no model unless a test points a profile at the loopback stub.
BRAIN_MODEL_BASE_URL = BRAIN_MODEL = BRAIN_MODEL_API_KEY = BRAIN_MODEL_LIGHT = ""
