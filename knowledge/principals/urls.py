from django.urls import path

from knowledge.principals import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("owner", views.owner_select, name="owner-select"),
    path("agents/", views.agent_list, name="agent-list"),
    path("agents/<slug:name>/", views.agent_detail, name="agent-detail"),
    path("agents/<slug:name>/tokens", views.agent_token_create, name="agent-token-create"),
    path(
        "agents/<slug:name>/tokens/<int:token_id>/revoke", views.agent_token_revoke, name="agent-token-revoke"
    ),
    path("settings/", views.settings_page, name="settings"),
    path("people/", views.people_page, name="people"),
    path("people/<int:user_id>/change", views.person_change, name="person-change"),
    path("people/tokens/", views.tokens_page, name="tokens"),
    path("people/tokens/<int:token_id>/revoke", views.token_revoke_page, name="token-revoke"),
    path("account/", views.account_page, name="account"),
    path("account/theme", views.theme_set, name="theme-set"),
]

api_urlpatterns = [
    path("me", api.me, name="api-me"),
]
