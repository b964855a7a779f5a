"""The skills API: skills (admins write them), enabling them per agent, what a skill loads as,
task outcomes, and the experience an agent adds while it works."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge import access, names
from knowledge.principal import ADMIN
from knowledge.principals.permissions import IsAdmin, IsAgentOrReviewer
from knowledge.web import validated
from memory.skills import selectors, services
from memory.skills.answers import experience_add_for, lesson_loaded, outcome_report
from memory.skills.serializers import (
    EnableIn,
    ExperienceIn,
    LessonEditIn,
    OrderIn,
    OutcomeIn,
    OutcomeQuery,
    ReasonIn,
    SkillCreateIn,
    SkillUpdateIn,
    outcome_out,
    skill_out,
)

SKILLS_REFUSAL = "An agent may read and write only its own skills."
TAG = ["skills"]
ERROR = OpenApiResponse(OpenApiTypes.OBJECT, description='JSON error: {"error": "...", ...}')
OBJECT = OpenApiTypes.OBJECT


@extend_schema(
    methods=["GET"], tags=TAG, summary="List skills", responses={200: OBJECT}, operation_id="skill_list"
)
@extend_schema(
    methods=["POST"],
    tags=TAG,
    summary="Create a skill (admins)",
    description="Only a person with the admin role creates skills; agents and Dreaming never do.",
    request=SkillCreateIn,
    responses={201: OBJECT, 400: ERROR, 403: ERROR},
    operation_id="skill_create",
)
@api_view(["GET", "POST"])
@permission_classes([IsAgentOrReviewer])
def skill_collection(request):
    if request.method == "POST":
        access.require_role(request.user, ADMIN, "Only admins create skills.")
        data = validated(SkillCreateIn, request.data)
        skill = services.skill_create(actor=request.user, **data)
        return Response(skill_out(skill), status=status.HTTP_201_CREATED)
    return Response({"results": [skill_out(s) for s in selectors.skill_list()]})


@extend_schema(methods=["GET"], tags=TAG, summary="One skill", responses={200: OBJECT, 404: ERROR})
@extend_schema(
    methods=["PATCH"],
    tags=TAG,
    summary="Edit a skill (admins)",
    description="A change of title or base instructions is a new version (audited, restorable). With "
    "`version`, 409 when someone saved another version meanwhile.",
    request=SkillUpdateIn,
    responses={200: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
)
@api_view(["GET", "PATCH"])
@permission_classes([IsAgentOrReviewer])
def skill_detail(request, skill: str):
    skill_obj = names.skill_named(skill)
    if request.method == "PATCH":
        access.require_role(request.user, ADMIN, "Only admins edit skills.")
        data = validated(SkillUpdateIn, request.data)
        skill_obj = services.skill_update(
            actor=request.user, skill=skill_obj, expected_version=data.pop("version", None), **data
        )
    return Response(skill_out(skill_obj))


@extend_schema(
    tags=TAG,
    summary="The agent's skills: enabled or not, lessons and tokens against the overlay budget",
    responses={200: OBJECT, 403: ERROR, 404: ERROR},
    operation_id="agent_skill_list",
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def agent_skill_list(request, agent: str):
    agent_obj = access.agent_get_for(request.user, agent, refusal=SKILLS_REFUSAL)
    rows = selectors.experience_summary(owner=agent_obj, recent_outcomes=0)
    return Response(
        {
            "agent": agent_obj.name,
            "results": [
                {
                    "skill": r["skill"].name,
                    "enabled": r["enabled"],
                    "lessons": r["active"],
                    "queued": r["queued"],
                    "overlay_tokens": r["tokens"],
                    "overlay_budget_tokens": r["budget_tokens"],
                    "outcomes": r["outcomes"],
                }
                for r in rows
            ],
        }
    )


@extend_schema(
    methods=["GET"],
    tags=TAG,
    summary="What the agent receives when the skill loads",
    operation_id="agent_skill_load",
    description="Base instructions followed by the agent's active overlay (within "
    "BRAIN_OVERLAY_BUDGET_TOKENS), with token counts and each lesson's sources.",
    responses={200: OBJECT, 403: ERROR, 404: ERROR},
)
@extend_schema(
    methods=["PUT"],
    tags=TAG,
    summary="Enable or disable a skill for the agent (admins)",
    operation_id="agent_skill_enable",
    description="A disabled skill's overlay stays stored and is not in the agent's context.",
    request=EnableIn,
    responses={200: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["GET", "PUT"])
@permission_classes([IsAgentOrReviewer])
def agent_skill_detail(request, agent: str, skill: str):
    agent_obj = access.agent_get_for(request.user, agent, refusal=SKILLS_REFUSAL)
    skill_obj = names.skill_named(skill)
    if request.method == "PUT":
        access.require_role(request.user, ADMIN, "Only admins enable or disable skills.")
        data = validated(EnableIn, request.data)
        services.skill_enable(actor=request.user, agent=agent_obj, skill=skill_obj, enabled=data["enabled"])
    return Response(selectors.skill_load(agent_obj, skill_obj))


@extend_schema(
    tags=TAG,
    summary="Add experience to the agent's overlay of a skill",
    description="`lesson` with `sources` (at least one task outcome, message or conversation of this "
    "agent) and optionally `revises` (a lesson it replaces: superseded once the new one is in force). "
    "409 when the skill is not enabled for the agent, or when the lesson nearly repeats one of the "
    "overlay (`duplicate_of` names it) without revising it. An untrusted agent's lesson is queued for "
    "review; the eval gate sees it like any memory.",
    request=ExperienceIn,
    responses={201: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def experience_add(request, agent: str, skill: str):
    agent_obj = access.agent_get_for(request.user, agent, refusal=SKILLS_REFUSAL)
    skill_obj = names.skill_named(skill)
    data = validated(ExperienceIn, request.data)
    return Response(
        experience_add_for(request.user, agent_obj, skill_obj, data), status=status.HTTP_201_CREATED
    )


@extend_schema(
    tags=TAG,
    summary="Reorder the overlay's lessons (admins)",
    request=OrderIn,
    responses={200: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["PUT"])
@permission_classes([IsAdmin])
def lesson_order(request, agent: str, skill: str):
    agent_obj = access.agent_get_for(request.user, agent, refusal=SKILLS_REFUSAL)
    skill_obj = names.skill_named(skill)
    data = validated(OrderIn, request.data)
    services.lesson_reorder(actor=request.user, agent=agent_obj, skill=skill_obj, order=data["order"])
    return Response(selectors.skill_load(agent_obj, skill_obj))


@extend_schema(
    methods=["PATCH"],
    tags=TAG,
    summary="Correct a lesson's text (admins; a reason is required)",
    request=LessonEditIn,
    responses={200: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["PATCH"])
@permission_classes([IsAdmin])
def lesson_detail(request, lesson_id: int):
    data = validated(LessonEditIn, request.data)
    lesson = services.lesson_edit(actor=request.user, lesson_id=lesson_id, **data)
    return Response(lesson_loaded(lesson))


@extend_schema(
    tags=TAG,
    summary="Remove a lesson from its overlay (admins; a reason is required; restorable)",
    request=ReasonIn,
    responses={200: OBJECT, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["POST"])
@permission_classes([IsAdmin])
def lesson_remove(request, lesson_id: int):
    data = validated(ReasonIn, request.data)
    lesson = services.lesson_remove(actor=request.user, lesson_id=lesson_id, reason=data["reason"])
    return Response(lesson_loaded(lesson))


@extend_schema(
    methods=["POST"],
    tags=TAG,
    summary="Report how a task went",
    description="Evidence of how a task went — never of whether an answer was right. Idempotent by "
    "`external_id`: the same id again answers 200 with the stored outcome and writes nothing.",
    request=OutcomeIn,
    responses={201: OBJECT, 200: OBJECT, 400: ERROR, 403: ERROR},
)
@extend_schema(
    methods=["GET"],
    tags=TAG,
    summary="Task outcomes, newest first (per agent and skill)",
    parameters=[OutcomeQuery],
    responses={200: OBJECT, 400: ERROR, 404: ERROR},
)
@api_view(["GET", "POST"])
@permission_classes([IsAgentOrReviewer])
def outcome_collection(request):
    principal = request.user
    if request.method == "GET":
        query = validated(OutcomeQuery, request.query_params.dict())
        agent = (
            access.agent_get_for(principal, query["agent"], refusal=SKILLS_REFUSAL)
            if query.get("agent")
            else None
        )
        if agent is None:
            agent = access.own_agent(principal)
        skill = names.skill_named(query["skill"]) if query.get("skill") else None
        outcomes = selectors.outcome_list(agent=agent, skill=skill)[: query["limit"]]
        return Response({"results": [outcome_out(o) for o in outcomes]})

    data = validated(OutcomeIn, request.data)
    out, created = outcome_report(principal, data)
    return Response(out, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
