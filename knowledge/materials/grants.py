"""Connector grants: which stores an integration may mirror connector documents into, managed by
admins like the signal routing rules. Each write is one transaction with its audit event; the
rule that uses them is `knowledge.access.check_connector_write`."""

from django.db import transaction

from knowledge import access, names
from knowledge.audit.services import audit_record
from knowledge.errors import Conflict, NotFound
from knowledge.models import ConnectorGrant
from knowledge.principal import ADMIN, Principal


def _snap(grant: ConnectorGrant) -> dict:
    return {"integration": grant.integration.name, "agent": grant.agent.name, "store": grant.store}


def connector_grant_add(*, actor: Principal, integration: str, agent: str, scope: str) -> ConnectorGrant:
    """Let `integration` mirror connector documents for `agent` into the store `scope` names
    (agent/self, shared, private:<person>, channel:<channel>)."""
    access.require_role(actor, ADMIN, "Only admins grant integrations a store.")
    store = access.parse_scope(scope)
    integration_row, agent_row = names.grant_target(integration=integration, agent=agent)
    with transaction.atomic():
        if ConnectorGrant.objects.filter(integration=integration_row, agent=agent_row, store=store).exists():
            raise Conflict(f"{integration} may already mirror documents into {agent}'s store {store}.")
        grant = ConnectorGrant.objects.create(
            integration=integration_row, agent=agent_row, store=store, updated_by=actor.name
        )
        audit_record(
            "connector_grant.added",
            actor=actor,
            store=store,
            owner=agent_row.name,
            object_type="connector_grant",
            object_ids=[grant.pk],
            data=_snap(grant),
        )
    return grant


def connector_grant_delete(*, actor: Principal, grant_id: int) -> None:
    """Take a grant back: the integration's next write into that store is refused; documents it
    already mirrored stay (withdraw them to retire them)."""
    access.require_role(actor, ADMIN, "Only admins grant integrations a store.")
    with transaction.atomic():
        grant = (
            ConnectorGrant.objects.select_for_update(of=("self",))
            .select_related("integration", "agent")
            .filter(pk=grant_id)
            .first()
        )
        if grant is None:
            raise NotFound(f"No connector grant {grant_id}.")
        before = _snap(grant)
        grant.delete()
        audit_record(
            "connector_grant.deleted",
            actor=actor,
            store=before["store"],
            owner=before["agent"],
            object_type="connector_grant",
            object_ids=[grant_id],
            data=before,
        )


def connector_grants():
    return ConnectorGrant.objects.select_related("integration", "agent")
