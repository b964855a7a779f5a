"""Input and output shapes of POST /api/erasures."""

from rest_framework import serializers

from knowledge.web import StrictSerializer

TARGETS = ("memory", "message", "conversation", "channel", "entry", "material", "store", "person")


class ErasureInSerializer(StrictSerializer):
    memory = serializers.IntegerField(required=False, min_value=1)
    message = serializers.IntegerField(required=False, min_value=1)
    conversation = serializers.IntegerField(required=False, min_value=1)
    channel = serializers.CharField(required=False, max_length=100)
    entry = serializers.IntegerField(required=False, min_value=1)
    material = serializers.IntegerField(required=False, min_value=1)
    store = serializers.CharField(
        required=False,
        max_length=120,
        help_text="An agent's store (self, shared, private:<person>…); with agent.",
    )
    agent = serializers.CharField(required=False, max_length=64, help_text="Whose store (with store).")
    person = serializers.CharField(required=False, max_length=64)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")
    dry_run = serializers.BooleanField(required=False, default=False)

    def validate(self, data):
        named = [k for k in TARGETS if k in data]
        if len(named) != 1:
            raise serializers.ValidationError(
                {"non_field_errors": [f"Name exactly one of {', '.join(TARGETS)}."]}
            )
        if ("agent" in data) != (named[0] == "store"):
            raise serializers.ValidationError({"agent": ["Name the agent with a store, and only then."]})
        if not data["dry_run"] and not data["reason"].strip():
            raise serializers.ValidationError({"reason": ["Say why: an erasure is audited with its reason."]})
        data["kind"], data["ref"] = named[0], str(data[named[0]])
        if named[0] == "store":
            data["ref"] = f"{data['agent']}/{data['store']}"
        return data


class ErasureCountsSerializer(serializers.Serializer):
    memories = serializers.IntegerField()
    messages = serializers.IntegerField()
    episodes = serializers.IntegerField()
    conversations = serializers.IntegerField()
    entries = serializers.IntegerField()
    materials = serializers.IntegerField()
    derived_memories = serializers.IntegerField()
    requeued_memories = serializers.IntegerField()


class ErasureOutSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    erasure = serializers.IntegerField(required=False, help_text="The ledger entry (not on a dry run).")
    reason = serializers.CharField(required=False)
    created_at = serializers.DateTimeField(required=False)
    kind = serializers.CharField()
    target = serializers.CharField()
    label = serializers.CharField()
    counts = ErasureCountsSerializer()
    memories = serializers.ListField(child=serializers.IntegerField())
    derived_memories = serializers.ListField(
        child=serializers.IntegerField(), help_text="Erased because everything they cited goes."
    )
    requeued_memories = serializers.ListField(
        child=serializers.IntegerField(), help_text="Kept, stale and back in review: they have other support."
    )
    messages = serializers.ListField(child=serializers.IntegerField())
    episodes = serializers.ListField(child=serializers.IntegerField())
    conversations = serializers.ListField(child=serializers.IntegerField())
    entries = serializers.ListField(child=serializers.IntegerField())
    materials = serializers.ListField(child=serializers.IntegerField())
