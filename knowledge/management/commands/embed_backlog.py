import threading
import time

from django.core.management.base import BaseCommand, CommandError

from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import BACKLOG, backlog_counts, run_backlog


class Command(BaseCommand):
    help = (
        "Embed every text that lacks a vector from the current model (after a model change, say), "
        "printing progress. The worker does the same in the background, 50 seconds at a time; "
        "both can run at once (they never take the same rows)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--kind", action="append", choices=[k.name for k in BACKLOG], help="only this kind (repeatable)"
        )
        parser.add_argument(
            "--max-seconds", type=float, default=None, help="stop after this long (default: when done)"
        )
        parser.add_argument(
            "--lanes", type=int, default=None, help="parallel lanes (default BRAIN_EMBEDDING_LANES)"
        )
        parser.add_argument("--every", type=float, default=5.0, help="seconds between progress lines")

    def handle(self, *args, kind, max_seconds, lanes, every, **options):
        try:
            if not embeddings.enabled():
                raise CommandError("Embeddings are off (BRAIN_EMBEDDINGS=none): nothing to embed.")
            model = embeddings.model_name()
        except embeddings.EmbeddingError as exc:
            raise CommandError(str(exc)) from exc
        waiting = {name: n for name, n in backlog_counts().items() if not kind or name in kind}
        total = sum(waiting.values())
        self.stdout.write(
            f"Model {model}: {total:,} texts to embed ({', '.join(f'{n:,} {k}' for k, n in waiting.items())})."
        )
        if not total:
            self.stdout.write(self.style.SUCCESS("Nothing to embed."))
            return
        start = time.monotonic()
        state = {"done": 0, "shown": start}
        lock = threading.Lock()

        def progress(kind_name, count):
            with lock:
                state["done"] += count
                now = time.monotonic()
                if now - state["shown"] < every:
                    return
                state["shown"] = now
                rate = state["done"] / (now - start)
                left = max(total - state["done"], 0)
                self.stdout.write(
                    f"  {state['done']:,} of {total:,} ({100 * state['done'] / max(total, 1):.0f} %), "
                    f"{rate:,.0f} texts/s, about {left / rate:,.0f} s left",
                )

        result = run_backlog(
            max_seconds=max_seconds or float("inf"), kinds=kind, lanes=lanes, progress=progress
        )
        if "error" in result:
            raise CommandError(f"Stopped after {state['done']:,} texts: {result['error']}")
        spent = time.monotonic() - start
        done = sum(n for name, n in result.items() if name not in ("error", "busy"))
        if result.get("busy") and not done:
            raise CommandError(
                "Every embedding lane of this machine is taken (the worker is draining the backlog, one "
                "lane per core); its progress is on Status."
            )
        left = sum(n for name, n in backlog_counts().items() if not kind or name in kind)
        self.stdout.write(
            self.style.SUCCESS(
                f"Embedded {done:,} texts in {spent:.1f} s ({done / max(spent, 1e-9):,.0f} texts/s); {left:,} left."
            )
        )
