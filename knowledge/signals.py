"""Signals other layers listen to without the sender importing them (the dependency direction
is curation → memory → knowledge)."""

from django.dispatch import Signal

# Sent (inside the finishing transaction) when a conversation is finished: kwargs
# `conversation`. The distiller (curation) enqueues its work on commit.
conversation_finished = Signal()
