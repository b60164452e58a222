"""The OpenAPI documents kubectl reads: /openapi/v3 (an index of group-versions) and one
document per group-version, whose PATCH operations declare `fieldValidation` (so kubectl
leaves validation to the server) and whose component schemas carry
`x-kubernetes-group-version-kind` (so `kubectl explain` finds them). A custom resource's schema
is its CRD's openAPIV3Schema as upstream wrote it (crds/: the descriptions `kubectl explain`
shows), with `metadata` a reference to ObjectMeta, as apiextensions-apiserver publishes it; a core
kind's is its upstream model's (schemas.py). /openapi/v2 is a minimal Swagger document (no
definitions: kubectl's client-side validation skips a kind it does not find there, as it does for
a kind the server lacks), in JSON, or in gnostic's OpenAPIv2.proto Document when asked for it as
kubectl asks (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): kubectl only reads
the protobuf form, and a JSON answer made `kubectl apply` of an unknown kind fail with "proto:
cannot parse invalid wire-format data" instead of upstream's "no matches for kind".
"""

from __future__ import annotations

import copy
import functools
import hashlib
from typing import TYPE_CHECKING, Any

from backend.local.apiserver import patch
from backend.local.registry import crds
from backend.local.registry.kinds import Kind, Kinds

if TYPE_CHECKING:
    from backend.local.apiserver.schemas import CoreSchemas

_QUERY = [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
          for n in ("dryRun", "fieldManager", "fieldValidation", "pretty")]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _gvk(kind: Kind) -> list[dict[str, str]]:
    return [{"group": kind.group, "version": kind.version, "kind": kind.kind}]


def _schema_name(kind: Kind) -> str:
    group = ".".join(reversed(kind.group.split("."))) if kind.group else "io.k8s.api.core"
    return f"{group}.{kind.version}.{kind.kind}"


_PREFIXES = (("IoK8sApimachineryPkgApisMetaV1", "io.k8s.apimachinery.pkg.apis.meta.v1."),
             ("IoK8sApimachineryPkgApiResource", "io.k8s.apimachinery.pkg.api.resource."),
             ("IoK8sApimachineryPkgUtilIntstr", "io.k8s.apimachinery.pkg.util.intstr."),
             ("IoK8sApiCoreV1", "io.k8s.api.core.v1."), ("IoK8sApiBatchV1", "io.k8s.api.batch.v1."),
             ("IoK8sApiAutoscalingV2", "io.k8s.api.autoscaling.v2."), ("JobsetV1alpha2", "jobset.v1alpha2."),
             ("TrainerV1alpha1", "trainer.v1alpha1."))


def _definition_name(generated: str) -> str:
    """The generated model's class name as an upstream definition name (kubectl explain shows
    the part after the last dot as the field's type): IoK8sApiCoreV1PodSpec → io.k8s.api.core.v1.PodSpec."""
    for prefix, dotted in _PREFIXES:
        if generated.startswith(prefix):
            return dotted + generated[len(prefix):]
    return generated


def _openapi_schema(node: Any, rename: dict[str, str]) -> Any:
    """pydantic's JSON schema in OpenAPI 3 form: $defs refs → components, Optional unwrapped."""
    if isinstance(node, list):
        return [_openapi_schema(n, rename) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items() if k not in ("title", "$defs")}
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            node = {**options[0], **rest}
    if "$ref" in node:
        generated = node["$ref"].rsplit("/", 1)[-1]
        target = rename.get(generated) or _definition_name(generated)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        ref = {"$ref": f"#/components/schemas/{target}"}
        return {"allOf": [ref], **rest} if rest else ref
    return {k: _openapi_schema(v, rename) for k, v in node.items()}


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _crd_components(kind: Kind, crd_schema: dict[str, Any], schemas: dict[str, Any], core: "CoreSchemas") -> None:
    """The CRD's schema as the kind's component, its metadata ObjectMeta's (with ObjectMeta's own
    definitions, taken from the core models' schema)."""
    top = copy.deepcopy(crd_schema)
    meta = (top.setdefault("properties", {}).get("metadata")) or {}
    top["properties"]["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
                                     "description": meta.get("description") or "Standard object's metadata. More "
                                     "info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
                                     "api-conventions.md#metadata"}
    top["x-kubernetes-group-version-kind"] = _gvk(kind)
    schemas[_schema_name(kind)] = top
    namespace = core.schema("Namespace") or {}
    for def_name, definition in namespace.get("$defs", {}).items():
        if def_name.startswith("IoK8sApimachinery"):
            schemas.setdefault(_definition_name(def_name), _openapi_schema(definition, {}))


