"""The sources an agent file carries, out and in: a source naming a row of the file also names
it by the file's ref (`file_ref`), so an import cites the row it brings in; a source citing a row
of this Brain's kinds by id outside the file stays tracked only where that row is the one cited."""

from knowledge.memories.fingerprints import INTERNAL_SQL, internal_states
from knowledge.memories.rows import memory_sources_add
from knowledge.models import MemorySource
from knowledge.portability.checks import when


def with_file_ref(source, memory_ref: dict, entry_ref: dict):
    """A source as exported: one naming a memory or entry of the file also names it by the
    file's ref (`file_ref`), so an import cites the row it brings in, not this Brain's id."""
    if not isinstance(source, dict):
        return source
    rows = {"memory": memory_ref, "entry": entry_ref}.get(source.get("kind"))
    ref = str(source.get("ref"))
    if rows is not None and ref.isdigit() and int(ref) in rows:
        return {**source, "file_ref": rows[int(ref)]}
    return source


def cited(source: dict, here: dict) -> dict:
    """A source naming a row of the file (`file_ref`) as the row it is here; one whose row did
    not come in (left out, or held by another agent) keeps the id it had where it was exported."""
    found = here[source["kind"]].get(source["file_ref"])
    return {"kind": source["kind"], "ref": str(found) if found else str(source["ref"])}


def cite(new: dict, here: dict) -> None:
    """The sources of the imported memories that name rows of the file, once every row has its
    id here, each fingerprinted as that row is now (memory_sources_add)."""
    for memory, row in new.values():
        found = [cited(s, here) for s in row.get("sources") or [] if s.get("file_ref") is not None]
        if found:  # two file refs may be one row here (a present one): cite it once
            memory_sources_add(memory, list({(s["kind"], s["ref"]): s for s in found}.values()))


ELSEWHERE = "elsewhere:"  # the ref of a cited row of the exporting Brain that is not here


def rows_here(rows) -> dict[tuple[str, str], str]:
    """{(kind, ref): fingerprint now} of the rows of this Brain that the file's memories cite by
    id outside the file (messages, conversations, materials …: internal kinds), one query a kind."""
    wanted: dict[str, set] = {}
    for row in rows:
        for source in row.get("sources") or []:
            if source.get("file_ref") is None and source["kind"] in INTERNAL_SQL:  # (by id or not)
                wanted.setdefault(source["kind"], set()).add(str(source["ref"]))
    return {
        (kind, ref): fp
        for kind, refs in wanted.items()
        for ref, (fp, _) in internal_states(kind, list(refs)).items()
    }


def source_in(source: dict, here: dict) -> dict:
    """A source as recorded in the file. One citing a row of this Brain's kinds by its id stays
    tracked only when that row is here as it was cited (the same fingerprint: the file comes from
    this Brain, or a copy of its data); otherwise the id named a row of the exporting Brain —
    here it is another row or none — so it is kept as `elsewhere:<id>`, untracked: never opened
    as, or checked against, a row it is not."""
    kind, ref = source["kind"], str(source["ref"])
    recorded = {
        "kind": kind,
        "ref": ref,
        "fingerprint": source.get("fingerprint") or "",
        "snapshot": source.get("snapshot"),
        "state": source.get("state") or MemorySource.UNCHANGED,
        "checked_at": when(source.get("checked_at")),
    }
    by_id = ref.partition("#")[0].isdigit()  # a material's connector:ref names the same one anywhere
    cited_here = here.get((kind, ref)) == recorded["fingerprint"] != ""
    if kind in INTERNAL_SQL and by_id and not cited_here:
        recorded.update(ref=(ELSEWHERE + ref)[:300], fingerprint="", state=MemorySource.UNTRACKED)
    return recorded
