from django.urls import path

from memory.skills import api, views

urlpatterns = [
    path("knowledge/skills/", views.experience_tab, name="skill-experience"),
    path("skills/", views.skill_library, name="skill-library"),
    path("skills/<slug:name>/", views.skill_edit, name="skill-edit"),
    path("agents/<slug:name>/skills/", views.agent_skills, name="agent-skills"),
    path("agents/<slug:name>/skills/<slug:skill>/", views.overlay_edit, name="overlay-edit"),
    path("agents/<slug:name>/skills/<slug:skill>/enable", views.skill_toggle, name="skill-toggle"),
    path("lessons/<int:lesson_id>/edit", views.lesson_edit, name="lesson-edit"),
    path("lessons/<int:lesson_id>/remove", views.lesson_remove, name="lesson-remove"),
    path("lessons/<int:lesson_id>/move", views.lesson_move, name="lesson-move"),
]

api_urlpatterns = [
    path("skills", api.skill_collection, name="api-skills"),
    path("skills/<slug:skill>", api.skill_detail, name="api-skill"),
    path("agents/<slug:agent>/skills", api.agent_skill_list, name="api-agent-skills"),
    path("agents/<slug:agent>/skills/<slug:skill>", api.agent_skill_detail, name="api-agent-skill"),
    path(
        "agents/<slug:agent>/skills/<slug:skill>/experience",
        api.experience_add,
        name="api-agent-skill-experience",
    ),
    path("agents/<slug:agent>/skills/<slug:skill>/order", api.lesson_order, name="api-agent-skill-order"),
    path("lessons/<int:lesson_id>", api.lesson_detail, name="api-lesson"),
    path("lessons/<int:lesson_id>/remove", api.lesson_remove, name="api-lesson-remove"),
    path("task-outcomes", api.outcome_collection, name="api-task-outcomes"),
]
