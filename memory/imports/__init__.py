"""Moving an agent's memories over from another memory system into Brain (`mem0.py`: Mem0's
`Memory.get_all()` / REST export, `manage.py import_mem0`)."""
