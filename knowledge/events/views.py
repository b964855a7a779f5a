"""Console: the Webhooks page (admins) — register and remove webhooks, and the delivery log."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from knowledge.errors import Invalid
from knowledge.events.feed import EVENT_TYPES
from knowledge.events.serializers import WebhookIn
from knowledge.events.services import webhook_create, webhook_delete, webhooks_with_counts
from knowledge.models import Webhook, WebhookDelivery
from knowledge.principals.permissions import admin_required
from knowledge.web import console_write, error_text

LOG_SIZE = 100


@admin_required
def webhook_page(request):
    form = {"url": "", "events": []}
    if request.method == "POST":
        form = {"url": request.POST.get("url", ""), "events": request.POST.getlist("events")}
        data = WebhookIn(data={**form, "secret": request.POST.get("secret", "")})
        if data.is_valid():
            v = data.validated_data
            with console_write(request, fields=False) as write:
                webhook = webhook_create(
                    actor=request.principal, url=v["url"], events=v["events"], secret=v["secret"]
                )
                write.done = f"Webhook {webhook.pk} registered for {', '.join(webhook.events)}."
            if write.ok:
                return redirect("webhooks")
        else:
            messages.error(request, error_text(Invalid(data.errors)))
    deliveries = WebhookDelivery.objects.select_related("webhook").order_by("-id")
    selected = request.GET.get("webhook", "")
    if selected.isdigit():
        deliveries = deliveries.filter(webhook_id=int(selected))
    return render(
        request,
        "knowledge/events/webhooks.html",
        {
            "webhooks": webhooks_with_counts(),
            "deliveries": deliveries[:LOG_SIZE],
            "event_types": EVENT_TYPES,
            "form": form,
            "selected": selected,
        },
    )


@admin_required
@require_POST
def webhook_remove(request, pk: int):
    webhook = get_object_or_404(Webhook, pk=pk)
    webhook_delete(actor=request.principal, webhook=webhook)
    messages.success(request, f"Webhook {pk} removed.")
    return redirect("webhooks")
