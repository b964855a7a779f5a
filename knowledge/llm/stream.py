"""A reply read as a stream (server-sent events), so a call Brain gives up on is cancelled
(issue 52): when its time is up, the stream is closed, the connection with it, and a server
like llama-cpp-python — which notices a disconnect only between streamed tokens, never during a
plain request — stops generating instead of computing a reply nobody reads while the next call
queues behind it. The chunks are put back together as one chat completion, so the caller sees
what a plain answer gives; a server that answers plain JSON anyway (an error, or one that does not
stream) is read as before."""

import json
import time

import httpx


def post_streamed(
    client: httpx.Client, url: str, *, body: dict, headers: dict, seconds: float
) -> tuple[httpx.Response, dict | None]:
    """POST `body` asking for a stream. Returns (response, payload): the assembled chat
    completion of a streamed 200, else None with the response read whole. Raises
    httpx.ReadTimeout (the stream closed: the server sees the disconnect) when the reply is not
    complete within `seconds` of the request."""
    deadline = time.monotonic() + seconds
    parts: list[str] = []
    # A connection of its own (not kept alive): after a broken stream llama-cpp-python closes
    # it, and a request sent on it again would find it reset.
    once = {**headers, "Connection": "close"}
    try:
        with client.stream("POST", url, json={**body, "stream": True}, headers=once) as response:
            kind = response.headers.get("content-type", "")
            if response.status_code != 200 or not kind.startswith("text/event-stream"):
                response.read()
                return response, None
            return response, _assembled(response, parts, deadline, seconds)
    except httpx.TransportError as exc:
        if isinstance(exc, httpx.TimeoutException) or parts:
            raise
        # The stream broke or ended before its first token. llama-cpp-python refuses a request it
        # cannot take (a prompt past its context) so, having already answered 200 (its log says
        # "Requested tokens (587) exceed context window of 512"): ask once plainly to hear why (a
        # 400 with its context size). A server that is gone refuses this too.
        return client.post(url, json=body, headers=headers), None


def _assembled(response: httpx.Response, parts: list[str], deadline: float, seconds: float) -> dict:
    finish, usage, chunks = None, None, 0
    for line in response.iter_lines():
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout(f"the reply did not finish within {seconds:g} s")
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            if finish is None:  # ended before the reply was (llama-cpp-python's interrupt_requests)
                raise httpx.RemoteProtocolError("the server ended the stream before the reply was finished")
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            continue  # a broken chunk: the text then fails its schema, and says so
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                parts.append(content)
                chunks += 1
            finish = choice.get("finish_reason") or finish
    if finish is None:  # the stream ended, no reply finished: llama-cpp-python's refusal after its 200
        raise httpx.RemoteProtocolError("the stream ended before the reply was finished")
    return {
        "choices": [{"message": {"role": "assistant", "content": "".join(parts)}, "finish_reason": finish}],
        # Without a usage chunk, one streamed chunk is one token (llama.cpp's servers stream so).
        "usage": usage or {"completion_tokens": chunks},
    }
