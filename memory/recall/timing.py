"""The Server-Timing header of a search: where its time went, stage by stage."""

import time

from rest_framework.response import Response


def server_timing(stages: dict[str, float]) -> str:
    """`name;dur=ms` per stage, in the order spent (a name is a token: letters, digits, - and _)."""
    return ", ".join(f"{name.replace('_', '-')};dur={ms:.2f}" for name, ms in stages.items())


def timed_response(body: dict, stages: dict[str, float]) -> Response:
    """A Response whose Server-Timing header names `stages` and, measured when the body is
    rendered, `serialisation` (the JSON of the answer) and `total` (the scope, the search and the
    serialisation; the embedding runs beside the scope and the routes beside one another)."""
    response = Response(body)
    answered = time.perf_counter()
    total_before = stages.get("scope", 0.0) + stages.get("search", 0.0)

    def add_header(rendered):
        serialised = (time.perf_counter() - answered) * 1000
        rendered["Server-Timing"] = server_timing(
            {**stages, "serialisation": serialised, "total": total_before + serialised}
        )
        return rendered

    response.add_post_render_callback(add_header)
    return response
