"""Dreaming stage A: cut a quiet channel's older messages into episodes. `rules` is the model
job (prompt, reply schema, code rules), `selectors` the reads (the next batch, due channels, the
Status section), `services` the run and its writes."""
