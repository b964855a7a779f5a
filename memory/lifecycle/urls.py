from django.urls import path

from memory.lifecycle import api, views
from memory.lifecycle.decisions import api as decisions
from memory.lifecycle.pages import views as pages

# the review queue and the memories pages
urlpatterns = [
    path("review/", views.review_queue, name="review-queue"),
    path("review/count", views.review_count, name="review-count"),
    path("review/bulk", views.review_bulk, name="review-bulk"),
    path("review/all", views.review_bulk_filter, name="review-bulk-filter"),
    path("review/<int:memory_id>/approve", views.review_approve, name="review-approve"),
    path("review/<int:memory_id>/reject", views.review_reject, name="review-reject"),
    path("review/<int:memory_id>/edit", views.review_edit, name="review-edit"),
    path("review/<int:memory_id>/keep", views.review_conflict_keep, name="review-conflict-keep"),
    path("review/<int:memory_id>/duplicate", views.review_duplicate, name="review-duplicate"),
    path("review/<int:memory_id>/unrelated", views.review_unrelated, name="review-unrelated"),
    path("memories/", pages.memory_list, name="memory-list"),
    path("memories/<int:memory_id>/", pages.memory_detail, name="memory-detail"),
    path("memories/<int:memory_id>/pin", pages.memory_pin, name="memory-pin"),
    path("memories/<int:memory_id>/revoke", pages.memory_revoke, name="memory-revoke"),
    path("memories/<int:memory_id>/promote", pages.memory_promote, name="memory-promote"),
    path("memories/<int:memory_id>/revise", pages.memory_revise, name="memory-revise"),
    path("memories/stale/<int:memory_id>", pages.stale_action, name="stale-action"),
]

api_urlpatterns = [
    path("memory", api.memory_collection, name="api-memory"),
    path("memory/review", decisions.memory_review, name="api-memory-review"),
    path("memory/<int:memory_id>", api.memory_detail, name="api-memory-detail"),
    path("memory/<int:memory_id>/approve", api.memory_approve, name="api-memory-approve"),
    path("memory/<int:memory_id>/unrelated", decisions.memory_unrelated, name="api-memory-unrelated"),
    path("memory/<int:memory_id>/reject", api.memory_reject, name="api-memory-reject"),
    path("memory/<int:memory_id>/keep", api.memory_keep, name="api-memory-keep"),
    path("memory/<int:memory_id>/pin", api.memory_pin, name="api-memory-pin"),
    path("memory/<int:memory_id>/unpin", api.memory_unpin, name="api-memory-unpin"),
    path("memory/<int:memory_id>/revoke", api.memory_revoke, name="api-memory-revoke"),
    path("memory/<int:memory_id>/promote", api.memory_promote, name="api-memory-promote"),
    path("memory/<int:memory_id>/revise", api.memory_revise, name="api-memory-revise"),
    path("runs/<str:run_id>/finish", api.run_finish, name="api-run-finish"),
]
