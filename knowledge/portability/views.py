"""Console: download one agent's knowledge as a file, and import such a file (admins): first a
preview of what the import would do, then the import itself."""

import hashlib

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from knowledge import names
from knowledge.errors import DomainError
from knowledge.limits import AGENT_FILE_MAX_BYTES
from knowledge.portability.services import agent_export, agent_import
from knowledge.principals.permissions import admin_required

MAX_FILE_BYTES = AGENT_FILE_MAX_BYTES


@admin_required
@require_GET
def agent_export_file(request, name):
    agent = names.agent_named(name)
    lines = agent_export(actor=request.principal, agent=agent)
    response = HttpResponse("".join(lines), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{agent.name}.brain.jsonl"'
    return response


def _previewed(data: bytes, options: dict) -> str:
    """What a preview was of: the file's bytes and the options, so an import runs only after a
    preview of exactly that file with exactly those options."""
    digest = hashlib.sha256(data)
    digest.update(repr(sorted(options.items())).encode())
    return digest.hexdigest()


@admin_required
@require_POST
def agent_import_file(request):
    """Import a file from the export button (into the agent it names, or the name given). The
    first submission previews (counts by store, what is already present, what is left out or
    kept) and writes nothing; the import runs when the same file is sent again with the same
    options from that preview. On any bad line nothing is written and every bad line is listed."""
    upload = request.FILES.get("file")
    errors = []
    if upload is None:
        errors = ["Choose a file exported from an agent's page."]
    elif upload.size > MAX_FILE_BYTES:
        errors = [f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB."]
    else:
        data = upload.read()
        options = {
            "as_name": request.POST.get("as_name", "").strip(),
            "replace": request.POST.get("replace") == "on",
            "with_shared": request.POST.get("with_shared") == "on",
        }
        previewed = _previewed(data, options)
        confirmed = request.POST.get("previewed") == previewed
        try:
            result = agent_import(
                actor=request.principal, lines=data.splitlines(), preview=not confirmed, **options
            )
        except DomainError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"file": [str(exc.detail)]}
            errors = [m for value in detail.values() for m in (value if isinstance(value, list) else [value])]
        else:
            if not confirmed:
                context = {"plan": result, "options": options, "previewed": previewed, "name": upload.name}
                return render(request, "knowledge/portability/import_preview.html", context)
            written = ", ".join(f"{n} {kind}" for kind, n in result["written"].items() if n)
            kept = (
                f" Did not write the file's {' and '.join(result['kept'])} into the existing agent."
                if result["kept"]
                else ""
            )
            messages.success(
                request,
                (
                    f"Imported into {result['agent']}: {written}."
                    if written
                    else "Already there: nothing changed."
                )
                + kept,
            )
            return redirect("agent-detail", name=result["agent"])
    return render(request, "knowledge/portability/import_errors.html", {"errors": errors}, status=400)
