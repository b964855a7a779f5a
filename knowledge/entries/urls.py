from django.urls import path

from knowledge.entries import api, views

urlpatterns = [
    path("knowledge/", views.knowledge_home, name="knowledge"),
    path("knowledge/entries/", views.entry_list, name="entry-list"),
    path("knowledge/entries/new", views.entry_create, name="entry-create"),
    path("knowledge/entries/graph", views.entry_graph, name="entry-graph"),
    path("knowledge/entries/<int:pk>/citing", views.entry_citing_view, name="entry-citing"),
    path("knowledge/entries/<int:pk>/", views.entry_edit, name="entry-edit"),
    path("knowledge/entries/<int:pk>/projection", views.entry_projection, name="entry-projection"),
    path("knowledge/entries/<int:pk>/audit", views.entry_audit, name="entry-audit"),
    path("knowledge/entries/<int:pk>/meta", views.entry_meta, name="entry-meta"),
    path("knowledge/entries/<int:pk>/delete", views.entry_delete, name="entry-delete"),
    path("knowledge/entries/<int:pk>/blocks", views.block_add, name="block-add"),
    path("knowledge/entries/<int:pk>/blocks/<int:block_id>/", views.block_view, name="block-view"),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/correct", views.block_correct, name="block-correct"
    ),
    path("knowledge/entries/<int:pk>/blocks/<int:block_id>/move", views.block_move, name="block-move"),
    path("knowledge/entries/<int:pk>/blocks/<int:block_id>/remove", views.block_remove, name="block-remove"),
    path(
        "knowledge/entries/<int:pk>/blocks/<int:block_id>/history", views.block_history, name="block-history"
    ),
    path("knowledge/entries/<int:pk>/relations", views.relation_add, name="relation-add"),
    path(
        "knowledge/entries/<int:pk>/relations/<int:relation_id>/remove",
        views.relation_remove,
        name="relation-remove",
    ),
    path("knowledge/guide/", views.guide_index, name="guide-index"),
    path("knowledge/guide/<slug:agent_name>", views.guide_edit, name="guide-edit"),
]

api_urlpatterns = [
    path("entries", api.entry_collection, name="api-entries"),
    path("entries/<int:entry_id>", api.entry_detail, name="api-entry"),
    path("entries/<int:entry_id>/projection", api.entry_projection, name="api-entry-projection"),
    path("entries/<int:entry_id>/blocks", api.block_collection, name="api-entry-blocks"),
    path("entries/<int:entry_id>/blocks/<int:block_id>", api.block_detail, name="api-entry-block"),
    path("entries/<int:entry_id>/relations", api.relation_collection, name="api-entry-relations"),
    path(
        "entries/<int:entry_id>/relations/<int:relation_id>", api.relation_detail, name="api-entry-relation"
    ),
    path("guides/<slug:agent_name>", api.guide_detail, name="api-guide"),
]
