"""Console: download one agent's knowledge as a file, and import such a file (admins)."""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from knowledge import access
from knowledge.errors import DomainError
from knowledge.portability.services import agent_export, agent_import
from knowledge.principals.permissions import admin_required

MAX_FILE_BYTES = 50 * 1024 * 1024


@admin_required
@require_GET
def agent_export_file(request, name):
    agent = access.agent_named(name)
    lines = agent_export(actor=request.principal, agent=agent)
    response = HttpResponse("".join(lines), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{agent.name}.brain.jsonl"'
    return response


@admin_required
@require_POST
def agent_import_file(request):
    """Import a file from the export button (into the agent it names, or the name given). On any
    bad line nothing is written and every bad line is listed."""
    upload = request.FILES.get("file")
    errors = []
    if upload is None:
        errors = ["Choose a file exported from an agent's page."]
    elif upload.size > MAX_FILE_BYTES:
        errors = [f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB."]
    else:
        try:
            result = agent_import(
                actor=request.principal,
                lines=upload.readlines(),
                as_name=request.POST.get("as_name", "").strip(),
            )
        except DomainError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {}
            errors = [m for value in detail.values() for m in (value if isinstance(value, list) else [value])]
        else:
            written = ", ".join(f"{n} {kind}" for kind, n in result["written"].items() if n)
            messages.success(
                request,
                f"Imported into {result['agent']}: {written}."
                if written
                else "Already there: nothing changed.",
            )
            return redirect("agent-detail", name=result["agent"])
    return render(request, "knowledge/portability/import_errors.html", {"errors": errors}, status=400)
