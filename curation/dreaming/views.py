"""Console: run stage A for one channel now, from the Status tab's stage A section (admins)."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from curation.dreaming.services import ChannelBusy, stage_a_run
from curation.models import DreamingRun
from knowledge.models import Channel
from knowledge.permissions import admin_required


@admin_required
@require_POST
def stage_a_run_page(request, name):
    channel = get_object_or_404(Channel, name=name)
    try:
        run = stage_a_run(
            channel=channel,
            trigger=DreamingRun.MANUAL,
            started_by=f"{request.principal.kind}:{request.principal.name}",
            max_seconds=60,
        )
    except ChannelBusy as exc:
        messages.error(request, str(exc))
    else:
        text = (
            f"Stage A run {run.pk} in {channel.name}: {run.state}; {run.episodes} episode(s) over "
            f"{run.messages} message(s), {run.noise} noise, {run.left} left for later."
        )
        if run.reason:
            text += f" {run.reason}"
        (messages.success if run.state == DreamingRun.DONE else messages.error)(request, text)
    return redirect("knowledge-status")
