"""Input and output shapes of the API's decision on many queued memories (issue 58.3)."""

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
    failed = serializers.DictField(child=serializers.CharField(), help_text="id → why it was left as it is.")
    batch = serializers.UUIDField(help_text="The audit batch of the decision (restorable as one).")


def decided_out(result: dict) -> dict:
    return {
        "done": result["done"],
        "held": result["held"],
        "changed": result["changed"],
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
