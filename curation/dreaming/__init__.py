"""Dreaming: background curation. Stage A (this package's `stage_a` job) cuts a quiet channel's
older messages into episodes; services write, selectors read, tasks are the worker's entry
points, api/views the admin's manual run and urls their routes."""
