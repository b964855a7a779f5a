"""Console: the Knowledge page's Status tab — alerts first, then the embedding configuration and
vector coverage, pinned-memo budgets, background jobs and knowledge lints (reviewers and admins;
the lints and memos follow the owner selector)."""

from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.vary import vary_on_headers

from curation.status.selectors import alerts, drain_estimate, job_status, recall_status, status_sections
from curation.status.trends import chart_svg, trends
from knowledge import names
from knowledge.entries.lints import knowledge_lints
from knowledge.principals.permissions import reviewer_required
from knowledge.replica import replica_reads


@vary_on_headers("HX-Request")
@reviewer_required
@replica_reads  # inside the login check: the session and user are read from the primary first
def status_page(request):
    owner = names.owner_selected(request.session.get("owner"))
    status = recall_status()
    jobs = job_status()
    memos = [m for m in status["pinned_memos"] if not owner or m["agent"] == owner.name]
    template = "curation/status/status.html"
    if request.htmx and request.htmx.target == "status-panel":
        template += "#panel"
    charts = [{"series": s, "svg": chart_svg(s)} for s in trends(backlog=status["backlog"] or None)]
    return render(
        request,
        template,
        {
            "checked_at": timezone.now(),
            "tab": "status",
            "owner": owner,
            "alerts": alerts(status, jobs),
            "status": status,
            # The pace while there is a backlog, or while the last minutes still embedded.
            "drain": drain_estimate(status["backlog_progress"])
            if sum(status["backlog"].values()) or status["backlog_progress"]["rate_per_second"]
            else "",
            "coverage": [
                {
                    "kind": kind,
                    **c,
                    "backlog": status["backlog"].get(kind, 0),
                    "percent": round(100 * c["embedded"] / c["total"], 1) if c["total"] else 100.0,
                }
                for kind, c in status["vector_coverage"].items()
            ],
            "sections": [
                {"template": section.template, "data": status[section.name]} for section in status_sections()
            ],
            "memos": memos,
            "jobs": jobs,
            "lints": knowledge_lints(request.principal, owner),
            "charts": charts,
        },
    )
