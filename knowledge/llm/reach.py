"""The background check of every configured profile's endpoint (a schedule, never a page
view): GET {base_url}/models answers, or the profile is `unreachable` (on Status and the Models
page, and model_availability says so, so jobs fall back instead of failing one by one). Where
the answer gives the model's context window (vLLM's `max_model_len`, llama.cpp's `n_ctx`,
`context_length`), it is kept as the profile's context unless one is set.

A server that took the connection but did not answer in time, or that Brain has a call in
flight to (knowledge.llm.slots), is `busy`, not unreachable: a one-slot server answers nothing,
not even this GET, while it generates. A busy endpoint stays reachable, so jobs wait for a slot
instead of skipping their model work; only a server that cannot be connected to, or answers
5xx, is unreachable."""

import httpx
from django.utils import timezone

from knowledge.llm.client import _tls_context
from knowledge.llm.profiles import endpoint_record, profile_names, profile_resolve
from knowledge.llm.slots import slots_taken

CHECK_TIMEOUT_SECONDS = 5.0
BUSY = "busy"
CONTEXT_FIELDS = ("max_model_len", "context_length", "n_ctx", "n_ctx_train", "context_window")


def _context_of(payload: dict, model: str) -> int | None:
    rows = payload.get("data") or payload.get("models") or []
    rows = [r for r in rows if isinstance(r, dict)]
    picked = next((r for r in rows if r.get("id") == model), rows[0] if rows else None)
    if picked is None:
        return None
    for place in (picked, picked.get("meta") or {}):
        for name in CONTEXT_FIELDS:
            value = place.get(name)
            if isinstance(value, int) and value >= 256:
                return value
    return None


def endpoints_check() -> dict[str, str]:
    """Check each configured profile's endpoint once (one GET per distinct endpoint); returns
    {profile: "reachable" | "unreachable: …"}."""
    out, seen = {}, {}
    for name in profile_names():
        profile = profile_resolve(name)
        if profile.missing:
            continue
        key = (profile.base_url, profile.api_key)
        if key not in seen:
            headers = {"Authorization": f"Bearer {profile.api_key}"} if profile.api_key else {}
            try:
                response = httpx.get(
                    f"{profile.base_url}/models",
                    headers=headers,
                    timeout=CHECK_TIMEOUT_SECONDS,
                    verify=_tls_context(),
                )
                seen[key] = ("", response.json() if response.status_code == 200 else {})
                if response.status_code >= 500:
                    seen[key] = (f"HTTP {response.status_code}", {})
            except httpx.TimeoutException as exc:
                connected = not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
                if connected or slots_taken(profile.base_url):
                    seen[key] = (_busy(profile.base_url, connected), {})
                else:
                    seen[key] = (f"{type(exc).__name__}: {exc}"[:200], {})
            except (httpx.HTTPError, ValueError) as exc:
                seen[key] = (f"{type(exc).__name__}: {exc}"[:200], {})
        error, payload = seen[key]
        busy = error.startswith(BUSY)
        fields = {"reachable": busy or not error, "reach_error": error, "checked_at": timezone.now()}
        if not error and (context := _context_of(payload, profile.model)):
            fields["context_tokens"] = context
        endpoint_record(profile, **fields)
        out[name] = "reachable" if not error else error if busy else f"unreachable: {error}"
    return out


def _busy(base_url: str, connected: bool) -> str:
    why = "it took the connection but did not answer" if connected else "Brain has a call in flight to it"
    return f"{BUSY}: {why} within {CHECK_TIMEOUT_SECONDS:g} s (generating, or queueing requests)"
