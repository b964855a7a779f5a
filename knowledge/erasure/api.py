"""POST /api/erasures: erase a memory, message, conversation, channel, entry, material, agent's
store or person (admins)."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.erasure.serializers import ErasureInSerializer, ErasureOutSerializer
from knowledge.erasure.services import erasure_apply
from knowledge.principals.permissions import IsAdmin
from knowledge.schema import error_response


@extend_schema(
    request=ErasureInSerializer,
    responses={
        200: ErasureOutSerializer,
        201: ErasureOutSerializer,
        404: error_response("Nothing of that name or id to erase."),
        409: error_response("Erased already: nothing of it is left; nothing was written."),
    },
    summary="Erase content for good (admins); dry_run previews exactly what goes",
    description=(
        'Name one of {"memory": id}, {"message": id}, {"conversation": id}, {"channel": name}, '
        '{"entry": id}, {"material": id}, {"store": store, "agent": name}, {"person": name}, with a '
        "`reason`. The content goes irreversibly, with what was derived from it (episodes, "
        "memories citing only erased sources; memories with other support go stale and back to "
        "review), and a tombstone stays in the erasure ledger (ids and content hashes). With "
        "dry_run=true the answer is the same preview and nothing is written."
    ),
    operation_id="erasure_create",
)
@api_view(["POST"])
@permission_classes([IsAdmin])
def erasure_create(request):
    data = ErasureInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    result = erasure_apply(
        actor=request.user, kind=v["kind"], ref=v["ref"], reason=v["reason"], dry_run=v["dry_run"]
    )
    return Response(ErasureOutSerializer(result.out()).data, status=200 if result.dry_run else 201)
