"""Console: the header search (reviewers and admins). One page, grouped by kind; the same view
answers htmx with the results only."""

from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from curation.search.selectors import MAX_QUERY, PER_KIND, site_search
from knowledge import names
from knowledge.principals.permissions import reviewer_required


@vary_on_headers("HX-Request")
@reviewer_required
@require_GET
def search_page(request):
    q = request.GET.get("q", "").strip()[:MAX_QUERY]
    owner = names.owner_selected(request.session.get("owner"))
    groups = site_search(request.principal, q, owner=owner)
    template = "curation/search/search.html"
    if request.htmx and request.htmx.target == "search-results":
        template += "#results"
    return render(
        request,
        template,
        {
            "q": q,
            "groups": groups,
            "owner": owner,
            "per_kind": PER_KIND,
            "total": sum(len(g.items) for g in groups),
        },
    )
