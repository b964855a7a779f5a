import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import AuditEvent
from memory.gate.services import score_answer
from memory.models import EvalDataset

CASES = [
    {
        "id": "vpn-fix",
        "input": "Which client fixes VPN-4012?",
        "expect": {"contains": ["5.2.1"], "excludes": ["5.1.0"]},
    },
    {
        "id": "greeting",
        "input": {"turn": "Hi", "history": [{"role": "user", "content": "hello"}]},
        "expect": {"regex": ["(?i)hello|hi"]},
    },
    {"id": "no-expectations", "input": "anything"},
]


def create(world, name="memory-gate-copilot", cases=CASES, who="admin"):
    return world.client(who).post(
        "/api/eval-datasets", {"name": name, "kind": "agent_turn", "cases": cases}, format="json"
    )


def test_admin_creates_reads_replaces_and_deletes_a_dataset(world):
    response = create(world)
    assert response.status_code == 201
    body = response.json()
    assert [c["id"] for c in body["cases"]] == ["vpn-fix", "greeting", "no-expectations"]
    assert body["cases"][0]["input"] == {"turn": "Which client fixes VPN-4012?", "history": []}
    admin = world.client("admin")
    assert admin.get("/api/eval-datasets/memory-gate-copilot").json()["version"] == 1
    put = admin.put(
        "/api/eval-datasets/memory-gate-copilot", {"kind": "agent_turn", "cases": CASES[:1]}, format="json"
    )
    assert put.status_code == 200 and put.json()["version"] == 2
    assert admin.delete("/api/eval-datasets/memory-gate-copilot").status_code == 204
    assert admin.get("/api/eval-datasets/memory-gate-copilot").status_code == 404
    actions = list(AuditEvent.objects.filter(object_type="eval_dataset").values_list("action", flat=True))
    assert sorted(actions) == ["eval_dataset.created", "eval_dataset.deleted", "eval_dataset.updated"]


@pytest.mark.parametrize("who,status", [("reviewer", 403), ("copilot", 403), ("integration", 403)])
def test_only_admins_manage_datasets(world, who, status):
    assert create(world, who=who).status_code == status
    assert not EvalDataset.objects.exists()


@pytest.mark.parametrize(
    "cases,field",
    [
        ("not a list", "cases"),
        ([{"input": "no id"}], "cases"),
        ([{"id": "x", "input": ""}], "cases"),
        ([{"id": "x", "input": "q", "expect": {"regex": ["("]}}], "cases"),
        ([{"id": "x", "input": "q", "expect": {"contain": ["typo"]}}], "cases"),
        ([{"id": "x", "input": "q"}, {"id": "x", "input": "q"}], "cases"),
    ],
)
def test_invalid_datasets_get_400_and_write_nothing(world, cases, field):
    response = create(world, cases=cases)
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert not EvalDataset.objects.exists()


def test_bad_name_and_duplicate_name(world):
    assert create(world, name="Bad Name").status_code == 400
    assert create(world).status_code == 201
    assert create(world).status_code == 400


def test_a_stale_version_is_refused(world):
    create(world)
    admin = world.client("admin")
    admin.put("/api/eval-datasets/memory-gate-copilot", {"cases": CASES, "version": 1}, format="json")
    response = admin.put(
        "/api/eval-datasets/memory-gate-copilot", {"cases": CASES[:1], "version": 1}, format="json"
    )
    assert response.status_code == 400
    assert len(EvalDataset.objects.get().cases) == 3


@pytest.mark.parametrize(
    "answer,expect,failures",
    [
        ("Install client 5.2.1.", {"contains": ["5.2.1"]}, 0),
        ("Install client 5.1.0.", {"contains": ["5.2.1"], "excludes": ["5.1.0"]}, 2),
        ("HELLO there", {"contains": ["hello"]}, 0),
        ("v5.2.1", {"regex": [r"5\.2\.\d"]}, 0),
        ("v5.3", {"regex": [r"5\.2\.\d"]}, 1),
    ],
)
def test_scoring(answer, expect, failures):
    assert len(score_answer(answer, expect)) == failures


def test_console_import_and_export_jsonl(client, world):
    client.force_login(world.admin)
    jsonl = "".join(json.dumps(c) + "\n" for c in CASES)
    upload = SimpleUploadedFile("cases.jsonl", jsonl.encode(), content_type="application/x-ndjson")
    response = client.post("/gate/datasets/", {"name": "memory-gate", "file": upload})
    assert response.status_code == 302
    assert len(EvalDataset.objects.get(name="memory-gate").cases) == 3
    export = client.get("/gate/datasets/memory-gate/export.jsonl")
    lines = export.content.decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["vpn-fix", "greeting", "no-expectations"]


def test_console_refuses_bad_uploads(client, world):
    client.force_login(world.admin)
    png = SimpleUploadedFile("cases.png", b"\x89PNG", content_type="image/png")
    assert client.post("/gate/datasets/", {"name": "memory-gate", "file": png}).status_code == 400
    big = SimpleUploadedFile("cases.jsonl", b"x" * (1024 * 1024 + 1), content_type="application/x-ndjson")
    assert client.post("/gate/datasets/", {"name": "memory-gate", "file": big}).status_code == 400
    broken = SimpleUploadedFile(
        "cases.jsonl", b'{"id": "a", "input": "q"}\n{oops\n', content_type="text/plain"
    )
    response = client.post("/gate/datasets/", {"name": "memory-gate", "file": broken})
    assert response.status_code == 400
    assert b"line 2" in response.content
    assert not EvalDataset.objects.exists()


def test_console_edit_with_stale_version_keeps_the_newer_cases(client, world):
    create(world)
    client.force_login(world.admin)
    jsonl = json.dumps(CASES[0]) + "\n"
    assert (
        client.post("/gate/datasets/memory-gate-copilot/", {"cases": jsonl, "version": "1"}).status_code
        == 302
    )
    response = client.post("/gate/datasets/memory-gate-copilot/", {"cases": "", "version": "1"})
    assert response.status_code == 400
    assert len(EvalDataset.objects.get().cases) == 1


def test_reviewers_see_the_gate_page_but_not_the_dataset_editor(client, world):
    client.force_login(world.reviewer)
    assert client.get("/gate/").status_code == 200
    assert client.get("/gate/datasets/").status_code == 403
