from django.urls import path

from memory.reconciler import api, views

urlpatterns = [
    path("agents/<slug:name>/reconcile", views.reconcile_now, name="agent-reconcile"),
]

api_urlpatterns = [
    path("agents/<slug:agent>/reconcile", api.reconcile_view, name="api-agent-reconcile"),
]
