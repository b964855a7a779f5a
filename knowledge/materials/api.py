"""Materials API: ask an agent to learn a source (`POST /api/materials`: a multipart file, or
JSON text / html), list and read materials, download the stored original, retry learning;
connector mirrors (`PUT`/`DELETE /api/connectors/{connector}/documents/{ref}`); external
signals (`POST /api/signals`) and their routing rules (`/api/signal-rules`). Thin views over
knowledge.materials.services / .signals_routing and .selectors; store visibility through
knowledge.access."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from knowledge import access
from knowledge.access import material_get_for
from knowledge.materials import grants, services, signals_routing
from knowledge.materials.selectors import citing_entries, materials_for, owner_for
from knowledge.materials.serializers import (
    ConnectorDocumentIn,
    ConnectorGrantIn,
    ConnectorGrantOut,
    ConnectorOut,
    MaterialCreatedOut,
    MaterialDetailOut,
    MaterialFileIn,
    MaterialOut,
    MaterialPasteIn,
    RetryIn,
    SignalIn,
    SignalOut,
    SignalRuleIn,
    SignalRuleOut,
    grant_out,
    material_out,
    rule_out,
    version_out,
)
from knowledge.materials.storage import original_response
from knowledge.models import Material, SignalRule
from knowledge.principals.permissions import IsAdmin, IsAgentOrReviewer, IsIntegrationOrAdmin
from knowledge.schema import error_response
from knowledge.web import JSONParser, no_body, validated

TOO_LARGE = error_response("The original is larger than BRAIN_MATERIAL_MAX_MB; nothing was stored.")
CONFLICT = error_response("The material's state does not allow this.")

# --- serializers -----------------------------------------------------------------------------


# --- views -----------------------------------------------------------------------------------


class MaterialParsers:
    """JSON for pasted text and web content, multipart for files."""

    classes = [JSONParser, MultiPartParser]


@extend_schema(
    methods=["GET"],
    operation_id="materials_list",
    summary="List the materials you can see",
    parameters=[
        OpenApiParameter("state", str, enum=[s for s, _ in Material.STATES]),
        OpenApiParameter("kind", str, enum=[k for k, _ in Material.KINDS]),
    ],
    responses={200: inline_serializer("MaterialList", {"results": serializers.ListField(child=MaterialOut)})},
)
@extend_schema(
    methods=["POST"],
    summary="Ask an agent to learn a source",
    description="multipart: `file`, `agent`, `scope`, `title` — stored, then learned by a job (202 body: "
    "the material, `queued`). JSON: `text` or `html` with `title`, `agent`, `scope` — learned at once into "
    "one entry (`entry`); HTML is read as its page shows it (the main content, blocks kept; no navigation, "
    "header, footer or scripts) and titled by its <title> or first <h1> when `title` is left out. Types are judged from the bytes; a refused type is a 400 and stores nothing.",
    request={"multipart/form-data": MaterialFileIn, "application/json": MaterialPasteIn},
    responses={201: MaterialCreatedOut, 413: TOO_LARGE},
)
@api_view(["GET", "POST"])
@parser_classes(MaterialParsers.classes)
@permission_classes([IsAgentOrReviewer])
def material_collection(request):
    principal = request.user
    if request.method == "GET":
        qs = materials_for(principal, state=request.query_params.get("state", ""))
        kind = request.query_params.get("kind", "")
        if kind:
            if kind not in dict(Material.KINDS):
                raise ValidationError({"kind": [f"One of {', '.join(dict(Material.KINDS))}."]})
            qs = qs.filter(kind=kind)
        state = request.query_params.get("state", "")
        if state and state not in dict(Material.STATES):
            raise ValidationError({"state": [f"One of {', '.join(dict(Material.STATES))}."]})
        return Response({"results": [material_out(m) for m in qs[:500]]})
    if request.content_type.startswith("multipart/"):
        data = validated(MaterialFileIn, request.data)
        owner = owner_for(principal, data.get("agent"))
        upload = data["file"]
        material = services.material_upload(
            actor=principal,
            owner=owner,
            store=access.parse_scope(data["scope"]),
            filename=upload.name or "",
            data=upload.read(),
            title=data.get("title") or "",
        )
        material.refresh_from_db()
        return Response({"material": material_out(material), "entry": None}, status=status.HTTP_201_CREATED)
    data = validated(MaterialPasteIn, request.data)
    owner = owner_for(principal, data.get("agent"))
    material = services.material_paste(
        actor=principal,
        owner=owner,
        store=access.parse_scope(data["scope"]),
        title=data["title"],
        text=data.get("text", ""),
        html=data.get("html", ""),
    )
    entry = material.entry
    material.refresh_from_db()
    return Response({"material": material_out(material), "entry": entry.pk}, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="One material: its state, versions and the entries citing it", responses=MaterialDetailOut
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def material_detail(request, material_id):
    material = material_get_for(request.user, material_id)
    return Response(
        {
            "material": material_out(material),
            "versions": [version_out(v) for v in material.versions.order_by("-number")],
            "entries": [
                {"id": e.pk, "name": e.name, "blocks": e.citing_blocks}
                for e in citing_entries(request.user, material)
            ],
        }
    )


@extend_schema(
    summary="Download the stored original (exact bytes, as an attachment)",
    parameters=[OpenApiParameter("version", int, description="A version number; default the current one.")],
    responses={
        (200, "application/octet-stream"): OpenApiResponse(
            description="The original's bytes; Content-Type is its sniffed media type."
        ),
        410: error_response("The material storage no longer holds this original."),
    },
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def material_original(request, material_id):
    material = material_get_for(request.user, material_id)
    version = None
    if "version" in request.query_params:
        try:
            number = int(request.query_params["version"])
        except ValueError:
            raise ValidationError({"version": ["A version number."]}) from None
        version = material.versions.filter(number=number).first()
        if version is None:
            raise ValidationError({"version": [f"Material {material.pk} has no version {number}."]})
    return original_response(material, version)


@extend_schema(
    summary="Retry learning (or learn again) from the stored original",
    description="Queues the material for learning again. An original missing from the material "
    "storage queues nothing: the material is answered failed, its `reason` saying so.",
    request=RetryIn,
    responses={200: MaterialOut, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def material_retry(request, material_id):
    data = validated(RetryIn, request.data or {})
    material = material_get_for(request.user, material_id)
    access.check_write(request.user, owner=material.owner, store=material.store)
    material = services.material_retry(actor=request.user, material=material, again=data["again"])
    material.refresh_from_db()
    return Response(material_out(material))


@extend_schema(
    methods=["PUT"],
    summary="Create or update a connector's mirror of an external document",
    description="A changed version is stored as a new version (the old one kept), queued for learning, "
    "and makes the memories citing the document stale by the invalidation mode; the same version is a "
    'no-op. `"access": "lost"` withdraws the mirror like DELETE. An integration writes only into a '
    "store an admin granted it (`/api/connector-grants`) and only the documents it mirrored (403).",
    request={"application/json": ConnectorDocumentIn, "multipart/form-data": ConnectorDocumentIn},
    responses={200: ConnectorOut, 201: ConnectorOut, 409: CONFLICT, 413: TOO_LARGE},
)
@extend_schema(
    methods=["DELETE"],
    summary="Withdraw a connector's mirror (kept, marked withdrawn; dependants go stale)",
    request=None,
    responses={
        200: ConnectorOut,
        400: error_response("The connector name or document reference is malformed; nothing was withdrawn."),
    },
)
@api_view(["PUT", "DELETE"])
@parser_classes(MaterialParsers.classes)
@permission_classes([IsIntegrationOrAdmin])
def connector_document(request, connector, ref):
    _check_connector(connector, ref)
    if request.method == "DELETE":
        no_body(lambda r: None)(request)
        material = services.connector_document_withdraw(actor=request.user, connector=connector, ref=ref)
        return Response({"material": material_out(material), "outcome": "withdrawn"})
    data = validated(ConnectorDocumentIn, request.data)
    if data["access"] == "lost":
        material = services.connector_document_withdraw(actor=request.user, connector=connector, ref=ref)
        return Response({"material": material_out(material), "outcome": "withdrawn"})
    owner = owner_for(request.user, data["agent"])
    upload = data.get("file")
    body = upload.read() if upload is not None else data["content"].encode()
    material, outcome = services.connector_document_put(
        actor=request.user,
        connector=connector,
        ref=ref,
        owner=owner,
        store=access.parse_scope(data["scope"]),
        title=data["title"],
        version=data["version"],
        data=body,
        filename=(upload.name if upload is not None else f"{ref.replace('/', '_')}.txt"),
    )
    material.refresh_from_db()
    code = status.HTTP_201_CREATED if outcome == "created" else status.HTTP_200_OK
    return Response({"material": material_out(material), "outcome": outcome}, status=code)


def _check_connector(connector: str, ref: str) -> None:
    import re

    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", connector):
        raise ValidationError(
            {"connector": ["A connector name is a lower-case slug of at most 64 characters."]}
        )
    if not ref or len(ref) > 300 or "#" in ref:
        raise ValidationError({"ref": ["A document ref has 1 to 300 characters and no #."]})


@extend_schema(
    summary="Post an external signal (routed by the signal routing rules)",
    request=SignalIn,
    responses={200: SignalOut, 201: SignalOut},
)
@api_view(["POST"])
@permission_classes([IsIntegrationOrAdmin])
def signal_post(request):
    data = validated(SignalIn, request.data)
    signal, duplicate = signals_routing.signal_receive(actor=request.user, **data)
    out = {
        "id": signal.pk,
        "message": signal.message_id,
        "channel": signal.message.channel.name,
        "store": signal.message.store,
        "learn": signal.learn,
        "rule": signal.rule_id,
        "duplicate": duplicate,
    }
    return Response(out, status=status.HTTP_200_OK if duplicate else status.HTTP_201_CREATED)


@extend_schema(
    methods=["GET"],
    summary="List the signal routing rules",
    responses=serializers.ListSerializer(child=SignalRuleOut),
)
@extend_schema(
    methods=["POST"],
    summary="Add a signal routing rule",
    request=SignalRuleIn,
    responses={201: SignalRuleOut, 409: CONFLICT},
)
@api_view(["GET", "POST"])
@permission_classes([IsAdmin])
def signal_rule_collection(request):
    if request.method == "GET":
        return Response([rule_out(r) for r in SignalRule.objects.all()])
    data = validated(SignalRuleIn, request.data)
    rule = signals_routing.signal_rule_save(actor=request.user, rule_id=None, **data)
    return Response(rule_out(rule), status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["PUT"],
    summary="Change a signal routing rule (applies to the next signals)",
    request=SignalRuleIn,
    responses={200: SignalRuleOut, 409: CONFLICT},
)
@extend_schema(
    methods=["DELETE"], summary="Remove a signal routing rule", request=None, responses={204: None}
)
@api_view(["PUT", "DELETE"])
@permission_classes([IsAdmin])
def signal_rule_detail(request, rule_id):
    if request.method == "DELETE":
        no_body(lambda r: None)(request)
        signals_routing.signal_rule_delete(actor=request.user, rule_id=rule_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
    data = validated(SignalRuleIn, request.data)
    rule = signals_routing.signal_rule_save(actor=request.user, rule_id=rule_id, **data)
    return Response(rule_out(rule))


@extend_schema(
    methods=["GET"],
    summary="List the connector grants (which stores each integration may mirror documents into)",
    responses=serializers.ListSerializer(child=ConnectorGrantOut),
)
@extend_schema(
    methods=["POST"],
    summary="Grant an integration one agent's store for its connector documents",
    request=ConnectorGrantIn,
    responses={201: ConnectorGrantOut, 409: CONFLICT},
)
@api_view(["GET", "POST"])
@permission_classes([IsAdmin])
def connector_grant_collection(request):
    if request.method == "GET":
        return Response([grant_out(g) for g in grants.connector_grants()])
    data = validated(ConnectorGrantIn, request.data)
    grant = grants.connector_grant_add(actor=request.user, **data)
    return Response(grant_out(grant), status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["DELETE"],
    summary="Take a connector grant back (documents already mirrored stay)",
    request=None,
    responses={204: None},
)
@api_view(["DELETE"])
@permission_classes([IsAdmin])
@no_body
def connector_grant_detail(request, grant_id):
    grants.connector_grant_delete(actor=request.user, grant_id=grant_id)
    return Response(status=status.HTTP_204_NO_CONTENT)
