"""Errors as the Kubernetes API returns them: a metav1.Status with code, reason and message.

kubectl and the Python client turn these into their own errors by code and reason (NotFound,
AlreadyExists, Conflict, Invalid...), so the reasons are the upstream StatusReason strings
(k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None,
                 list_meta: dict[str, Any] | None = None):
        """`list_meta`: the Status's metadata (a 410's continue token)."""
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.list_meta = list_meta or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta),
                                "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def _details(kind: str, name: str, group: str = "") -> dict[str, Any]:
    details = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{what} "{name}" not found', _details(plural, name, group))


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    return ApiError(409, "AlreadyExists", f'{what} "{name}" already exists', _details(plural, name, group))


def conflict(plural: str, name: str, why: str, group: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}',
                    _details(plural, name, group))


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 Invalid; causes are (field path, message), as the upstream field errors."""
    text = "; ".join(f"{path}: {message}" if path else message for path, message in causes)
    details = _details(kind, name, group)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": p} for p, m in causes]
    label = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{label} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def denied(webhook: str, kind: str, name: str, message: str, group: str = "") -> ApiError:
    """What a validating admission webhook's denial looks like to a client (403 Forbidden)."""
    return ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {message}',
                    _details(kind, name, group))


def forbidden(message: str, reason: str = "Forbidden") -> ApiError:
    return ApiError(403, reason, message)


def method_not_supported(what: str, verb: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"{verb} is not supported on {what} by the embedded cluster")


def refused(message: str) -> ApiError:
    """Something the embedded cluster does not implement (a subresource, a field, a verb):
    refused by name, never silently ignored."""
    return ApiError(405, "MethodNotAllowed", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"the request body is larger than {limit} bytes")


def unsupported_media(content_type: str, allowed: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{', '.join(allowed)} (got {content_type or 'none'})")
