"""Console pages for the eval gate: verdicts (regressions first) and the dataset editor."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from knowledge import access
from knowledge.errors import Invalid
from knowledge.principals.permissions import admin_required, reviewer_required
from knowledge.settings_store import setting_get
from knowledge.web import error_text
from memory.gate import datasets as eval_datasets
from memory.gate.services import gate_check_queue
from memory.models import EvalDataset, GateCheck

MAX_UPLOAD_BYTES = 1024 * 1024
UPLOAD_TYPES = {
    "application/json",
    "application/jsonl",
    "application/x-ndjson",
    "text/plain",
    "application/octet-stream",
    "",
}


def _jsonl_from_request(request) -> str:
    """The cases text: an uploaded .jsonl file (size- and type-checked) or the textarea."""
    upload = request.FILES.get("file")
    if upload is None:
        return request.POST.get("cases", "")
    if upload.size > MAX_UPLOAD_BYTES:
        raise Invalid({"file": ["The file is larger than 1 MiB."]})
    if (
        not upload.name.lower().endswith((".jsonl", ".json", ".ndjson", ".txt"))
        or upload.content_type not in UPLOAD_TYPES
    ):
        raise Invalid({"file": ["Upload a .jsonl file (one JSON case per line)."]})
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid({"file": ["The file is not UTF-8 text."]})


@reviewer_required
def gate_page(request):
    verdict = request.GET.get("verdict", GateCheck.REGRESSED)
    checks = GateCheck.objects.select_related("memory__owner")
    if verdict in dict(GateCheck.VERDICTS):
        checks = checks.filter(verdict=verdict)
    owner = request.session.get("owner")
    if owner:
        checks = checks.filter(memory__owner__name=owner)
    page = Paginator(checks, 25).get_page(request.GET.get("page"))
    return render(
        request,
        "memory/gate/gate.html",
        {
            "page": page,
            "verdict": verdict,
            "verdicts": [v for v, _ in GateCheck.VERDICTS],
            "mode": setting_get("BRAIN_MEMORY_ACTIVATION_GATE"),
        },
    )


@admin_required
def dataset_list(request):
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        try:
            cases = eval_datasets.cases_from_jsonl(_jsonl_from_request(request))
            eval_datasets.dataset_create(actor=request.principal, name=name, kind="agent_turn", cases=cases)
        except Invalid as exc:
            messages.error(request, error_text(exc))
            return render(
                request,
                "memory/gate/datasets.html",
                {"datasets": EvalDataset.objects.all(), "name": name, "cases": request.POST.get("cases", "")},
                status=400,
            )
        messages.success(request, f"Dataset {name} created with {len(cases)} cases.")
        return redirect("dataset-edit", name=name)
    return render(request, "memory/gate/datasets.html", {"datasets": EvalDataset.objects.all()})


@admin_required
def dataset_edit(request, name):
    dataset = eval_datasets.dataset_named(name)
    text = eval_datasets.cases_to_jsonl(dataset.cases)
    if request.method == "POST":
        if request.POST.get("action") == "delete":
            eval_datasets.dataset_delete(actor=request.principal, dataset=dataset)
            messages.success(request, f"Dataset {name} deleted.")
            return redirect("dataset-list")
        text = request.POST.get("cases", "")
        try:
            version = int(request.POST.get("version", ""))
            cases = eval_datasets.cases_from_jsonl(_jsonl_from_request(request))
            eval_datasets.dataset_replace(
                actor=request.principal,
                dataset=dataset,
                kind="agent_turn",
                cases=cases,
                expected_version=version,
            )
        except ValueError:
            messages.error(request, "The form is missing its version; reload the page.")
        except Invalid as exc:
            messages.error(request, error_text(exc))
            return render(
                request, "memory/gate/dataset_edit.html", {"dataset": dataset, "text": text}, status=400
            )
        else:
            messages.success(request, f"Saved {len(cases)} cases.")
            return redirect("dataset-edit", name=name)
    return render(request, "memory/gate/dataset_edit.html", {"dataset": dataset, "text": text})


@admin_required
@require_GET
def dataset_export(request, name):
    dataset = eval_datasets.dataset_named(name)
    response = HttpResponse(eval_datasets.cases_to_jsonl(dataset.cases), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{dataset.name}.jsonl"'
    return response


@reviewer_required
@require_POST
def memory_gate_check(request, memory_id: int):
    """Check one memory with the gate from its page: queued; the job page shows the verdict and
    links back to the memory. Records the verdict, changes nothing else."""
    memory = access.memory_get_for(request.principal, memory_id)
    _, job = gate_check_queue(actor=request.principal, memory=memory)
    return redirect("model-job", job_id=job.pk)
