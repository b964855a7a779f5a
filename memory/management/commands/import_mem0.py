"""`manage.py import_mem0 FILE --agent NAME`: bring an agent's memories over from Mem0 (the JSON of
`Memory.get_all()` or of Mem0's REST export; see memory.imports.mem0). Each Mem0 user's memories
land in that person's private store (`--map` renames user ids; `--dry-run` shows where everything
would land and writes nothing). The file is checked whole first: a bad one writes nothing and
the error names its line or item; then every memory is checked before the first is written, so a
write Brain refuses also leaves nothing behind. The memories are written in one transaction, 200
to a batch (the progress bar moves per batch). Re-running imports nothing twice; a re-run that
lands memories elsewhere than an earlier run did (another --map or --scope) leaves those where
they are and says so, and `--rescope` moves them to the new stores (audited as
`memory.rescoped`, in the same transaction)."""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from knowledge import names
from knowledge.errors import DomainError
from knowledge.web import error_text
from memory.imports.mem0 import TIER, BadFile, mem0_import, mem0_parse, mem0_plan, mem0_rescope_plan


class Command(BaseCommand):
    help = "Import Mem0 memories (Memory.get_all() / REST export JSON) as an agent's Brain memories."

    def add_arguments(self, parser):
        parser.add_argument("file", help="The Mem0 export (JSON, or JSON Lines); - for stdin.")
        parser.add_argument("--agent", required=True, help="The Brain agent the memories belong to.")
        parser.add_argument(
            "--scope",
            default="agent",
            help="Where memories without a user_id land (default: the agent's own store).",
        )
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="USER_ID=PERSON",
            help="Land a Mem0 user id in this person's private store (repeatable); by default a "
            "user_id is the person's name.",
        )
        parser.add_argument(
            "--rescope",
            action="store_true",
            help="Move memories an earlier run imported into other stores to the stores this "
            "mapping names (audited).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Say where every memory would land; write nothing."
        )

    def handle(self, *args, file, agent, scope, map, rescope, dry_run, **options):
        owner = names.owner_selected(agent)
        if owner is None:
            raise CommandError(f"There is no agent named {agent}.")
        try:
            raw = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}")
        try:
            memories = mem0_parse(raw)
        except BadFile as exc:
            raise CommandError(f"{file}: {exc} Nothing was imported.")

        mapping = {}
        for pair in map:
            user_id, sep, person = pair.partition("=")
            if not sep or not user_id or not person:
                raise CommandError(f"--map {pair}: expected USER_ID=PERSON.")
            mapping[user_id] = person

        if dry_run:
            try:
                landings = mem0_plan(agent=owner, memories=memories, scope=scope, mapping=mapping)
                if rescope:
                    mem0_rescope_plan(landings)
            except DomainError as exc:
                raise CommandError(f"Refused: {error_text(exc, fields=True)} Nothing would be imported.")
            self._landings(landings, "would move here" if rescope else None)
            for landing in landings:
                person = f" · person {landing.person}" if landing.person else ""
                for memory in landing.memories:
                    self.stdout.write(
                        f"    mem0 {memory.id} → {landing.owner.name} · {landing.store}{person} · tier {TIER}"
                    )
            self.stdout.write("Dry run: nothing was written.")
            return
        bar = _Bar(self.stderr)
        try:
            result = mem0_import(
                agent=owner,
                memories=memories,
                scope=scope,
                mapping=mapping,
                rescope=rescope,
                progress=bar.show,
            )
        except DomainError as exc:
            bar.end()
            raise CommandError(f"Refused: {error_text(exc, fields=True)} Nothing was imported.")
        bar.end()
        self._landings(result.landings, "moved here" if rescope else None)
        review = f", {result.queued} waiting for review" if result.queued else ""
        repeats = (
            f"; {result.duplicates} said exactly what a memory of {owner.name} says (not stored twice)"
            if result.duplicates
            else ""
        )
        self.stdout.write(
            f"Imported {result.imported} of {len(memories)} Mem0 memories for {owner.name}{review}; "
            f"{result.skipped} were already imported{repeats}."
        )
        if result.moved:
            self.stdout.write(
                f"Moved {result.moved} memories of earlier imports to the stores this mapping names."
            )
        elif any(landing.elsewhere for landing in result.landings):
            self.stdout.write(
                "Earlier imports in other stores than this mapping names were left there; "
                "--rescope moves them."
            )

    def _landings(self, landings, moving: str | None) -> None:
        """One line per store: what lands there, what is there already, and what an earlier run
        put elsewhere (`moving`: what --rescope does with it, or None without --rescope)."""
        for landing in landings:
            person = f" (person {landing.person}{', new' if landing.new else ''})" if landing.person else ""
            line = f"  {landing.owner.name} · {landing.store}{person}: {len(landing.memories)} to import"
            if landing.already:
                line += f", {landing.already} already there"
            for store, found in sorted(landing.elsewhere.items()):
                line += f"; {len(found)} imported earlier into {store}, " + (
                    moving or "left there (--rescope moves them here)"
                )
            self.stdout.write(line)


class _Bar:
    """A progress bar on stderr (a line every 10% when stderr is not a terminal)."""

    WIDTH = 30

    def __init__(self, out):
        self.out = out
        self.tty = getattr(out, "isatty", lambda: False)()
        self.last = -1

    def show(self, done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if self.tty:
            filled = done * self.WIDTH // max(total, 1)
            self.out.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}", ending="")
            self.out.flush()
        elif tenth != self.last:
            self.out.write(f"{done}/{total} memories")
            self.last = tenth

    def end(self) -> None:
        if self.tty:
            self.out.write("")
