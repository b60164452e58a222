"""A request's query options as kube-apiserver decodes and validates them before it does anything
else: metav1 CreateOptions, UpdateOptions, PatchOptions (meta/v1/validation: fieldManager at
most 128 printable bytes and required for apply, `force` only for apply, dryRun only "All",
fieldValidation one of Ignore, Warn, Strict) and internalversion ListOptions (a number that is
not one is a 400, as the parameter codec's strconv error; resourceVersionMatch as
ValidateListOptions has it). A value the codec cannot read answers 400 BadRequest; one it reads
but the validation refuses, 422 Invalid on the options kind (`PatchOptions.meta.k8s.io "" is
invalid: ...`). The field manager of a request that names none is its User-Agent's product
(handlers/rest.go managerOrUserAgent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from backend.local.apiserver import patch
from backend.local.apiserver.wire import parse_bool, parse_int
from backend.local.registry import fielderrors as fe
from backend.local.registry.objectmeta import FIELD_MANAGER_LIMIT, field_manager
from backend.local.registry.status import ApiError, bad_request

_VALIDATIONS = ("", "Ignore", "Strict", "Warn")


def _user_agent_product(agent: str) -> str:
    """prefixFromUserAgent: up to the first '/', printable characters, at most 128 bytes."""
    out = ""
    for char in agent.split("/")[0]:
        if not char.isprintable():
            continue
        if len((out + char).encode()) > FIELD_MANAGER_LIMIT:
            break
        out += char
    return out


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool
    manager: str  # the field manager named, or the User-Agent's product
    field_validation: str
    force: bool


def write_options(request: web.Request, options_kind: str, content_type: str = "") -> WriteOptions:
    """CreateOptions, UpdateOptions or PatchOptions of the request (PatchOptions with its patch's
    content type), validated as ValidateCreateOptions / ValidateUpdateOptions /
    ValidatePatchOptions do."""
    query = request.query
    dry_run = query.getall("dryRun", [])
    manager = query.get("fieldManager", "")
    validation = query.get("fieldValidation", "")
    force = parse_bool(query, "force") if options_kind == "PatchOptions" else None
    errors = []
    if options_kind == "PatchOptions":
        if content_type != patch.APPLY and force is not None:
            errors.append(fe.forbidden("force", "may not be specified for non-apply patch"))
        if content_type == patch.APPLY and not manager:
            errors.append(fe.required("fieldManager", "is required for apply patch"))
    errors += field_manager(manager, "fieldManager")
    if any(value != "All" for value in dry_run):
        errors.append(fe.not_supported("dryRun", fe.GoJSON("[]string{" + ", ".join(json.dumps(v) for v in dry_run)
                                                           + "}"), ["All"]))
    if validation not in _VALIDATIONS:
        errors.append(fe.not_supported("fieldValidation", validation, list(_VALIDATIONS)))
    if errors:
        raise fe.invalid(f"{options_kind}.meta.k8s.io", "", errors)
    return WriteOptions(bool(dry_run), manager or _user_agent_product(request.headers.get("User-Agent", "")),
                        validation, bool(force))


_PROPAGATIONS = ["Foreground", "Background", "Orphan", "nil"]


def delete_options(found: dict[str, Any]) -> dict[str, Any]:
    """DeleteOptions (already decoded, wire.delete_options) as ValidateDeleteOptions checks them."""
    errors = []
    policy = found.get("propagationPolicy")
    if found.get("orphanDependents") is not None and policy is not None:
        errors.append(fe.invalid_value("propagationPolicy", policy,
                                       "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in _PROPAGATIONS[:3]:
        errors.append(fe.not_supported("propagationPolicy", policy, _PROPAGATIONS))
    dry_run = found.get("dryRun") or []
    if any(value != "All" for value in dry_run):
        errors.append(fe.not_supported("dryRun", fe.GoJSON("[]string{" + ", ".join(json.dumps(v) for v in dry_run)
                                                           + "}"), ["All"]))
    if errors:
        raise fe.invalid("DeleteOptions.meta.k8s.io", "", errors)
    return found


@dataclass(frozen=True)
class ListOptions:
    watch: bool
    limit: int
    continue_token: str
    resource_version: str
    match: str  # resourceVersionMatch
    timeout: int | None  # timeoutSeconds
    bookmarks: bool
    send_initial_events: bool | None  # None: not sent


NOT_OLDER_THAN = "NotOlderThan"


def list_options(request: web.Request) -> ListOptions:
    query = request.query
    found = ListOptions(watch=bool(parse_bool(query, "watch")), limit=parse_int(query, "limit") or 0,
                        continue_token=query.get("continue", ""), resource_version=query.get("resourceVersion", ""),
                        match=query.get("resourceVersionMatch", ""), timeout=parse_int(query, "timeoutSeconds"),
                        bookmarks=bool(parse_bool(query, "allowWatchBookmarks")),
                        send_initial_events=parse_bool(query, "sendInitialEvents"))
    errors = _watch_errors(found) if found.watch else _list_errors(found)
    if errors:
        raise fe.invalid("ListOptions.meta.k8s.io", "", errors)
    if found.continue_token and found.resource_version:
        raise bad_request("specifying resource version is not allowed when using continue")
    return found


def _watch_errors(found: ListOptions) -> list[fe.FieldError]:
    """validateWatchOptions, with the WatchList feature on (as kube-apiserver v1.36 has it): a
    watch-list names sendInitialEvents together with resourceVersionMatch NotOlderThan."""
    errors = []
    if found.send_initial_events is not None and found.match != NOT_OLDER_THAN:
        errors.append(fe.forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch "
                                                           f"to {NOT_OLDER_THAN}"))
    if found.match:
        if found.send_initial_events is None:
            errors.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                                                               "sendInitialEvents is provided"))
        if found.match != NOT_OLDER_THAN:
            errors.append(fe.not_supported("resourceVersionMatch", found.match, [NOT_OLDER_THAN]))
        if found.continue_token:
            errors.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                                                               "provided"))
    return errors


def _list_errors(found: ListOptions) -> list[fe.FieldError]:
    """ValidateListOptions for a list."""
    errors = []
    if found.match:
        if not found.resource_version:
            errors.append(fe.forbidden("resourceVersionMatch",
                                       "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if found.continue_token:
            errors.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                                                               "provided"))
        if found.match not in ("Exact", "NotOlderThan"):
            errors.append(fe.not_supported("resourceVersionMatch", found.match, ["Exact", "NotOlderThan", ""]))
        if found.match == "Exact" and found.resource_version == "0":
            errors.append(fe.forbidden("resourceVersionMatch",
                                       'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if found.send_initial_events is not None:
        errors.append(fe.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errors


def check_resource_version(text: str, resource: str) -> int | None:
    """A read's resourceVersion as APIObjectVersioner.ParseResourceVersion reads it: None for
    "", else a number (422 Invalid when it is not one)."""
    if not text:
        return None
    if text.isascii() and text.isdigit() and int(text) < 2 ** 64:
        return int(text)
    raise ApiError(422, "Invalid", f'{resource} "" is invalid: resourceVersion: Invalid value: {json.dumps(text)}: '
                                   f'strconv.ParseUint: parsing {json.dumps(text)}: invalid syntax',
                   {"kind": resource, "causes": [{"reason": "FieldValueInvalid", "field": "resourceVersion",
                                                  "message": f"Invalid value: {json.dumps(text)}"}]})
