"""Input and output shapes of the API's decision on many queued memories (issue 58.3)."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from knowledge.web import StrictSerializer
from memory.lifecycle.serializers import MemoryListQuerySerializer

MOST = 1000  # one decision decides at most this many memories (as the console's)


class ReviewFilterQuerySerializer(MemoryListQuerySerializer):
    """The review queue's filters (as GET /api/memory?status=queued takes them), for the dry run."""

    status = key = stale = pinned = facets = None
    order = serializers.ChoiceField(
        choices=["oldest", "newest"], default="oldest", help_text="The queue's order (oldest first)."
    )

    def validate(self, attrs):
        return attrs


class ReviewDecisionSerializer(StrictSerializer):
    action = serializers.ChoiceField(choices=["approve", "reject"])
    reason = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default="", help_text="Required to reject."
    )
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        min_length=1,
        max_length=MOST,
        required=False,
        help_text="The memories to decide, exactly these (the dry run's `ids`).",
    )
    snapshot = serializers.CharField(
        max_length=200_000,
        required=False,
        help_text="The dry run's `snapshot`: decides exactly the memories it named, and leaves queued "
        "(in `changed`) any whose text, store, tier, key, value or supersedes changed since.",
    )

    flagged = serializers.ChoiceField(
        choices=["include", "leave"],
        required=False,
        help_text="With a snapshot whose dry run named `flagged` memories (an approval would put a "
        "duplicate or a contradiction in force): include approves them too, leave leaves them queued. "
        "Required then.",
    )

    def validate(self, attrs):
        if ("ids" in attrs) == ("snapshot" in attrs):
            raise serializers.ValidationError({"ids": ["Give either ids or snapshot (not both)."]})
        if attrs["action"] == "reject" and not attrs["reason"].strip():
            raise serializers.ValidationError({"reason": ["Say why the memories are rejected."]})
        return attrs


class ReviewPreviewSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    capped = serializers.BooleanField(help_text=f"More match than one decision takes ({MOST}).")
    ids = serializers.ListField(child=serializers.IntegerField(), help_text="In queue order.")
    snapshot = serializers.CharField(help_text="Names exactly `ids`, as they are now; valid for a day.")
    flags = serializers.ListField(
        child=inline_serializer(
            "ReviewFlag",
            {
                "memory": serializers.IntegerField(),
                "other": serializers.IntegerField(help_text="Active, or among `ids`."),
                "hint": serializers.ChoiceField(
                    choices=["exact-duplicate", "near-duplicate", "contradiction"]
                ),
                "why": serializers.CharField(),
            },
        ),
        help_text="What approving all of `ids` would put in force: a duplicate of an active memory or of "
        "another of them, two of them that contradict each other.",
    )
    flagged = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The ids an approval with flagged=leave leaves queued (an approval must say include or leave).",
    )


class ReviewDecidedSerializer(serializers.Serializer):
    done = serializers.ListField(
        child=serializers.IntegerField(), help_text="Decided (approved or rejected)."
    )
    held = serializers.ListField(
        child=serializers.IntegerField(), help_text="Approved, and held by the enforcing eval gate."
    )
    changed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Left queued: changed since the snapshot."
    )
    left = serializers.ListField(child=serializers.IntegerField(), help_text="Left queued: flagged=leave.")
    failed = serializers.DictField(child=serializers.CharField(), help_text="id → why it was left as it is.")
    batch = serializers.UUIDField(help_text="The audit batch of the decision (restorable as one).")


def decided_out(result: dict) -> dict:
    return {
        "done": result["done"],
        "held": result["held"],
        "changed": result["changed"],
        "left": result.get("left", []),
        "failed": {str(k): v for k, v in result["failed"].items()},
        "batch": result["batch"],
    }


class UnrelatedSerializer(StrictSerializer):
    other = serializers.IntegerField(min_value=1, help_text="The memory the hint pairs it with.")
    hint = serializers.ChoiceField(
        choices=["duplicate", "exact-duplicate", "near-duplicate", "contradiction"],
        help_text="The hint as the queue showed it.",
    )


class UnrelatedOutSerializer(serializers.Serializer):
    memory = serializers.IntegerField()
    other = serializers.IntegerField()
    hint = serializers.CharField()
    verdict = serializers.CharField(help_text="unrelated")
    by = serializers.CharField()
