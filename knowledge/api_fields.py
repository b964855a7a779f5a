"""Serializer fields shared by the APIs."""

from rest_framework import serializers

from knowledge.limits import json_size_error


class StrictCharField(serializers.CharField):
    """Text that must arrive as a JSON string. DRF's CharField turns 5 or 1.5 into "5" and
    "1.5", so a client sending the wrong type would have it stored silently; this one answers
    400 instead. Used for the texts people and agents write (memories, messages, entries,
    queries); identifiers that may legitimately be numbers (a source's `ref`) stay lenient."""

    default_error_messages = {"not_a_string": "Must be a string, not {type}."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", type=type(data).__name__ if data is not None else "null")
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not declare: a misspelt field (`teir`) is
    a 400 naming it, never silently ignored. Every API input serializer derives from this."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update({name: ["Unknown field."] for name in unknown})
            raise
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return value


class BoundedJSONField(serializers.JSONField):
    """A JSON value (memory `value`, entry `properties`) of at most 64 KiB and 32 levels."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        error = json_size_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class BoundedDictField(BoundedJSONField):
    """A bounded JSON object."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError(f"Must be a JSON object, not {type(data).__name__}.")
        return super().to_internal_value(data)
