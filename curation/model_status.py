"""The Status tab's "Models" section (kept small): whether each configured profile's endpoint
answered the background check (knowledge.llm.reach), and the distiller's failed conversations
with their reasons. Registered from curation/apps.py; also in GET /api/status as `models`."""

from django.urls import reverse

from curation.models import DistillerRun
from knowledge.llm.profiles import endpoint_state, profile_names, profile_resolve


def models_status() -> dict:
    profiles = []
    for name in profile_names():
        profile = profile_resolve(name)
        if profile.missing:
            continue
        state = endpoint_state(name, profile.base_url)
        reach = (
            "unchecked"
            if state is None or state.reachable is None
            else ("unreachable" if not state.reachable else "busy" if state.reach_error else "reachable")
        )
        profiles.append(
            {
                "name": name,
                "base_url": profile.base_url,
                "model": profile.model,
                "endpoint": reach,
                "error": state.reach_error if state else "",
                "checked_at": state.checked_at.isoformat() if state and state.checked_at else None,
                "context_tokens": profile.context_tokens,
                "structured_output": profile.structured_output,
            }
        )
    failed = DistillerRun.objects.filter(state=DistillerRun.FAILED).order_by("-finished_at", "-id")
    return {
        "profiles": profiles,
        "distiller_failed": failed.count(),
        "distiller_failures": [
            {
                "conversation": r.conversation_id,
                "attempts": r.attempts,
                "final": r.attempts >= DistillerRun.MAX_ATTEMPTS,
                "reason": r.reason[:300],
                "at": r.finished_at.isoformat() if r.finished_at else None,
            }
            for r in failed[:5]
        ],
    }


def models_alerts(report: dict) -> list[dict]:
    """One alert per cause: a model server that does not answer is one alert naming every
    profile it serves (not one per profile, and never called a budget)."""
    down: dict[str, list[dict]] = {}
    for p in report["profiles"]:
        if p["endpoint"] == "unreachable":
            down.setdefault(p.get("base_url", p["name"]), []).append(p)
    alerts = []
    for where, profiles in down.items():
        names = " and ".join(p["name"] for p in profiles)
        since = (
            f" since {profiles[0]['checked_at'][:16].replace('T', ' ')} UTC"
            if profiles[0]["checked_at"]
            else ""
        )
        alerts.append(
            {
                "level": "error",
                "text": f"The model server at {where} does not answer{since} ({profiles[0]['error']}): "
                f"the {names} profile{'s' if len(profiles) > 1 else ''} wait until it does.",
                "fix": {"label": "Check the server on the Models page", "url": reverse("model-list")},
            }
        )
    if report["distiller_failed"]:
        # An agent's or integration's report keeps the count but lists none of the failures
        # (they name other agents' conversations): the alert then says only how many.
        listed = report["distiller_failures"]
        last = f"; the last: {listed[0]['reason']}" if listed else ""
        alerts.append(
            {
                "level": "warning",
                "text": f"The distiller failed on {report['distiller_failed']} conversation(s){last}",
            }
        )
    return alerts
