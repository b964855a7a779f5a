"""The background check of every configured profile's endpoint (a schedule, never a page
view): GET {base_url}/models answers, or the profile is `unreachable` (on Status and the Models
page, and model_availability says so, so jobs fall back instead of failing one by one). Where
the answer gives the model's context window (vLLM's `max_model_len`, llama.cpp's `n_ctx`,
`context_length`), it is kept as the profile's context unless one is set."""

import httpx
from django.utils import timezone

from knowledge.llm.client import _tls_context
from knowledge.llm.profiles import endpoint_record, profile_names, profile_resolve

CHECK_TIMEOUT_SECONDS = 5.0
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
            except (httpx.HTTPError, ValueError) as exc:
                seen[key] = (f"{type(exc).__name__}: {exc}"[:200], {})
        error, payload = seen[key]
        fields = {"reachable": not error, "reach_error": error, "checked_at": timezone.now()}
        if not error and (context := _context_of(payload, profile.model)):
            fields["context_tokens"] = context
        endpoint_record(profile, **fields)
        out[name] = "reachable" if not error else f"unreachable: {error}"
    return out
