"""`metadata.managedFields`: who set which field, kept on every write as kube-apiserver's field
manager keeps it (k8s.io/apimachinery pkg/util/managedfields/internal, over
sigs.k8s.io/structured-merge-diff merge/update.go), and server-side apply built on it.

- `record_update` (an Update operation: create, update, patch, a controller's write): the fields
  that changed move to the writer's entry (manager, Update, apiVersion, subresource) and leave
  everyone else's; removed fields leave every entry (Updater.Update, managedFieldsUpdater). The
  managedFields a request carries replace the stored ones, `[]` resets them, none keeps them
  (decodeLiveOrNew); a subresource's write always keeps the stored ones.
- `apply` (server-side apply): the configuration merges into the live object; the applier owns
  exactly the fields it applied; a field it applied before and dropped now is removed unless
  someone else owns it (Updater.prune); changing a field another manager owns is a 409 naming
  each conflict as upstream's conflict.go words it, unless forced, which takes the field over.
- Both: apiVersion, kind and the server's metadata are nobody's (stripmeta.go); the main
  resource's writes own nothing under status and /status's nothing outside it (reset fields);
  at most 10 Update entries, the oldest merged into "ancient-changes" (capmanagers.go); entries
  ordered as sortEncodedManagedFields orders them.

Not modelled: the last-applied-configuration annotation's part (lastappliedmanager.go: a
client-side apply's fields handed to `kubectl apply --server-side` without conflicts) and
conversion between versions (every kind here is served in one version).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from backend.local.registry.fieldpath import (
    Comparison,
    Element,
    Path,
    compare,
    ensure_named,
    field_set,
    from_fields_v1,
    merge,
    path_string,
    remove_items,
    to_fields_v1,
)
from backend.local.registry.fieldshapes import Shape
from backend.local.registry.status import ApiError, bad_request
from backend.local.registry.values import copied

APPLY, UPDATE = "Apply", "Update"
MAX_UPDATERS = 10  # DefaultMaxUpdateManagers
ANCIENT = "ancient-changes"
_STRIPPED = {(("f", "apiVersion"),), (("f", "kind"),), (("f", "metadata"),)} | {
    (("f", "metadata"), ("f", name)) for name in ("name", "namespace", "creationTimestamp", "selfLink", "uid",
                                                 "clusterName", "generation", "managedFields", "resourceVersion")}

Key = tuple[str, str, str, str]  # manager, operation, apiVersion ("" for Apply), subresource


class Entry:
    """One managedFields entry. Its field set is decoded from the stored FieldsV1 only when a
    write may touch it, and encoded again only when it changed: most writes (a status update)
    touch one manager's fields, and every other entry stays as stored."""

    def __init__(self, manager: str, operation: str, api_version: str, subresource: str, time: str | None,
                 fields: set[Path] | None, raw: dict[str, Any] | None = None):
        self.manager, self.operation, self.api_version, self.subresource, self.time = (
            manager, operation, api_version, subresource, time)
        self._fields, self.raw = fields, raw  # raw: the FieldsV1 the fields are, while unchanged

    @property
    def fields(self) -> set[Path]:
        if self._fields is None:
            self._fields = from_fields_v1(self.raw or {})
        return self._fields

    @fields.setter
    def fields(self, paths: set[Path]) -> None:
        self._fields, self.raw = paths, None

    def may_hold(self, tops: set[Element]) -> bool:
        """Whether the entry may own a path under one of these top-level fields (without
        decoding it when it is still the stored FieldsV1)."""
        if self._fields is not None or self.raw is None:
            return True
        return any(f"{kind}:{name}" in self.raw for kind, name in tops)

    @property
    def key(self) -> Key:
        return self.manager, self.operation, "" if self.operation == APPLY else self.api_version, self.subresource

    def identifier(self) -> str:
        """BuildManagerIdentifier: the entry without its time and fields, as JSON."""
        found = {"manager": self.manager, "operation": self.operation}
        if self.operation != APPLY and self.api_version:
            found["apiVersion"] = self.api_version
        if self.subresource:
            found["subresource"] = self.subresource
        return json.dumps(found, separators=(",", ":"))

    def printed(self) -> str:
        """printManager: how a conflict names this entry."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        return f"{text} using {self.api_version}" if self.operation == UPDATE else text


Managed = dict[Key, Entry]


def decode(entries: Any) -> Managed:
    """DecodeManagedFields; ValueError for entries it refuses."""
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    found: Managed = {}
    for i, raw in enumerate(entries):
        if not isinstance(raw, dict) or raw.get("operation") not in (APPLY, UPDATE):
            raise ValueError("operation must be `Apply` or `Update`")
        if not raw.get("apiVersion"):
            raise ValueError("apiVersion must not be empty")
        if raw.get("fieldsType") != "FieldsV1":
            raise ValueError(f"missing or invalid fieldsType in managed fields entry {i}")
        fields_v1 = raw.get("fieldsV1") or {}
        if not isinstance(fields_v1, dict):
            raise ValueError(f"invalid fieldsV1 in managed fields entry {i}")
        entry = Entry(str(raw.get("manager") or ""), raw["operation"], raw["apiVersion"],
                      str(raw.get("subresource") or ""), raw.get("time"), None, fields_v1)
        found[entry.key] = entry
    return found


def encode(managed: Managed) -> list[dict[str, Any]] | None:
    entries = sorted(managed.values(), key=lambda e: (e.operation, e.time or "", e.manager, e.api_version,
                                                       e.subresource))
    out = []
    for entry in entries:
        raw: dict[str, Any] = {"manager": entry.manager, "operation": entry.operation, "apiVersion": entry.api_version}
        if entry.time:
            raw["time"] = entry.time
        raw["fieldsType"] = "FieldsV1"
        raw["fieldsV1"] = entry.raw if entry.raw is not None else to_fields_v1(entry.fields)
        if entry.subresource:
            raw["subresource"] = entry.subresource
        out.append(raw)
    return out or None


@dataclass(frozen=True)
class Writer:
    """Who writes, how, and where: what a managedFields entry is keyed by."""

    manager: str
    api_version: str
    subresource: str = ""  # "status", "finalize"; "" for the main resource
    status_apart: bool = True  # the kind has a status subresource (the main resource owns none of it)

    def owns(self, path: Path) -> bool:
        """Whether a write here may own `path` (stripmeta.go and the strategies' reset fields)."""
        if path in _STRIPPED or not path:
            return False
        under_status = path[0] == ("f", "status")
        if self.subresource == "status":
            return under_status
        return not (under_status and self.status_apart)


def _body(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The object as the field manager compares it: without managedFields."""
    if obj is None:
        return {}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _ownable(body: dict[str, Any], writer: Writer) -> dict[str, Any]:
    """The part of an object a write here may own (Writer.owns): /status's only its status, the
    main resource's of a kind with a status subresource all but its status. Comparing only that
    part finds what comparing the whole and filtering would, without walking the rest."""
    if writer.subresource == "status":
        return {"status": body["status"]} if "status" in body else {}
    if writer.status_apart:
        return {k: v for k, v in body.items() if k != "status"}
    return body


def _filtered(found: Comparison, writer: Writer) -> Comparison:
    keep: Callable[[set[Path]], set[Path]] = lambda paths: {p for p in paths if writer.owns(p)}  # noqa: E731
    return Comparison(keep(found.added), keep(found.modified), keep(found.removed))


def _starting(old: dict[str, Any] | None, new: dict[str, Any], writer: Writer) -> Managed:
    """decodeLiveOrNew: the request's managedFields, unless it sends none or writes a subresource."""
    stored = (old or {}).get("metadata", {}).get("managedFields")
    given = new.get("metadata", {}).get("managedFields")
    if not writer.subresource and given is not None:
        if given == [] or given == [{}]:
            return {}
        try:
            decoded = decode(given)
        except ValueError:
            decoded = {}
        if decoded:
            return decoded
    try:
        return decode(stored) if stored else {}
    except ValueError:
        return {}


def _take(managed: Managed, found: Comparison, writer_key: Key | None, force: bool) -> None:
    """Updater.update: others lose what this write changed (a conflict unless forced) and what it
    removed; entries left empty go."""
    changed, touched = found.changed(), found.changed() | found.removed
    tops = {path[0] for path in touched}
    others = {k: e for k, e in managed.items() if k != writer_key and e.may_hold(tops)}
    conflicts = {k: e.fields & changed for k, e in others.items() if e.fields & changed}
    if conflicts and not force:
        raise conflict_error([(managed[k], paths) for k, paths in conflicts.items()])
    for entry in others.values():
        if entry.fields & touched:
            entry.fields = entry.fields - touched
    for key in [k for k, e in managed.items() if not (e.raw if e._fields is None else e._fields)]:
        del managed[key]


def _cap(managed: Managed) -> None:
    """capmanagers.go: past MAX_UPDATERS Update entries, the oldest merge into one."""
    updaters = sorted((e for e in managed.values() if e.operation == UPDATE),
                      key=lambda e: (e.time or "", e.identifier()))
    if len(updaters) <= MAX_UPDATERS:
        return
    merged = updaters[:len(updaters) - MAX_UPDATERS + 1]
    for entry in merged:
        del managed[entry.key]
    bucket = Entry(ANCIENT, UPDATE, merged[-1].api_version, "", merged[-1].time,
                   set().union(*(e.fields for e in merged)))
    previous = managed.pop(bucket.key, None)
    if previous is not None:
        bucket.fields |= previous.fields
    managed[bucket.key] = bucket


def empty_live(new: dict[str, Any], typed: bool) -> dict[str, Any]:
    """What a create compares against: nothing, or for a core (typed) kind its zero value's
    top-level structs, which runtime.DefaultUnstructuredConverter writes out even when empty."""
    return {k: {} for k in ("spec", "status") if typed and k in new}


def record_update(shape: Shape, old: dict[str, Any] | None, new: dict[str, Any], writer: Writer, now: str,
                  live_shell: dict[str, Any] | None = None) -> None:
    """Set new's managedFields for an Update by `writer` (old: the stored object, None on create)."""
    before = _body(old) if old is not None else (live_shell or {})
    found = _filtered(compare(_ownable(before, writer), _ownable(_body(new), writer), shape), writer)
    given = new.get("metadata", {}).get("managedFields")
    if old is not None and not (found.changed() or found.removed) and (writer.subresource or given is None):
        # nothing this write may own changed: the stored entries stand (a controller's no-op write)
        stored = old["metadata"].get("managedFields")
        new["metadata"].pop("managedFields", None)
        if stored:
            new["metadata"]["managedFields"] = copied(stored)
        return
    managed = _starting(old, new, writer)
    _take(managed, found, None, force=True)
    changed = found.changed()
    if changed:
        key = Entry(writer.manager, UPDATE, writer.api_version, writer.subresource, now, set()).key
        entry = managed.get(key) or Entry(writer.manager, UPDATE, writer.api_version, writer.subresource, now, set())
        if not changed <= entry.fields:  # else its FieldsV1 stands as stored
            entry.fields = entry.fields | changed
        entry.time = now
        managed[key] = entry
    _cap(managed)
    new.setdefault("metadata", {})["managedFields"] = encode(managed)
    if new["metadata"]["managedFields"] is None:
        del new["metadata"]["managedFields"]


def _prune(merged: dict[str, Any], managed: Managed, applier: Key, last: Entry | None, shape: Shape) -> dict[str, Any]:
    """Updater.prune: remove what the applier applied last time and not now, unless another
    manager (or the new configuration) owns it."""
    if last is None or not last.fields:
        return merged
    previous = ensure_named(last.fields, shape)
    pruned = remove_items(merged, previous, shape)
    owned = ensure_named(set().union(*(e.fields for e in managed.values())), shape)
    everything = ensure_named(field_set(merged, shape), shape)
    pruned = remove_items(merged, everything - (ensure_named(field_set(pruned, shape), shape) | owned), shape)
    return remove_items(merged, (everything - ensure_named(field_set(pruned, shape), shape)) & previous, shape)


def apply(shape: Shape, live: dict[str, Any] | None, config: dict[str, Any], writer: Writer, force: bool, now: str,
          live_shell: dict[str, Any] | None = None) -> dict[str, Any]:
    """The object after `writer` applies `config` to `live` (None: it is created), with its
    managedFields; 409 Conflict when it would change fields other managers own."""
    if (config.get("metadata") or {}).get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    managed = {}
    if live is not None:
        try:
            managed = decode(live["metadata"].get("managedFields") or [])
        except ValueError:
            managed = {}
    base = _body(live) if live is not None else (live_shell or {})
    key = Entry(writer.manager, APPLY, writer.api_version, writer.subresource, None, set()).key
    last = managed.get(key)
    merged = merge(base, config, shape)
    applied = {p for p in field_set(config, shape) if writer.owns(p)}
    managed[key] = Entry(writer.manager, APPLY, writer.api_version, writer.subresource,
                         last.time if last else None, applied)
    merged = _prune(merged, managed, key, last, shape)
    _take(managed, _filtered(compare(base, merged, shape), writer), key, force)
    if merged != base and key in managed:
        managed[key].time = now
    _cap(managed)
    encoded = encode(managed)
    merged.setdefault("metadata", {}).pop("managedFields", None)
    if encoded:
        merged["metadata"]["managedFields"] = encoded
    return merged


def conflict_error(conflicts: list[tuple[Entry, set[Path]]]) -> ApiError:
    """internal/conflict.go NewConflictError: 409 Conflict, a cause per field."""
    pairs = sorted(((entry, path) for entry, paths in conflicts for path in paths),
                   key=lambda pair: (pair[0].identifier(), path_string(pair[1])))
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {entry.printed()}",
               "field": path_string(path)} for entry, path in pairs]
    if len(pairs) == 1:
        entry, path = pairs[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.printed()}: {path_string(path)}"
    else:
        lines: list[str] = []
        for identifier in sorted({entry.identifier() for entry, _ in pairs}):
            entries = [(e, p) for e, p in pairs if e.identifier() == identifier]
            lines.append(f"conflicts with {entries[0][0].printed()}:")
            lines += [f"- {path_string(p)}" for _, p in entries]
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})
