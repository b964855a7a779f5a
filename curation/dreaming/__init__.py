"""Dreaming: background curation. Stage A (`stage_a/`) cuts a quiet channel's older messages into
episodes; stage B (`stage_b/`) curates an agent's knowledge from them. `runs` is what both share
(a run's cursor claim, its end and back-off, manual runs); tasks are the worker's entry points,
jobs the manual runs as background jobs, api/views the admin's manual run and urls their routes."""
