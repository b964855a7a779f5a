"""Typed answers. Each model lists the fields the API returns for it (tests check them against
the live API and `/api/schema/`); fields a newer server adds land in `extra`, so an older
client keeps working."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T", bound="Model")


@dataclass(kw_only=True)
class Model:
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {name: data.get(name) for name in names}
        return cls(**values, extra={k: v for k, v in data.items() if k not in names})

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)} - {"extra"}

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.field_names()}
        return {**self.extra, **out}


@dataclass(kw_only=True)
class Me(Model):
    kind: str
    name: str
    role: str | None


@dataclass(kw_only=True)
class Memory(Model):
    id: int
    agent: str
    store: str
    text: str
    key: str
    value: Any
    tier: str
    category: str
    confidence: float
    status: str
    queue_reason: str
    status_reason: str
    stale: bool
    stale_reason: str
    pinned: bool
    held_from: str | None  # when it held: valid_from, else when it was written
    held_until: str | None  # valid_to
    learned_at: str  # when Brain learned it: created_at
    valid_from: str | None
    valid_to: str | None
    expires_at: str | None
    content_hash: str
    version: int
    supersedes: int | None
    superseded_by: int | None
    sources: list[dict[str, Any]]
    author: dict[str, Any]
    conversation: int | None
    run_id: str
    turn: int | None
    event_id: str
    entry: int | None
    created_at: str
    updated_at: str
    duplicate_of: int | None = None  # set when the write repeated a live memory (nothing stored)
    written: bool | None = None  # False beside duplicate_of (its new sources were added to it)
    # A queued memory read alone: the active memories it duplicates or contradicts
    # ({"memory", "relation", "score", "why"}).
    related: list[dict[str, Any]] | None = None


@dataclass(kw_only=True)
class Conversation(Model):
    id: int
    agent: str
    channel: str
    thread: str
    status: str
    read_stores: list[str]
    write_store: str
    started_at: str
    finished_at: str | None


@dataclass(kw_only=True)
class MessageStored(Model):
    id: int
    channel: str
    external_id: str | None
    duplicate: bool


@dataclass(kw_only=True)
class MessagesStored(Model):
    received: int
    stored: int
    duplicates: int
    messages: list[MessageStored]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MessagesStored:
        out = super().from_dict(data)
        out.messages = [MessageStored.from_dict(m) for m in data.get("messages") or []]
        return out


@dataclass(kw_only=True)
class SearchResults(Model):
    query: str
    now: str
    k: int
    budget_tokens: int
    used_tokens: int
    scope: dict[str, Any]
    routes: dict[str, Any]
    results: list[dict[str, Any]]
    reranker: str = ""
    embedding_ms: float | None = None
    left_out: int = 0  # results below the relevance floor that were left out


@dataclass(kw_only=True)
class CompiledContext(Model):
    agent: str
    budget_tokens: int
    total_tokens: int
    truncated: list[str]
    sections: list[dict[str, Any]]
    query: str | None = None
    now: str | None = None
    scope: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The sections' texts joined, ready for a system prompt."""
        return "\n\n".join(s.get("text", "") for s in self.sections if s.get("text"))


@dataclass(kw_only=True)
class Memo(Model):
    agent: str
    text: str
    tokens: int
    budget_tokens: int
    version: int
    updated_at: str | None
    updated_by: str


M = TypeVar("M")


@dataclass(kw_only=True)
class Page(Generic[M]):
    """One page of a paginated list (`count` items in all, `pages` pages of `page_size`)."""

    count: int
    page: int
    page_size: int
    pages: int
    results: list[M]
