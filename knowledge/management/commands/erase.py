import json

from django.core.management.base import BaseCommand, CommandError

from knowledge.erasure.ledger import ledger_file_merge
from knowledge.erasure.serializers import TARGETS
from knowledge.erasure.services import erasure_apply, erasure_ledger_reapply
from knowledge.errors import DomainError
from knowledge.principal import Principal


class Command(BaseCommand):
    help = (
        "Erase a memory, message, conversation, channel, entry, material, an agent's store or everything "
        "about a person, for good (what "
        "POST /api/erasures does): the content goes, with what was derived from it, and a tombstone "
        "stays in the erasure ledger. --dry-run prints exactly what would go and writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--person", help="a person's name: their private store, messages and DMs")
        parser.add_argument("--memory", type=int)
        parser.add_argument("--message", type=int)
        parser.add_argument("--conversation", type=int)
        parser.add_argument("--channel", help="a channel's name: every message and conversation in it")
        parser.add_argument("--entry", type=int)
        parser.add_argument(
            "--material", type=int, help="a material, its originals and what was learned from it"
        )
        parser.add_argument("--store", help="an agent's store (with --agent): its memories and entries")
        parser.add_argument("--agent", help="whose store")
        parser.add_argument("--reason", default="", help="why (required unless --dry-run); audited")
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument(
            "--reapply",
            action="store_true",
            help="after a restore: put back the ledger file's tombstones and erase again what they name",
        )
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="print the whole answer as JSON"
        )

    def handle(
        self, *args, reason: str, dry_run: bool, as_json: bool = False, reapply: bool = False, **options
    ):
        if reapply:
            merged = ledger_file_merge()
            taken = erasure_ledger_reapply(actor=Principal.system("manage.py erase"))
            counts = ", ".join(f"{n} {kind}" for kind, n in taken.items())
            self.stdout.write(
                f"Ledger re-applied: {merged} tombstone(s) from the ledger file; erased again: {counts}."
            )
            return
        named = [(kind, options[kind]) for kind in TARGETS if options.get(kind) is not None]
        if len(named) != 1 or (named[0][0] == "store") != bool(options.get("agent")):
            raise CommandError(
                f"Name exactly one of {', '.join('--' + t for t in TARGETS)} (--store with --agent)."
            )
        kind, ref = named[0]
        if kind == "store":
            ref = f"{options['agent']}/{ref}"
        actor = Principal.system("manage.py erase")
        try:
            result = erasure_apply(actor=actor, kind=kind, ref=str(ref), reason=reason, dry_run=dry_run)
        except DomainError as exc:
            raise CommandError(exc.message if not hasattr(exc, "fields") else str(exc))
        out = result.out()
        if as_json:
            self.stdout.write(_json(out))
            return
        verb = "Would erase" if dry_run else f"Erased (ledger entry {out['erasure']})"
        counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in out["counts"].items())
        self.stdout.write(f"{verb} {out['label']}: {counts}.")
        for name in (
            "memories",
            "derived_memories",
            "requeued_memories",
            "messages",
            "episodes",
            "entries",
            "materials",
        ):
            if out[name]:
                self.stdout.write(
                    f"  {name.replace('_', ' ')}: {', '.join(map(str, out[name][:50]))}"
                    + (" …" if len(out[name]) > 50 else "")
                )


def _json(data) -> str:
    return json.dumps(data, indent=2, default=str)
