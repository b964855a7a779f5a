"""The small fixed world every test can use: an owner person, a teammate and an outsider; two
agents (one trusted); a reviewer and an admin; channels of every kind; API clients per token."""

from collections import Counter
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from knowledge.models import Channel
from tests import factory

# Under pytest-xdist (`make test` runs two workers) the tests that start whole servers share one
# worker per folder, so the migrated data directory, the running Brain and the browser are set up
# once rather than on both workers.
XDIST_GROUPS = ("ops", "browser", "real_models")


def pytest_collection_modifyitems(items):
    twice = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if twice:  # pytest-xdist would run one test of each such id and count it once
        raise pytest.UsageError("tests share an id: " + ", ".join(twice[:5]))
    for item in items:
        parts = item.nodeid.split("/")
        if len(parts) > 2 and parts[0] == "tests" and parts[1] in XDIST_GROUPS:
            item.add_marker(pytest.mark.xdist_group(parts[1]))


@dataclass
class World:
    copilot: object
    scribe: object
    alice: object
    bob: object
    outsider: object
    reviewer: object
    admin: object
    general: object
    support: object
    dm_alice: object
    tokens: dict

    def client(self, who: str | None) -> APIClient:
        client = APIClient()
        if who is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.tokens[who]}")
        return client


@pytest.fixture
def world(db) -> World:
    copilot = factory.make_agent("copilot")
    scribe = factory.make_agent("scribe", trusted=True)
    alice, bob, outsider = (
        factory.make_person("alice"),
        factory.make_person("bob"),
        factory.make_person("olga"),
    )
    reviewer = factory.make_user("rita", role="reviewer")
    admin = factory.make_user("adam", role="admin")
    from knowledge.principals import services

    integration = services.integration_create(actor=factory.SYSTEM, name="tickets")
    tokens = {
        "copilot": factory.make_token(agent=copilot),
        "scribe": factory.make_token(agent=scribe),
        "reviewer": factory.make_token(user=reviewer),
        "admin": factory.make_token(user=admin),
        "integration": factory.make_token(integration=integration),
    }
    return World(
        copilot=copilot,
        scribe=scribe,
        alice=alice,
        bob=bob,
        outsider=outsider,
        reviewer=reviewer,
        admin=admin,
        general=factory.make_channel("general"),
        support=factory.make_channel("support", memory_scope=Channel.SCOPE_CHANNEL),
        dm_alice=factory.make_channel("dm-alice", kind=Channel.KIND_DM, person=alice, agent=copilot),
        tokens=tokens,
    )


@pytest.fixture(scope="session")
def _model_stub_server():
    from tests.model_stub import ModelStub

    stub = ModelStub()
    yield stub
    stub.close()


@pytest.fixture
def model_stub(_model_stub_server, settings):
    """The loopback model server, reset, with the default profile pointing at it (retries
    without backoff so failure tests stay fast)."""
    _model_stub_server.reset()
    settings.BRAIN_MODEL_BASE_URL = _model_stub_server.url
    settings.BRAIN_MODEL = "stub-model"
    settings.BRAIN_MODEL_LIGHT = "stub-light"
    settings.BRAIN_MODEL_API_KEY = "sk-stub-secret"
    settings.BRAIN_MODEL_RETRY_BACKOFF_SECONDS = 0
    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 5
    yield _model_stub_server
    _model_stub_server.reset()


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """What a process caches about the data (memory.caches); every test starts from the
    database."""
    from memory.caches import forget_process_caches

    forget_process_caches()
    yield
    forget_process_caches()


@pytest.fixture(scope="session", autouse=True)
def _material_originals_removed():
    """Material originals written by this run's tests live in a folder of their own (the
    `materials` storage of the test settings); remove it after the run."""
    yield
    import shutil

    from django.core.files.storage import storages

    location = getattr(storages["materials"], "location", None)
    if location and "test-media" in str(location):
        shutil.rmtree(location, ignore_errors=True)
    from django.conf import settings

    if "test-metrics" in str(settings.BRAIN_METRICS_DIR):
        shutil.rmtree(settings.BRAIN_METRICS_DIR, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _recall_helper_connections_closed(django_db_setup):
    """memory_search's helper threads keep database connections of their own; close them before
    the test database is dropped (a database with open connections cannot be)."""
    yield
    from memory.recall.search import close_helper_connections

    close_helper_connections()
