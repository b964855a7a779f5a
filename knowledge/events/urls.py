from django.urls import path

from knowledge.events import api, views

urlpatterns = [
    path("webhooks/", views.webhook_page, name="webhooks"),
    path("webhooks/<int:pk>/remove", views.webhook_remove, name="webhook-remove"),
]

api_urlpatterns = [
    path("events", api.event_feed, name="api-events"),
    path("webhooks", api.webhook_collection, name="api-webhooks"),
    path("webhooks/<int:webhook_id>", api.webhook_detail, name="api-webhook"),
]
