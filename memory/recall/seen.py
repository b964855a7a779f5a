"""What a search process remembers about the data between searches, and how to make it forget.

Below both the routes and the keyword scoring (memory.recall.terms), so neither imports the
other to reset it. Keyword statistics are never cached: they are read with every search."""

import time

from knowledge.models import Episode

_episodes_seen = {"at": -1e9, "any": False}
EPISODE_CHECK_SECONDS = 60


def episodes_exist() -> bool:
    """Whether stage A has made any episode yet (checked at most once a minute per process):
    until then the episode half of the route costs nothing."""
    now = time.monotonic()
    if not _episodes_seen["any"] and now - _episodes_seen["at"] > EPISODE_CHECK_SECONDS:
        _episodes_seen.update(at=now, any=Episode.objects.exists())
    return _episodes_seen["any"]


def forget_stats() -> None:
    """Forget per-process knowledge about the data (tests, and after a bulk load): whether any
    episode exists yet."""
    _episodes_seen.update(at=-1e9, any=False)
