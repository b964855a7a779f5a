"""`Brain(url, token)`: the REST API as methods, grouped as the API is (memory, messages,
conversations, skills, entries, materials, runs).

Retries: 429 and 503 mean the request was not carried out, so every request is retried on them
(waiting the server's Retry-After, else an exponential backoff), up to `retries` times. Other
5xx answers and broken connections are retried only for requests that are safe to repeat:
reads, and writes the server stores once by an idempotency key (messages and task outcomes with
an `external_id`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from brain_client.errors import BrainError, RateLimited, error_for
from brain_client.models import (
    CompiledContext,
    Conversation,
    Me,
    Memo,
    Memory,
    MessagesStored,
    MessageStored,
    Model,
    Page,
    SearchResults,
)

F = TypeVar("F", bound=Callable[..., Any])

# (method, path template) of every API operation this client calls: the test suite checks that
# every operation an agent token may call is here.
OPERATIONS: set[tuple[str, str]] = set()


def operation(method: str, path: str) -> Callable[[F], F]:
    OPERATIONS.add((method, path))

    def mark(fn: F) -> F:
        fn.operation = (method, path)  # type: ignore[attr-defined]
        return fn

    return mark


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _seg(value: Any) -> str:
    return quote(str(value), safe="")


class Brain:
    """A client for one token. `agent` defaults to the token's agent (asked once, from
    `/api/me`) wherever the API names the agent in the path."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        agent: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ):
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )
        self._agent = agent
        self.retries = retries
        self.backoff = backoff
        self.memory = MemoryAPI(self)
        self.messages = MessagesAPI(self)
        self.conversations = ConversationsAPI(self)
        self.skills = SkillsAPI(self)
        self.entries = EntriesAPI(self)
        self.materials = MaterialsAPI(self)
        self.runs = RunsAPI(self)
        self.events = EventsAPI(self)

    # --- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def agent(self) -> str:
        if self._agent is None:
            me = self.me()
            if me.kind != "agent":
                raise ValueError("This token is not an agent's: pass agent= to Brain().")
            self._agent = me.name
        return self._agent

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool | None = None,
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> Any:
        """One API call: the decoded JSON answer (None for 204; the body's bytes with `raw`), or
        a BrainError subclass. `files` and `data` send a multipart form."""
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT", "DELETE")
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method, path, json=json, params=_clean(params or {}) or None, files=files, data=data
                )
            except httpx.TransportError as exc:
                if idempotent and attempt < self.retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                raise BrainError(0, f"No answer from Brain: {exc}") from exc
            retryable = response.status_code in (429, 503) or (idempotent and response.status_code >= 500)
            if retryable and attempt < self.retries:
                self._sleep(attempt, response.headers.get("retry-after"))
                attempt += 1
                continue
            if raw and response.is_success:
                return response.content
            if response.is_success and (response.status_code == 204 or not response.content):
                return None
            try:
                body = response.json()
            except ValueError:
                body = response.text
            if not response.is_success:
                raise error_for(response.status_code, body, dict(response.headers))
            return body

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        wait = None
        if retry_after is not None:
            try:
                wait = float(retry_after)
            except ValueError:
                wait = None
        time.sleep(wait if wait is not None else self.backoff * (2**attempt))

    # --- the token and the service ------------------------------------------------------------

    @operation("GET", "/api/me")
    def me(self) -> Me:
        return Me.from_dict(self.request("GET", "/api/me"))

    @operation("GET", "/api/status")
    def status(self) -> dict[str, Any]:
        return self.request("GET", "/api/status")

    def context(self, **kwargs: Any) -> CompiledContext:
        """Shortcut for `memory.context(...)`."""
        return self.memory.context(**kwargs)


class _Group:
    def __init__(self, brain: Brain):
        self._brain = brain

    def _req(self, *args: Any, **kwargs: Any) -> Any:
        return self._brain.request(*args, **kwargs)


