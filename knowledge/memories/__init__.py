"""The one writer of memory rows (docs/ARCHITECTURE.md, "One writer per memory row").

- `activation` — decide, then store: the `Activation` the one activation function
  (`memory.lifecycle.activation.memory_activate`) returns, and `memory_rows_activate`, the one
  entrance of new rows (the API write, bulk imports, consolidation's merged memories, entry
  blocks), batched.
- `rows` — the row operations every route shares: a new row with its first version, sources
  and content hash (`memory_row_new`, inserted by the entrance), a new text
  (`memory_row_revise`, `memory_text_revise`), and a row's state (`memory_row_state`,
  `memory_rows_state`, `memory_rows_save`): the only places a memory row is constructed or its
  `status` assigned.
- `fingerprints` — what a memory's sources looked like when it was written.

Import from the modules; this package file re-exports nothing, so a module never imports its
own package."""
