"""Memory write events: the durable feed read from the audit trail (`feed.py`), the webhooks that
receive it (`services.py`, `delivery.py`), their API (`api.py`) and console page (`views.py`)."""
