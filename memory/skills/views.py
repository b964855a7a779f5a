"""Console: the Knowledge page's Skill experience tab (read-only, follows the owner selector)
and the agent library's skill pages — skills (admins create and edit them), which skills an
agent has enabled, and one agent's overlay of a skill (edit or remove a lesson with a reason,
reorder). Writes call the services; an htmx request gets the page's fragment back."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from knowledge import access, names
from knowledge.errors import DomainError
from knowledge.models import AgentSkill, Memory
from knowledge.principal import ADMIN
from knowledge.principals.permissions import admin_required, reviewer_required
from knowledge.web import error_text
from memory.skills import selectors, services
from memory.skills.forms import LessonEditForm, ReasonForm, SkillEditForm, SkillForm


@reviewer_required
def experience_tab(request):
    owner = names.owner_selected(request.session.get("owner"))
    rows = selectors.experience_summary(owner=owner)
    return render(request, "memory/skills/experience.html", {"tab": "skills", "owner": owner, "rows": rows})


@reviewer_required
def skill_library(request):
    form = SkillForm()
    if request.method == "POST":
        if not access.has_role(request.principal, ADMIN):
            messages.error(request, "Only admins create skills.")
            return redirect("skill-library")
        form = SkillForm(request.POST)
        if form.is_valid():
            try:
                skill = services.skill_create(actor=request.principal, **form.cleaned_data)
            except DomainError as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Skill {skill.name} created.")
                return redirect("skill-edit", name=skill.name)
    return render(request, "memory/skills/library.html", {"skills": selectors.skill_list(), "form": form})


@reviewer_required
def skill_edit(request, name):
    skill = names.skill_named(name)
    form = SkillEditForm(
        initial={"title": skill.title, "instructions": skill.instructions, "version": skill.version}
    )
    if request.method == "POST":
        if not access.has_role(request.principal, ADMIN):
            messages.error(request, "Only admins edit skills.")
            return redirect("skill-edit", name=name)
        form = SkillEditForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                skill = services.skill_update(
                    actor=request.principal,
                    skill=skill,
                    title=data["title"],
                    instructions=data["instructions"],
                    reason=data["reason"],
                    expected_version=data["version"],
                )
            except DomainError as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Saved (version {skill.version}).")
                return redirect("skill-edit", name=name)
    links = AgentSkill.objects.filter(skill=skill).select_related("agent").order_by("agent__name")
    return render(request, "memory/skills/skill_edit.html", {"skill": skill, "form": form, "links": links})


@reviewer_required
def agent_skills(request, name):
    agent = names.agent_named(name)
    enabled = {link.skill_id: link for link in selectors.agent_skills(agent)}
    sizes = selectors.overlay_sizes(owner=agent)
    rows = [
        {
            "skill": skill,
            "enabled": bool(enabled.get(skill.pk) and enabled[skill.pk].enabled),
            "size": sizes.get((agent.pk, skill.pk), {"active": 0, "queued": 0, "tokens": 0}),
        }
        for skill in selectors.skill_list()
    ]
    context = {"agent": agent, "rows": rows, "budget": selectors.overlay_budget_tokens()}
    return render(request, "memory/skills/agent_skills.html", context)


@admin_required
@require_POST
def skill_toggle(request, name, skill):
    agent = names.agent_named(name)
    skill_obj = names.skill_named(skill)
    enabled = request.POST.get("enabled") == "1"
    services.skill_enable(actor=request.principal, agent=agent, skill=skill_obj, enabled=enabled)
    messages.success(request, f"{skill_obj.name} is {'enabled' if enabled else 'disabled'} for {agent.name}.")
    return redirect(request.POST.get("next") or "agent-skills", name=agent.name)


def _overlay_context(agent, skill, **extra) -> dict:
    lessons = selectors.overlay(agent, skill, statuses=Memory.LIVE)
    link = AgentSkill.objects.filter(agent=agent, skill=skill).first()
    return {
        "agent": agent,
        "skill": skill,
        "link": link,
        "lessons": lessons,
        "active_tokens": sum(selectors.lesson_tokens(m.text) for m in lessons if m.status == Memory.ACTIVE),
        "budget": selectors.overlay_budget_tokens(),
        "outcomes": selectors.outcome_list(agent=agent, skill=skill)[:20],
        **extra,
    }


@reviewer_required
def overlay_edit(request, name, skill):
    agent = names.agent_named(name)
    skill_obj = names.skill_named(skill)
    return render(request, "memory/skills/overlay.html", _overlay_context(agent, skill_obj))


def _lesson_or_404(lesson_id) -> Memory:
    return get_object_or_404(
        Memory.objects.select_related("owner", "skill"), pk=lesson_id, skill__isnull=False
    )


def _after_lesson_write(request, lesson, *, error="", done="", edit_errors=None):
    """Answer a lesson write: the overlay's lesson list for htmx (with the error beside the
    lesson), otherwise back to the overlay page with a message."""
    if request.htmx:
        context = _overlay_context(
            lesson.owner,
            lesson.skill,
            error=error,
            error_lesson=lesson.pk,
            done=done,
            edit_errors=edit_errors,
        )
        return render(request, "memory/skills/overlay.html#lessons", context)
    if error:
        messages.error(request, error)
    elif done:
        messages.success(request, done)
    return redirect("overlay-edit", name=lesson.owner.name, skill=lesson.skill.name)


@admin_required
@require_POST
def lesson_edit(request, lesson_id):
    lesson = _lesson_or_404(lesson_id)
    form = LessonEditForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        if "reason" in form.errors:
            errors = "A reason is required to edit a lesson."
        return _after_lesson_write(request, lesson, error=errors)
    try:
        lesson = services.lesson_edit(actor=request.principal, lesson_id=lesson.pk, **form.cleaned_data)
    except DomainError as exc:
        return _after_lesson_write(request, lesson, error=error_text(exc))
    return _after_lesson_write(request, lesson, done=f"Lesson {lesson.pk} saved (version {lesson.version}).")


@admin_required
@require_POST
def lesson_remove(request, lesson_id):
    lesson = _lesson_or_404(lesson_id)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return _after_lesson_write(request, lesson, error="A reason is required to remove a lesson.")
    try:
        services.lesson_remove(
            actor=request.principal, lesson_id=lesson.pk, reason=form.cleaned_data["reason"]
        )
    except DomainError as exc:
        return _after_lesson_write(request, lesson, error=error_text(exc))
    return _after_lesson_write(request, lesson, done=f"Lesson {lesson.pk} removed.")


@admin_required
@require_POST
def lesson_move(request, lesson_id):
    lesson = _lesson_or_404(lesson_id)
    offset = -1 if request.POST.get("direction") == "up" else 1
    try:
        services.lesson_move(actor=request.principal, lesson_id=lesson.pk, offset=offset)
    except DomainError as exc:
        return _after_lesson_write(request, lesson, error=error_text(exc))
    return _after_lesson_write(request, lesson, done="")
