"""The API keeps its OpenAPI contract. Schemathesis generates requests from /api/schema/ for
every operation and sends them through the real WSGI application with an admin's, an agent's and
an integration's token. No answer may be a server error, and every answer's status code, content type, headers
and body must be ones the schema documents.

Each generated request is sent twice: as generated (mostly unknown ids: the error answers) and
with its path's ids pointing at objects of a small world (the success answers, whose bodies are
where a schema most often lies). Generation has a fixed seed, so a run is repeatable."""

import jsonschema
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from brainsite.wsgi import application
from knowledge.entries import services as entries
from knowledge.models import AuditEvent, Memory
from memory.gate import datasets as eval_datasets
from tests import factory
from tests.openapi import response_schema, validate

# A fixed seed: Schemathesis otherwise draws a new one each run, and it takes precedence over
# Hypothesis' derandomize.
schema = schemathesis.openapi.from_wsgi(
    "/api/schema/", application, config=schemathesis.Config.from_dict({"seed": 20261201})
)


def every_field_declared(ctx, response, case):
    """Stricter than conformance: a documented JSON body carries no field its schema leaves out."""
    body_schema = response_schema(case.operation.path, case.method, response.status_code)
    if body_schema is None:
        return None
    try:
        validate(body_schema, response.json())
    except jsonschema.ValidationError as error:
        raise AssertionError(f"{case.method} {case.operation.path} {response.status_code}: {error.message}")
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    every_field_declared,
    ignored_auth,
    unsupported_method,
    missing_required_header,
]


@pytest.fixture
def in_test_transaction():
    """Requests run in this thread on the test's connection, inside its transaction; Django's
    own test client keeps that connection open the same way, by not closing connections at
    request start and end."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def known_ids(world):
    """One object of each kind a path can name, by the path parameter's name."""
    vpn = factory.make_entry(world.copilot, name="VPN", blocks=["Client 5.2.1 fixes E4012."])
    client = factory.make_entry(world.copilot, name="VPN client")
    relation = entries.relation_add(
        actor=factory.SYSTEM,
        entry_id=vpn.pk,
        predicate="uses",
        target_id=client.pk,
        sources=[{"kind": "kb", "ref": "KB-7"}],
    )
    block = Memory.objects.filter(entry=vpn).first()
    memory = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1", store="shared")
    factory.make_queued_memory(world.copilot, "The VPN gateway moved to vpn2")
    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general, [{"speaker": "alice", "text": "VPN error E4012 again", "external_id": "m-1"}]
    )
    dataset = eval_datasets.dataset_create(
        actor=factory.SYSTEM,
        name="contract-cases",
        kind="agent_turn",
        cases=[{"id": "vpn-fix", "input": "Which client fixes E4012?", "expect": {"contains": ["5.2.1"]}}],
    )
    return {
        "entry_id": vpn.pk,
        "block_id": block.pk,
        "relation_id": relation.pk,
        "memory_id": memory.pk,
        "id": conversation.pk,
        "event_id": AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first(),
        "agent": "copilot",
        "agent_name": "copilot",
        "name": dataset.name,
        "run_id": "run-1",
    }


@pytest.fixture
def no_token_throttle(settings):
    """The ignored-auth check sends a bad token with every example; the bad-token throttle (tested
    in tests/knowledge/test_security.py) would answer those 429 once past its limit."""
    settings.BRAIN_API_BAD_TOKENS_PER_MINUTE = 1_000_000


# Also what gives each operation's test its own id ("…[GET /api/memory][every-token]"): without a
# pytest parametrization every operation's test would have the same one, and pytest-xdist would
# run one of them.
@pytest.mark.parametrize("principals", [("admin", "copilot", "integration")], ids=["every-token"])
@schema.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_answers_as_its_schema_documents(
    case, principals, world, known_ids, in_test_transaction, no_token_throttle
):
    """Each generated case goes out with every principal's token in turn. The coverage phase's
    cases (every boundary and malformed value the schema defines, about 200 an operation) go
    with an admin's and an agent's: the two principals whose permissions reach every validator;
    the integration's scopes reach a few of the same ones, and sending them a third time cost
    a third of this file's time (the whole file: 415 s before, 254 s after, one process each,
    run side by side)."""
    coverage = case.meta is not None and case.meta.phase.name == TestPhase.COVERAGE
    generated = dict(case.path_parameters or {})
    real = {name: known_ids[name] for name in generated if name in known_ids}
    paths = (generated, {**generated, **real}) if real else (generated,)
    for who in ("admin", "copilot") if coverage else principals:
        headers = {"Authorization": f"Bearer {world.tokens[who]}"}
        for path_parameters in paths:
            case.path_parameters = path_parameters
            try:
                case.call_and_validate(headers=headers, checks=CHECKS)
            except Exception as error:
                error.add_note(f"sent with the {who}'s token")
                raise
