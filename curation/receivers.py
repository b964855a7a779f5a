"""Curation's listeners to signals sent by lower layers."""

from knowledge.signals import conversation_finished


def _distill_on_finish(sender, conversation, **kwargs):
    from curation.distiller import distill_enqueue

    distill_enqueue(conversation)


def connect() -> None:
    conversation_finished.connect(_distill_on_finish, dispatch_uid="curation.distill_on_finish")
