"""Serializer fields shared by the APIs."""

from rest_framework import serializers


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