class MemoryAPI(_Group):
    @operation("POST", "/api/memory")
    def write(
        self,
        text: str | None = None,
        *,
        scope: str = "agent",
        sources: list[dict[str, str]] | None = None,
        **fields: Any,
    ) -> Memory:
        """Write a memory (`scope`: agent, shared, private:<person>, channel:<channel>); other
        fields as the API takes them: tier, category, key, value, confidence, supersedes,
        valid_from, valid_to, expires_at, run_id, turn, event_id, conversation."""
        body = _clean({"text": text, "scope": scope, "sources": sources, **fields})
        return Memory.from_dict(self._req("POST", "/api/memory", json=body))

    @operation("POST", "/api/memory/search")
    def search(
        self,
        q: str,
        *,
        conversation: int | None = None,
        channel: str | None = None,
        k: int | None = None,
        budget_tokens: int | None = None,
        **fields: Any,
    ) -> SearchResults:
        """Hybrid recall inside a conversation's (or a channel's) scope."""
        body = _clean(
            {
                "agent": self._brain.agent,
                "q": q,
                "conversation": conversation,
                "channel": channel,
                "k": k,
                "budget_tokens": budget_tokens,
                **fields,
            }
        )
        return SearchResults.from_dict(self._req("POST", "/api/memory/search", json=body, idempotent=True))

    @operation("GET", "/api/memory/browse/{kind}/{id}")
    def browse(self, kind: str, id: int, *, conversation: int | None = None) -> dict[str, Any]:
        """The full thread, episode, entry, memory or conversation behind a search result."""
        return self._req(
            "GET", f"/api/memory/browse/{_seg(kind)}/{int(id)}", params={"conversation": conversation}
        )

    @operation("POST", "/api/agents/{agent}/context")
    def context(
        self,
        *,
        q: str = "",
        conversation: int | None = None,
        channel: str | None = None,
        budget_tokens: int | None = None,
        now: str | None = None,
        history_turns: int | None = None,
    ) -> CompiledContext:
        """What goes into the agent's prompt for one turn, within `budget_tokens`; the history
        section holds the conversation's last `history_turns` turns (default 4, 0: none)."""
        body = _clean(
            {
                "q": q,
                "conversation": conversation,
                "channel": channel,
                "budget_tokens": budget_tokens,
                "now": now,
                "history_turns": history_turns,
            }
        )
        path = f"/api/agents/{_seg(self._brain.agent)}/context"
        return CompiledContext.from_dict(self._req("POST", path, json=body, idempotent=True))

    @operation("GET", "/api/agents/{agent}/memo")
    def memo(self) -> Memo:
        return Memo.from_dict(self._req("GET", f"/api/agents/{_seg(self._brain.agent)}/memo"))

    @operation("GET", "/api/memory/{memory_id}")
    def get(self, memory_id: int) -> Memory:
        """One memory with its versions (in `extra["versions"]`)."""
        return Memory.from_dict(self._req("GET", f"/api/memory/{int(memory_id)}"))

    @operation("DELETE", "/api/memory/{memory_id}")
    def delete(self, memory_id: int, *, reason: str | None = None) -> Memory:
        """Retire a memory: the agent's own (a reviewer's token: any) leaves recall at once.
        Reversible (an admin restores it from the audit trail); nothing is erased."""
        return Memory.from_dict(
            self._req("DELETE", f"/api/memory/{int(memory_id)}", params={"reason": reason})
        )

    @operation("GET", "/api/memory")
    def list(self, *, page: int = 1, page_size: int = 50, **filters: Any) -> Page[Memory]:
        """One page of the memories this token may read (filters: status, tier, category,
        store, agent, key, q, stale, pinned), newest first."""
        body = self._req("GET", "/api/memory", params={"page": page, "page_size": page_size, **filters})
        return Page(
            count=body["count"],
            page=body["page"],
            page_size=body["page_size"],
            pages=body["pages"],
            results=[Memory.from_dict(m) for m in body["results"]],
        )

    def iter(self, *, page_size: int = 100, **filters: Any) -> Iterator[Memory]:
        """Every memory matching `filters`, page after page."""
        page = 1
        while True:
            batch = self.list(page=page, page_size=page_size, **filters)
            yield from batch.results
            if page >= batch.pages:
                return
            page += 1

    @operation("GET", "/api/memory-provenance/{memory_id}")
    def provenance(self, memory_id: int) -> dict[str, Any]:
        """A memory's sources with their recorded and current fingerprints."""
        return self._req("GET", f"/api/memory-provenance/{int(memory_id)}")

    @operation("GET", "/api/memory-provenance/stale")
    def stale(self, *, limit: int | None = None, offset: int | None = None, **filters: Any) -> dict[str, Any]:
        return self._req(
            "GET", "/api/memory-provenance/stale", params={"limit": limit, "offset": offset, **filters}
        )


