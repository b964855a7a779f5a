"""Brain's database backend: Django's PostgreSQL backend with a health check that sends no
query (see base.py)."""
