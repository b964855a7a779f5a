from django.urls import path

from memory.conversations import api

urlpatterns = []

api_urlpatterns = [
    path("channels", api.channel_create, name="api-channels"),
    path("messages", api.message_post, name="api-messages"),
    path("conversations", api.conversation_create, name="api-conversations"),
    path("conversations/<int:pk>", api.conversation_detail, name="api-conversation"),
    path("conversations/<int:pk>/finish", api.conversation_finish_view, name="api-conversation-finish"),
]
