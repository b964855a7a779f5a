from django.urls import path

from knowledge.audit import api as api_audit
from knowledge.audit import views as views_audit
from knowledge.entries import api as api_entries
from knowledge.entries import views as views_entries
from knowledge.principals import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("owner", views.owner_select, name="owner-select"),
    path("agents/", views.agent_list, name="agent-list"),
    path("agents/<slug:name>/", views.agent_detail, name="agent-detail"),
    path("agents/<slug:name>/tokens", views.agent_token_create, name="agent-token-create"),
    path(
        "agents/<slug:name>/tokens/<int:token_id>/revoke", views.agent_token_revoke, name="agent-token-revoke"
    ),
    path("settings/", views.settings_page, name="settings"),
]

urlpatterns += [
    path("knowledge/", views_entries.knowledge_home, name="knowledge"),
    path("knowledge/entries/", views_entries.entry_list, name="entry-list"),
    path("knowledge/entries/new", views_entries.entry_create, name="entry-create"),
    path("knowledge/entries/<int:pk>/", views_entries.entry_edit, name="entry-edit"),
    path("knowledge/entries/<int:pk>/projection", views_entries.entry_projection, name="entry-projection"),
    path("knowledge/entries/<int:pk>/audit", views_entries.entry_audit, name="entry-audit"),
    path("knowledge/entries/<int:pk>/meta", views_entries.entry_meta, name="entry-meta"),
    path("knowledge/entries/<int:pk>/delete", views_entries.entry_delete, name="entry-delete"),
    path("knowledge/entries/<int:pk>/blocks", views_entries.block_add, name="block-add"),
    path("knowledge/entries/<int:pk>/blocks/<int:block_id>/", views_entries.block_view, name="block-view"),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/correct",
        views_entries.block_correct,
        name="block-correct",
    ),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/move", views_entries.block_move, name="block-move"
    ),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/remove",
        views_entries.block_remove,
        name="block-remove",
    ),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/history",
        views_entries.block_history,
        name="block-history",
    ),
    path("knowledge/entries/<int:pk>/relations", views_entries.relation_add, name="relation-add"),
    path(
        "knowledge/entries/<int:pk>/relations/<int:relation_id>/remove",
        views_entries.relation_remove,
        name="relation-remove",
    ),
    path("knowledge/guide/<slug:agent_name>", views_entries.guide_edit, name="guide-edit"),
    path("knowledge/audit/", views_audit.audit_list, name="audit-list"),
    path("knowledge/audit/<int:pk>/", views_audit.audit_detail, name="audit-detail"),
    path("knowledge/audit/restore", views_audit.audit_restore, name="audit-restore"),
]

api_urlpatterns = [
    path("me", api.me, name="api-me"),
    path("entries", api_entries.entry_collection, name="api-entries"),
    path("entries/<int:entry_id>", api_entries.entry_detail, name="api-entry"),
    path("entries/<int:entry_id>/projection", api_entries.entry_projection, name="api-entry-projection"),
    path("entries/<int:entry_id>/blocks", api_entries.block_collection, name="api-entry-blocks"),
    path("entries/<int:entry_id>/blocks/<int:block_id>", api_entries.block_detail, name="api-entry-block"),
    path("entries/<int:entry_id>/relations", api_entries.relation_collection, name="api-entry-relations"),
    path(
        "entries/<int:entry_id>/relations/<int:relation_id>",
        api_entries.relation_detail,
        name="api-entry-relation",
    ),
    path("guides/<slug:agent_name>", api_entries.guide_detail, name="api-guide"),
    path("audit", api_audit.audit_list, name="api-audit"),
    path("audit/<int:event_id>", api_audit.audit_detail, name="api-audit-event"),
    path("audit/restore", api_audit.audit_restore_view, name="api-audit-restore"),
]