def _components(kinds: list[Kind], core: "CoreSchemas") -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for kind in kinds:
        crd_schema = crds.schema(kind.kind)
        if crd_schema is not None:
            _crd_components(kind, crd_schema, schemas, core)
            continue
        doc = core.schema(kind.kind)
        name = _schema_name(kind)
        if doc is None:
            schemas[name] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "x-kubernetes-group-version-kind": _gvk(kind),
                             "description": f"{kind.kind} ({kind.api_version}); its schema is not published by "
                                            "the embedded cluster"}
            continue
        defs = doc.get("$defs", {})
        rename = {doc.get("title", ""): name}
        for def_name, definition in defs.items():
            schemas.setdefault(_definition_name(def_name), _openapi_schema(definition, rename))
        top = _openapi_schema(doc, rename)
        top["x-kubernetes-group-version-kind"] = _gvk(kind)
        schemas[name] = top
    return schemas


def _paths(kinds: list[Kind]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for kind in kinds:
        base = "/" + _gv_path(kind.group, kind.version)
        scope = f"{base}/namespaces/{{namespace}}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"
        ref = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{_schema_name(kind)}"}}}}
        ext = {"x-kubernetes-group-version-kind": _gvk(kind)[0]}
        reads = "create" not in kind.verbs
        collection: dict[str, Any] = {"get": {"operationId": f"list{kind.kind}", **ext,
                                              "x-kubernetes-action": "list", "responses": {"200": ref}}}
        item: dict[str, Any] = {"get": {"operationId": f"read{kind.kind}", **ext, "x-kubernetes-action": "get",
                                        "responses": {"200": ref}}}
        if not reads:
            collection["post"] = {"operationId": f"create{kind.kind}", **ext, "x-kubernetes-action": "post",
                                  "parameters": _QUERY, "requestBody": ref, "responses": {"201": ref}}
            item["put"] = {"operationId": f"replace{kind.kind}", **ext, "x-kubernetes-action": "put",
                           "parameters": _QUERY, "requestBody": ref, "responses": {"200": ref}}
            item["patch"] = {"operationId": f"patch{kind.kind}", **ext, "x-kubernetes-action": "patch",
                             "parameters": _QUERY + [{"name": "force", "in": "query", "schema": {"type": "boolean"}}],
                             "requestBody": {"content": {t: {"schema": {"type": "object"}}
                                                         for t in sorted(patch.accepted(kind))}},
                             "responses": {"200": ref}}
            item["delete"] = {"operationId": f"delete{kind.kind}", **ext, "x-kubernetes-action": "delete",
                              "parameters": _QUERY[:1], "responses": {"200": ref}}
        paths[scope] = collection
        paths[f"{scope}/{{name}}"] = item
    return paths


@functools.cache
def _group_version(kinds: Kinds, core: "CoreSchemas", group: str, version: str) -> dict[str, Any] | None:
    served = kinds.in_version(group, version)
    if not served:
        return None
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (kfcockpit embedded cluster)", "version": "v1.36.0"},
            "paths": _paths(served), "components": {"schemas": _components(served, core)}}


def _index(kinds: Kinds) -> dict[str, Any]:
    versions = [("", "v1")] + [(g, v) for g, vs in kinds.groups().items() for v in vs]
    paths = {}
    for group, version in versions:
        path = _gv_path(group, version)
        digest = hashlib.sha256(f"{path}-{len(kinds.in_version(group, version))}".encode()).hexdigest()[:16].upper()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


_V2_TITLE, _V2_VERSION = "Kubernetes (kfcockpit embedded cluster)", "v1.36.0"
# What kubectl asks for, and what kube-openapi's handler answers (an "@" is no media type token)
V2_PROTOBUF_ASKED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _proto_field(number: int, payload: bytes) -> bytes:
    """One length-delimited field (wire type 2): a string or a nested message."""
    length, size = b"", len(payload)
    while True:
        length += bytes([(size & 0x7F) | (0x80 if size > 0x7F else 0)])
        size >>= 7
        if not size:
            break
    return bytes([number << 3 | 2]) + length + payload


def document_v2_protobuf() -> bytes:
    """The /openapi/v2 document as gnostic's openapi_v2.Document: swagger (1), info (2: title 1,
    version 2), paths (8) and definitions (9), both empty."""
    info = _proto_field(1, _V2_TITLE.encode()) + _proto_field(2, _V2_VERSION.encode())
    return _proto_field(1, b"2.0") + _proto_field(2, info) + _proto_field(8, b"") + _proto_field(9, b"")


def document(kinds: Kinds, parts: list[str], core: "CoreSchemas") -> dict[str, Any] | None:
    """The document at /openapi/<parts>, or None."""
    if parts == ["v2"]:
        return {"swagger": "2.0", "info": {"title": _V2_TITLE, "version": _V2_VERSION}, "paths": {}, "definitions": {}}
    if parts == ["v3"]:
        return _index(kinds)
    if len(parts) >= 3 and parts[0] == "v3":
        if parts[1] == "api" and len(parts) == 3:
            return _group_version(kinds, core, "", parts[2])
        if parts[1] == "apis" and len(parts) == 4:
            return _group_version(kinds, core, parts[2], parts[3])
    return None

