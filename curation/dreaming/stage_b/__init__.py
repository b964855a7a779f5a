"""Dreaming stage B: curate one agent's knowledge from its new material. `rules` is the model
job (prompts, reply schemas, what the checks share), `operations` the table of operations (per
kind its checks and how it is applied), `selectors` the reads (the scan, what it opens, due
agents, the Status section, fitness), `services` the run and its one transaction."""
