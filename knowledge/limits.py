"""Limits on what a client may store, shared by the API and the console."""

import json

# One memory's text and value, on every route (knowledge.memories.rows.memory_content_errors).
MAX_MEMORY_TEXT = 20_000
MAX_JSON_VALUE_BYTES = 64 * 1024
MAX_JSON_DEPTH = 32
# An agent file (knowledge.portability) imported in the console.
AGENT_FILE_MAX_BYTES = 50 * 1024 * 1024
# The deepest page (and offset) a list may be asked for: far past any real listing, and far
# below PostgreSQL's bigint, which a 20-digit page once overflowed as a 500.
MAX_PAGE = 1_000_000
MAX_OFFSET = 100_000_000


def console_page(value) -> int:
    """The console's `page` query parameter: a whole number from 1 to MAX_PAGE, anything else
    the nearest of those (a console link never fails on a hand-edited page)."""
    try:
        return min(MAX_PAGE, max(1, int(value or 1)))
    except ValueError:
        return 1


def json_depth(value) -> int:
    """How deeply `value` nests lists and objects (a scalar: 0). Iterative, so no input can
    exhaust the stack."""
    return json_scan(value)[0]


def json_scan(value) -> tuple[int, bool]:
    """(depth, whether any key or string holds a NUL character — PostgreSQL text cannot store
    one) of a parsed JSON value, iteratively."""
    depth, nul, stack = 0, False, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            nul = nul or "\x00" in item
            continue
        if isinstance(item, dict):
            nul = nul or any("\x00" in key for key in item)
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth = max(depth, level)
        stack.extend((child, level + 1) for child in children)
    return depth, nul


def json_size_error(value, *, max_bytes: int = MAX_JSON_VALUE_BYTES) -> str | None:
    """Why `value` is too large or too deep to store as a JSON value, or None."""
    if json_depth(value) > MAX_JSON_DEPTH:
        return f"Nests deeper than {MAX_JSON_DEPTH} levels."
    size = len(json.dumps(value, separators=(",", ":"), default=str).encode())
    if size > max_bytes:
        return f"Is {size:,} bytes as JSON; at most {max_bytes:,} are stored."
    return None
