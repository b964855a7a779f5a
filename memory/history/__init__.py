"""Rolling conversation history for context compilation: the last turns verbatim and a stored
summary of the earlier ones, advanced incrementally (`section.py`; the summary job, prompt,
schema and rules in `summary.py`; the stored summary in `models.py`)."""
