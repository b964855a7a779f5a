from django.urls import path

from curation.status import views as views_status
from memory.consolidation import api as api_consolidation
from memory.consolidation import views as views_consolidation
from memory.conversations import api as api_conversations
from memory.gate import api as api_gate
from memory.gate import views as views_gate
from memory.lifecycle import api, views
from memory.provenance import api as api_provenance
from memory.provenance import views as views_provenance
from memory.recall import api as api_recall
from memory.recall import views as views_recall
from memory.skills import urls as skills_urls

# --- memories and the review queue ---
urlpatterns = [
    path("knowledge/status/", views_status.status_page, name="knowledge-status"),
    path("review/", views.review_queue, name="review-queue"),
    path("review/count", views.review_count, name="review-count"),
    path("review/bulk", views.review_bulk, name="review-bulk"),
    path("review/<int:memory_id>/approve", views.review_approve, name="review-approve"),
    path("review/<int:memory_id>/reject", views.review_reject, name="review-reject"),
    path("review/<int:memory_id>/edit", views.review_edit, name="review-edit"),
    path("memories/", views.memory_list, name="memory-list"),
    path("memories/<int:memory_id>/", views.memory_detail, name="memory-detail"),
    path("memories/<int:memory_id>/pin", views.memory_pin, name="memory-pin"),
    path("memories/<int:memory_id>/revoke", views.memory_revoke, name="memory-revoke"),
    path("memories/<int:memory_id>/promote", views.memory_promote, name="memory-promote"),
    path("memories/<int:memory_id>/revise", views.memory_revise, name="memory-revise"),
    # --- provenance ---
    path("memories/stale/", views_provenance.stale_list, name="stale-list"),
    path("memories/stale/check", views_provenance.stale_check, name="stale-check"),
    path("memories/stale/<int:memory_id>", views_provenance.stale_action, name="stale-action"),
    path(
        "memories/<int:memory_id>/confirm-sources",
        views_provenance.memory_confirm_sources,
        name="memory-confirm-sources",
    ),
]

api_urlpatterns = [
    path("memory", api.memory_collection, name="api-memory"),
    path("memory/<int:memory_id>", api.memory_detail, name="api-memory-detail"),
    path("memory/<int:memory_id>/approve", api.memory_approve, name="api-memory-approve"),
    path("memory/<int:memory_id>/reject", api.memory_reject, name="api-memory-reject"),
    path("memory/<int:memory_id>/pin", api.memory_pin, name="api-memory-pin"),
    path("memory/<int:memory_id>/unpin", api.memory_unpin, name="api-memory-unpin"),
    path("memory/<int:memory_id>/revoke", api.memory_revoke, name="api-memory-revoke"),
    path("memory/<int:memory_id>/promote", api.memory_promote, name="api-memory-promote"),
    path("memory/<int:memory_id>/revise", api.memory_revise, name="api-memory-revise"),
    path("runs/<str:run_id>/finish", api.run_finish, name="api-run-finish"),
]

api_urlpatterns += [
    # --- provenance ---
    path("sources/<slug:kind>/<path:ref>", api_provenance.source_detail, name="api-source"),
    path("memory-provenance/check", api_provenance.provenance_check, name="api-provenance-check"),
    path("memory-provenance/stale", api_provenance.provenance_stale, name="api-provenance-stale"),
    path("memory-provenance/<int:memory_id>", api_provenance.provenance_detail, name="api-provenance"),
]

# --- consolidation ---
urlpatterns += [
    path("consolidation/", views_consolidation.plan_list_page, name="consolidation-list"),
    path("consolidation/run", views_consolidation.plan_run, name="consolidation-run"),
    path("consolidation/<int:plan_id>/", views_consolidation.plan_page, name="consolidation-detail"),
    path(
        "consolidation/<int:plan_id>/<str:action>",
        views_consolidation.plan_action,
        name="consolidation-action",
    ),
]
api_urlpatterns += [
    path("memory-consolidations/run", api_consolidation.consolidation_run_view, name="api-consolidation-run"),
    path("memory-consolidations", api_consolidation.consolidation_list_view, name="api-consolidation-list"),
    path(
        "memory-consolidations/<int:plan_id>",
        api_consolidation.consolidation_detail_view,
        name="api-consolidation-detail",
    ),
    path(
        "memory-consolidations/<int:plan_id>/apply",
        api_consolidation.consolidation_apply_view,
        name="api-consolidation-apply",
    ),
    path(
        "memory-consolidations/<int:plan_id>/revert",
        api_consolidation.consolidation_revert_view,
        name="api-consolidation-revert",
    ),
    path(
        "memory-consolidations/<int:plan_id>/discard",
        api_consolidation.consolidation_discard_view,
        name="api-consolidation-discard",
    ),
]

# --- eval gate ---
urlpatterns += [
    path("gate/", views_gate.gate_page, name="gate"),
    path("gate/datasets/", views_gate.dataset_list, name="dataset-list"),
    path("gate/datasets/<str:name>/", views_gate.dataset_edit, name="dataset-edit"),
    path("gate/datasets/<str:name>/export.jsonl", views_gate.dataset_export, name="dataset-export"),
    path("memories/<int:memory_id>/gate-check", views_gate.memory_gate_check, name="memory-gate-check"),
]

api_urlpatterns += [
    path("eval-datasets", api_gate.datasets, name="api-eval-datasets"),
    path("eval-datasets/<str:name>", api_gate.dataset_detail, name="api-eval-dataset"),
    path("memory-gate/checks", api_gate.gate_checks, name="api-gate-checks"),
    path("memory-gate/<int:memory_id>/check", api_gate.gate_check, name="api-gate-check"),
]

# --- conversations in, memory out: evidence, recall, memo, context, status ---
urlpatterns += [
    path("recall/", views_recall.playground, name="recall-playground"),
    path("recall/browse/<str:kind>/<int:pk>", views_recall.browse, name="recall-browse"),
    path("agents/<slug:name>/memo", views_recall.memo_edit, name="agent-memo"),
]
api_urlpatterns += [
    path("channels", api_conversations.channel_create, name="api-channels"),
    path("messages", api_conversations.message_post, name="api-messages"),
    path("conversations", api_conversations.conversation_create, name="api-conversations"),
    path("conversations/<int:pk>", api_conversations.conversation_detail, name="api-conversation"),
    path(
        "conversations/<int:pk>/finish",
        api_conversations.conversation_finish_view,
        name="api-conversation-finish",
    ),
    path("memory/search", api_recall.memory_search_view, name="api-memory-search"),
    path("memory/browse/<str:kind>/<int:pk>", api_recall.memory_browse_view, name="api-memory-browse"),
    path("agents/<slug:agent>/memo", api_recall.memo_view, name="api-agent-memo"),
    path("agents/<slug:agent>/context", api_recall.context_view, name="api-agent-context"),
    path("status", api_recall.status_view, name="api-status"),
]

# --- skills and skill experience ---
urlpatterns += skills_urls.urlpatterns
api_urlpatterns += skills_urls.api_urlpatterns
