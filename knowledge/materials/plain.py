"""Learning a material without a model: one entry whose blocks are the material's sections, each
citing its section. Used by the learning job (no model, or the model failed) and at once by a
paste (`services.material_paste`); beside both so neither imports the other."""

from knowledge.entries import services as entry_services
from knowledge.materials import extract
from knowledge.models import Entry, Material, MaterialVersion, Memory
from knowledge.principal import Principal

ACTOR = Principal.system("materials")
ENTRY_TYPE = "document"


def section_ref(material: Material, number: int) -> str:
    return f"{material.source_ref}#{number}"


def learn_plain(material: Material, version: MaterialVersion, extracted: extract.Extracted) -> Entry:
    """Without a model: one entry for the material (its title, type `document`), whose blocks
    are the sections in order, each citing its section. Learning the material again (Learn
    again, a new connector version) replaces that entry's blocks, keeping the entry."""
    blocks = [
        {
            "text": (f"{s.title}: {s.text}" if s.title else s.text)[: entry_services.MAX_TEXT],
            "sources": [{"kind": "material", "ref": section_ref(material, i)}],
        }
        for i, s in enumerate(extracted.sections, 1)
    ]
    first = extracted.sections[0].text
    summary = (first[:300] + " …") if len(first) > 300 else first
    ref = material.source_ref
    entry = (
        Entry.objects.filter(owner=material.owner, store=material.store, properties__material=ref)
        .order_by("pk")
        .first()
    )
    limit = entry_services.MAX_BLOCKS_PER_WRITE
    if entry is None:
        entry = entry_services.entry_create(
            actor=ACTOR,
            owner=material.owner,
            store=material.store,
            name=material.title,
            type=ENTRY_TYPE,
            summary=summary,
            properties={"material": ref},
            blocks=blocks[:limit],
        )
        rest = blocks[limit:]
        removed = 0
    else:
        live = Memory.objects.filter(entry=entry, status__in=entry_services.BODY_STATUSES).order_by(
            "position"
        )
        removed = 0
        for block in list(live):
            entry_services.block_remove(
                actor=ACTOR,
                entry_id=entry.pk,
                block_id=block.pk,
                reason=f"learned again from version {version.number} of material {ref}",
            )
            removed += 1
        entry_services.entry_update(actor=ACTOR, entry_id=entry.pk, summary=summary)
        rest = blocks
    for block in rest:
        entry_services.block_add(actor=ACTOR, entry_id=entry.pk, text=block["text"], sources=block["sources"])
    entry.counts = {"entries": 1, "blocks": len(blocks), "removed_blocks": removed}
    return entry
