"""The documented shape of the Status answer (the selectors build the dict itself)."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

StatusOut = inline_serializer(
    "Status",
    {
        "embeddings": serializers.DictField(
            help_text="The embedding configuration (and `error` if invalid)."
        ),
        "backlog": serializers.DictField(
            child=serializers.IntegerField(), required=False, help_text="Rows waiting for a vector, per kind."
        ),
        "vector_coverage": serializers.DictField(
            child=serializers.DictField(), help_text="Per kind: rows, vectors and backlog."
        ),
        "evidence": inline_serializer(
            "StatusEvidence",
            {
                "channels": serializers.IntegerField(),
                "messages": serializers.IntegerField(),
                "episodes": serializers.IntegerField(),
                "open_conversations": serializers.IntegerField(),
            },
        ),
        "agents": serializers.IntegerField(),
        "pinned_memos": serializers.ListField(
            child=inline_serializer(
                "StatusMemo",
                {
                    "agent": serializers.CharField(),
                    "tokens": serializers.IntegerField(),
                    "budget_tokens": serializers.IntegerField(),
                    "over": serializers.BooleanField(),
                },
            )
        ),
        "overlays_over_budget": serializers.ListField(
            child=inline_serializer(
                "StatusOverlayOverBudget",
                {
                    "agent": serializers.CharField(),
                    "skill": serializers.CharField(),
                    "tokens": serializers.IntegerField(),
                    "budget_tokens": serializers.IntegerField(),
                },
            )
        ),
        # Registered from curation (a StatusSection): Dreaming stage A per channel.
        "dreaming_stage_a": inline_serializer(
            "StatusStageA",
            {
                "available": serializers.BooleanField(),
                "unavailable_reason": serializers.CharField(allow_blank=True),
                "quiet_minutes": serializers.IntegerField(),
                "batch_messages": serializers.IntegerField(),
                "channels": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Per channel: lag_messages, lag_seconds, lag_text, cursor_message, "
                    "last_run, next, failures, last_failure.",
                ),
            },
            required=False,
        ),
        # Registered from curation (a StatusSection): Dreaming stage B per agent.
        "dreaming_stage_b": inline_serializer(
            "StatusStageB",
            {
                "available": serializers.BooleanField(),
                "unavailable_reason": serializers.CharField(allow_blank=True),
                "agents": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Per agent: lag_episodes, lag_outcomes, last_run, failures, retry_at.",
                ),
                "lints": serializers.DictField(
                    help_text="Review lints: blocks with no source, ended memories still current, "
                    "entries that disagree on a property."
                ),
            },
            required=False,
        ),
        # Registered from curation (a StatusSection): model endpoints and distiller failures.
        "models": inline_serializer(
            "StatusModels",
            {
                "profiles": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Per configured profile: endpoint reachable | busy | unreachable | unchecked "
                    "(the background check), its error, context and structured-output form.",
                ),
                "distiller_failed": serializers.IntegerField(),
                "distiller_failures": serializers.ListField(child=serializers.DictField()),
            },
            required=False,
        ),
        # Registered from curation (a StatusSection): materials' learning and storage.
        "materials": inline_serializer(
            "StatusMaterials",
            {
                "job_timeout_seconds": serializers.IntegerField(),
                "by_state": serializers.DictField(child=serializers.IntegerField()),
                "stuck": serializers.ListField(child=serializers.DictField()),
                "stuck_count": serializers.IntegerField(),
                "failed": serializers.ListField(child=serializers.DictField()),
                "failed_count": serializers.IntegerField(),
                "withdrawn": serializers.ListField(child=serializers.DictField()),
                "withdrawn_count": serializers.IntegerField(),
                "storage_bytes": serializers.IntegerField(),
                "versions": serializers.IntegerField(),
            },
            required=False,
        ),
        # Registered from curation (a StatusSection): each agent's last reconciler run.
        "reconciler": inline_serializer(
            "StatusReconciler",
            {
                "every_turns": serializers.IntegerField(),
                "idle_minutes": serializers.IntegerField(),
                "agents": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Per agent: agent, last_run (id, trigger, state, plan, plan_state, counts, "
                    "note, started_at, finished_at; null if it never ran).",
                ),
            },
            required=False,
        ),
        # Registered from curation (a StatusSection): conflicts still in force.
        "conflicts": inline_serializer(
            "StatusConflicts",
            {
                "memories": serializers.IntegerField(help_text="Active memories in a conflict."),
                "hints": serializers.DictField(
                    child=serializers.DictField(),
                    help_text="The review queue's hints as reviewers judged them, per hint (duplicate, "
                    "exact-duplicate, near-duplicate, contradiction): unrelated (dismissed), confirmed "
                    "(acted on), precision (confirmed / both; null before any verdict).",
                ),
                "groups": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Per conflict (newest first, at most 20): store, key, agents, memories "
                    "(id, agent).",
                ),
            },
            required=False,
        ),
        "backlog_progress": inline_serializer(
            "StatusBacklogProgress",
            {
                "rate_per_second": serializers.FloatField(
                    help_text="Texts embedded per second over the last minutes (every worker)."
                ),
                "seconds_left": serializers.IntegerField(
                    allow_null=True, help_text="The backlog at that rate; null when nothing moves."
                ),
            },
        ),
        "worker_heartbeat": serializers.DateTimeField(allow_null=True),
        "worker": serializers.ChoiceField(
            choices=["ok", "never", "stale", "stuck"],
            help_text="ok; never (no beat yet); stale (no beat for three beats); stuck (jobs wait, none starts).",
        ),
        "jobs": serializers.DictField(
            help_text="waiting, oldest_waiting_since, running, stuck, failed_last_day (and recent_failures "
            "for reviewers and admins)."
        ),
        "alerts": serializers.ListField(
            child=inline_serializer(
                "StatusAlert",
                {
                    "level": serializers.ChoiceField(choices=["error", "warning"]),
                    "text": serializers.CharField(),
                    "fix": inline_serializer(
                        "StatusAlertFix",
                        {"label": serializers.CharField(), "url": serializers.CharField()},
                        required=False,
                        help_text="The console page that fixes it.",
                    ),
                },
            )
        ),
    },
)
