from django.urls import path  # noqa: F401

from memory import api_conversations, api_recall, views_recall

urlpatterns = []

api_urlpatterns = []

# Conversations in, memory out (issue 6): evidence, recall, memo, context, status.
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