class MessagesAPI(_Group):
    @operation("POST", "/api/messages")
    def post(
        self,
        channel: str,
        speaker: str,
        text: str,
        *,
        thread: str | None = None,
        ts: str | None = None,
        external_id: str | None = None,
    ) -> MessageStored:
        """Post one message. With `external_id` it is stored once (a repeat answers
        `duplicate=True`), so the call is safe to retry."""
        body = _clean(
            {
                "channel": channel,
                "speaker": speaker,
                "text": text,
                "thread": thread,
                "ts": ts,
                "external_id": external_id,
            }
        )
        answer = self._req("POST", "/api/messages", json=body, idempotent=bool(external_id))
        return MessageStored.from_dict(answer)

    def post_many(self, messages: list[dict[str, Any]]) -> MessagesStored:
        """Post up to 1,000 messages in one request (each a dict of `post`'s fields)."""
        idempotent = all(m.get("external_id") for m in messages)
        answer = self._req("POST", "/api/messages", json={"messages": messages}, idempotent=idempotent)
        return MessagesStored.from_dict(answer)


class ConversationsAPI(_Group):
    @operation("POST", "/api/conversations")
    def open(self, channel: str, *, thread: str = "") -> Conversation:
        """Open a conversation of this agent in `channel`; its scope is fixed now."""
        body = {"agent": self._brain.agent, "channel": channel, "thread": thread}
        return Conversation.from_dict(self._req("POST", "/api/conversations", json=body))

    @operation("GET", "/api/conversations/{id}")
    def get(self, conversation_id: int) -> Conversation:
        return Conversation.from_dict(self._req("GET", f"/api/conversations/{int(conversation_id)}"))

    @operation("POST", "/api/conversations/{id}/finish")
    def finish(self, conversation_id: int) -> Conversation:
        """Finish it (its working memory is cleared; 409 if it was finished already)."""
        return Conversation.from_dict(self._req("POST", f"/api/conversations/{int(conversation_id)}/finish"))


