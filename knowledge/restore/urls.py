from django.urls import path

from knowledge.restore import api, views

urlpatterns = [
    path("knowledge/audit/", views.audit_list, name="audit-list"),
    path("knowledge/audit/<int:pk>/", views.audit_detail, name="audit-detail"),
    path("knowledge/audit/restore", views.audit_restore, name="audit-restore"),
]

api_urlpatterns = [
    path("audit", api.audit_list, name="api-audit"),
    path("audit/<int:event_id>", api.audit_detail, name="api-audit-event"),
    path("audit/restore", api.audit_restore_view, name="api-audit-restore"),
]
