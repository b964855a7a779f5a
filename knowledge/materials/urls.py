from django.urls import path

from knowledge.materials import api, views

urlpatterns = [
    path("knowledge/materials/", views.material_list, name="material-list"),
    path("knowledge/materials/new", views.material_new, name="material-new"),
    path("knowledge/materials/<int:pk>/", views.material_page, name="material-page"),
    path("knowledge/materials/<int:pk>/original", views.material_download, name="material-original"),
    path("knowledge/materials/<int:pk>/retry", views.material_retry, name="material-retry"),
    path("knowledge/materials/<int:pk>/state", views.material_state, name="material-state"),
    path("knowledge/signal-rules/", views.signal_rules, name="signal-rules"),
    path("knowledge/signal-rules/<int:rule_id>/delete", views.signal_rule_delete, name="signal-rule-delete"),
    path("knowledge/connector-grants/", views.connector_grants, name="connector-grants"),
    path(
        "knowledge/connector-grants/<int:grant_id>/delete",
        views.connector_grant_delete,
        name="connector-grant-delete",
    ),
]

api_urlpatterns = [
    path("materials", api.material_collection, name="api-materials"),
    path("materials/<int:material_id>", api.material_detail, name="api-material"),
    path("materials/<int:material_id>/original", api.material_original, name="api-material-original"),
    path("materials/<int:material_id>/retry", api.material_retry, name="api-material-retry"),
    path(
        "connectors/<slug:connector>/documents/<path:ref>",
        api.connector_document,
        name="api-connector-document",
    ),
    path("signals", api.signal_post, name="api-signals"),
    path("signal-rules", api.signal_rule_collection, name="api-signal-rules"),
    path("signal-rules/<int:rule_id>", api.signal_rule_detail, name="api-signal-rule"),
    path("connector-grants", api.connector_grant_collection, name="api-connector-grants"),
    path("connector-grants/<int:grant_id>", api.connector_grant_detail, name="api-connector-grant"),
]
