from django.urls import path

from memory.recall import api, views

urlpatterns = [
    path("recall/", views.playground, name="recall-playground"),
    path("recall/browse/<str:kind>/<int:pk>", views.browse, name="recall-browse"),
    path("agents/<slug:name>/memo", views.memo_edit, name="agent-memo"),
]

api_urlpatterns = [
    path("memory/search", api.memory_search_view, name="api-memory-search"),
    path("memory/browse/<str:kind>/<int:pk>", api.memory_browse_view, name="api-memory-browse"),
    path("agents/<slug:agent>/memo", api.memo_view, name="api-agent-memo"),
    path("agents/<slug:agent>/context", api.context_view, name="api-agent-context"),
]
