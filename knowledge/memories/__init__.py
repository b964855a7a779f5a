"""The one writer of memory rows (docs/ARCHITECTURE.md, "One writer per memory row").

- `rows` — the row operations every route shares: a new row with its first version, sources
  and content hash (`memory_row_new` / `memory_row_insert`), a new text (`memory_row_revise`),
  and a row's state (`memory_row_state`, `memory_rows_state`, `memory_rows_save`): the only
  places a memory row is constructed or its `status` assigned.
- `fingerprints` — what a memory's sources looked like when it was written.
- `activation` — the seam to the one activation function (`memory.lifecycle.activation.
  memory_activate`, registered at start-up) through which every new row of every route goes
  into force or waits in the queue (`memory_row_activate`).

Import from the modules; this package file re-exports nothing, so a module never imports its
own package."""