class SkillsAPI(_Group):
    @operation("GET", "/api/skills")
    def list(self) -> list[dict[str, Any]]:
        return self._req("GET", "/api/skills")["results"]

    @operation("GET", "/api/skills/{skill}")
    def get(self, skill: str) -> dict[str, Any]:
        return self._req("GET", f"/api/skills/{_seg(skill)}")

    @operation("GET", "/api/agents/{agent}/skills")
    def mine(self) -> list[dict[str, Any]]:
        """This agent's skills: enabled or not, lessons, overlay tokens."""
        return self._req("GET", f"/api/agents/{_seg(self._brain.agent)}/skills")["results"]

    @operation("GET", "/api/agents/{agent}/skills/{skill}")
    def load(self, skill: str) -> dict[str, Any]:
        """What the agent receives when the skill loads: base instructions, then its lessons."""
        return self._req("GET", f"/api/agents/{_seg(self._brain.agent)}/skills/{_seg(skill)}")

    @operation("POST", "/api/agents/{agent}/skills/{skill}/experience")
    def experience(
        self, skill: str, lesson: str, *, sources: list[dict[str, str]], revises: int | None = None
    ) -> dict[str, Any]:
        """Add a lesson to this agent's overlay of `skill` (sources: a task outcome, message or
        conversation of this agent)."""
        body = _clean({"lesson": lesson, "sources": sources, "revises": revises})
        return self._req(
            "POST", f"/api/agents/{_seg(self._brain.agent)}/skills/{_seg(skill)}/experience", json=body
        )

    @operation("POST", "/api/task-outcomes")
    def outcome(
        self,
        skill: str,
        task: str,
        result: str,
        *,
        conversation: int | None = None,
        steps: list[str] | None = None,
        correction: dict[str, str] | None = None,
        external_id: str | None = None,
    ) -> dict[str, Any]:
        """Report how a task went (result: success, failure, recovered, corrected). With
        `external_id` a repeat stores nothing and answers the stored outcome."""
        body = _clean(
            {
                "skill": skill,
                "task": task,
                "result": result,
                "conversation": conversation,
                "steps": steps,
                "correction": correction,
                "external_id": external_id,
            }
        )
        return self._req("POST", "/api/task-outcomes", json=body, idempotent=bool(external_id))

    @operation("GET", "/api/task-outcomes")
    def outcomes(self, *, skill: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        params = {"agent": self._brain.agent, "skill": skill, "limit": limit}
        return self._req("GET", "/api/task-outcomes", params=params)["results"]


class EntriesAPI(_Group):
    """Knowledge entries: one stable topic each, with body blocks and relations."""

    @operation("GET", "/api/entries")
    def list(self, *, page: int = 1, page_size: int = 50, **filters: Any) -> Page[dict[str, Any]]:
        body = self._req("GET", "/api/entries", params={"page": page, "page_size": page_size, **filters})
        return Page(
            count=body["count"],
            page=body.get("page", page),
            page_size=body.get("page_size", page_size),
            pages=body.get("pages", 1),
            results=body["results"],
        )

    def iter(self, *, page_size: int = 100, **filters: Any) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            batch = self.list(page=page, page_size=page_size, **filters)
            yield from batch.results
            if page >= batch.pages or not batch.results:
                return
            page += 1

    @operation("POST", "/api/entries")
    def create(self, name: str, **fields: Any) -> dict[str, Any]:
        """Create an entry (type, scope, aliases, summary, properties, blocks)."""
        return self._req("POST", "/api/entries", json={"name": name, **fields})

    @operation("GET", "/api/entries/{entry_id}")
    def get(self, entry_id: int) -> dict[str, Any]:
        return self._req("GET", f"/api/entries/{int(entry_id)}")

    @operation("PATCH", "/api/entries/{entry_id}")
    def update(self, entry_id: int, **fields: Any) -> dict[str, Any]:
        return self._req("PATCH", f"/api/entries/{int(entry_id)}", json=fields)

    @operation("DELETE", "/api/entries/{entry_id}")
    def delete(self, entry_id: int, *, reason: str | None = None) -> None:
        self._req("DELETE", f"/api/entries/{int(entry_id)}", params={"reason": reason})

    @operation("GET", "/api/entries/{entry_id}/projection")
    def projection(self, entry_id: int) -> dict[str, Any]:
        """The Markdown the agent reads for this entry."""
        return self._req("GET", f"/api/entries/{int(entry_id)}/projection")

    @operation("POST", "/api/entries/{entry_id}/blocks")
    def block_add(self, entry_id: int, text: str, **fields: Any) -> dict[str, Any]:
        return self._req("POST", f"/api/entries/{int(entry_id)}/blocks", json={"text": text, **fields})

    @operation("PATCH", "/api/entries/{entry_id}/blocks/{block_id}")
    def block_update(self, entry_id: int, block_id: int, **fields: Any) -> dict[str, Any]:
        """Correct a block (`text` needs a `reason`), move it or change its sources."""
        return self._req("PATCH", f"/api/entries/{int(entry_id)}/blocks/{int(block_id)}", json=fields)

    @operation("DELETE", "/api/entries/{entry_id}/blocks/{block_id}")
    def block_remove(self, entry_id: int, block_id: int, *, reason: str | None = None) -> None:
        self._req("DELETE", f"/api/entries/{int(entry_id)}/blocks/{int(block_id)}", params={"reason": reason})

    @operation("POST", "/api/entries/{entry_id}/relations")
    def relation_add(self, entry_id: int, predicate: str, target: int, **fields: Any) -> dict[str, Any]:
        body = {"predicate": predicate, "target": target, **fields}
        return self._req("POST", f"/api/entries/{int(entry_id)}/relations", json=body)

    @operation("DELETE", "/api/entries/{entry_id}/relations/{relation_id}")
    def relation_remove(self, entry_id: int, relation_id: int, *, reason: str | None = None) -> None:
        path = f"/api/entries/{int(entry_id)}/relations/{int(relation_id)}"
        self._req("DELETE", path, params={"reason": reason})

    @operation("GET", "/api/guides/{agent_name}")
    def guide(self, agent: str | None = None) -> dict[str, Any]:
        """An agent's curation guide (this agent's by default)."""
        return self._req("GET", f"/api/guides/{_seg(agent or self._brain.agent)}")


class MaterialsAPI(_Group):
    """Sources this agent is asked to learn: the original is stored first, then learned into
    entries that cite it (`{"kind": "material", "ref": material["ref"]}`)."""

    @operation("POST", "/api/materials")
    def learn_file(
        self, content: bytes, filename: str, *, scope: str = "shared", title: str | None = None
    ) -> dict[str, Any]:
        """Upload a file (plain text, Markdown, HTML, PDF, DOCX); learning runs as a job."""
        form = _clean({"agent": self._brain.agent, "scope": scope, "title": title})
        return self._req("POST", "/api/materials", files={"file": (filename, content)}, data=form)

    def learn_text(
        self, title: str, *, text: str | None = None, html: str | None = None, scope: str = "shared"
    ) -> dict[str, Any]:
        """Pasted text or web content (HTML): learned at once; the answer's `entry` is the new entry."""
        body = _clean(
            {"title": title, "text": text, "html": html, "agent": self._brain.agent, "scope": scope}
        )
        return self._req("POST", "/api/materials", json=body)

    @operation("GET", "/api/materials")
    def list(self, *, state: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        return self._req("GET", "/api/materials", params={"state": state, "kind": kind})["results"]

    @operation("GET", "/api/materials/{material_id}")
    def get(self, material_id: int) -> dict[str, Any]:
        """The material, its versions and the entries citing it."""
        return self._req("GET", f"/api/materials/{int(material_id)}")

    @operation("GET", "/api/materials/{material_id}/original")
    def original(self, material_id: int, *, version: int | None = None) -> bytes:
        """The stored original's bytes, exactly."""
        return self._req(
            "GET", f"/api/materials/{int(material_id)}/original", params={"version": version}, raw=True
        )

    @operation("POST", "/api/materials/{material_id}/retry")
    def retry(self, material_id: int, *, again: bool = False) -> dict[str, Any]:
        """Retry a failed (or stuck) learning; `again` learns a learned material again."""
        return self._req("POST", f"/api/materials/{int(material_id)}/retry", json={"again": again})


class RunsAPI(_Group):
    @operation("POST", "/api/runs/{run_id}/finish")
    def finish(self, run_id: str) -> dict[str, Any]:
        """Clear the run's working memory (finishing twice clears nothing more)."""
        return self._req("POST", f"/api/runs/{_seg(run_id)}/finish", json={}, idempotent=True)


class EventsAPI(_Group):
    @operation("GET", "/api/events")
    def read(
        self, *, after: str = "0-0", limit: int | None = None, types: list[str] | None = None
    ) -> dict[str, Any]:
        """Memory events after cursor `after`, oldest first: `{events, next_cursor, has_more}`.
        Keep `next_cursor` and pass it as `after` next time to miss nothing."""
        params = _clean({"after": after, "limit": limit, "types": ",".join(types) if types else None})
        return self._req("GET", "/api/events", params=params)

    def iter(self, *, after: str = "0-0", types: list[str] | None = None) -> Iterator[dict[str, Any]]:
        """Every event after `after` that is visible now, page by page (each carries its `cursor`)."""
        while True:
            page = self.read(after=after, limit=500, types=types)
            yield from page["events"]
            after = page["next_cursor"]
            if not page["has_more"]:
                return


__all__ = ["OPERATIONS", "Brain", "Model", "RateLimited"]
