"""Discovery: what `kubectl api-resources` and every client's RESTMapper read first.

The legacy documents (/api, /api/v1, /apis, /apis/<group>/<version>) and the aggregated ones
(apidiscovery.k8s.io/v2, one request for all groups) that kubectl 1.30+ asks for first.
"""

from __future__ import annotations

from typing import Any

from backend.local.registry.kinds import SUBRESOURCE_KINDS, Kind, Kinds

# The Kubernetes version this API reports: within kubectl 1.37's supported skew (the shipped client).
VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.0-kfcockpit", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64",
           "emulationMajor": "1", "emulationMinor": "36", "minCompatibilityMajor": "1", "minCompatibilityMinor": "35"}

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _resource(kind: Kind) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": kind.plural, "singularName": kind.singular, "namespaced": kind.namespaced,
                           "kind": kind.kind, "verbs": list(kind.verbs)}
    if kind.short_names:
        doc["shortNames"] = list(kind.short_names)
    if kind.categories:
        doc["categories"] = list(kind.categories)
    return doc


def resource_list(kinds: Kinds, group: str, version: str) -> dict[str, Any] | None:
    served = kinds.in_version(group, version)
    if not served:
        return None
    resources = []
    for kind in served:
        resources.append(_resource(kind))
        for sub in kind.subresources:
            group_of, version_of, kind_name, verbs = _subresource(kind, sub)
            doc = {"name": f"{kind.plural}/{sub}", "singularName": "", "namespaced": kind.namespaced,
                   "kind": kind_name, "verbs": list(verbs)}
            if sub in SUBRESOURCE_KINDS:
                doc.update(group=group_of, version=version_of)
            resources.append(doc)
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _subresource(kind: Kind, sub: str) -> tuple[str, str, str, tuple[str, ...]]:
    """(group, version, kind, verbs) a subresource is served with."""
    return SUBRESOURCE_KINDS.get(sub, (kind.group, kind.version, kind.kind, ("get", "patch", "update")))


def core_versions() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def group_list(kinds: Kinds) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(name, versions) for name, versions in kinds.groups().items()]}


def group(kinds: Kinds, name: str) -> dict[str, Any] | None:
    versions = kinds.groups().get(name)
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)} if versions else None


def _aggregated_group(kinds: Kinds, name: str, versions: list[str]) -> dict[str, Any]:
    listed = []
    for version in versions:
        resources = []
        for kind in kinds.in_version(name, version):
            doc = {"resource": kind.plural, "responseKind": {"group": kind.group, "version": kind.version,
                                                             "kind": kind.kind},
                   "scope": "Namespaced" if kind.namespaced else "Cluster", "singularResource": kind.singular,
                   "verbs": list(kind.verbs)}
            if kind.short_names:
                doc["shortNames"] = list(kind.short_names)
            if kind.categories:
                doc["categories"] = list(kind.categories)
            subs = [{"subresource": sub,
                     "responseKind": dict(zip(("group", "version", "kind"), _subresource(kind, sub)[:3])),
                     "verbs": list(_subresource(kind, sub)[3])}
                    for sub in kind.subresources]
            if subs:
                doc["subresources"] = subs
            resources.append(doc)
        listed.append({"version": version, "resources": resources, "freshness": "Current"})
    return {"metadata": {"name": name, "creationTimestamp": None}, "versions": listed}


def aggregated(kinds: Kinds, core: bool) -> dict[str, Any]:
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api (core) or /apis (named groups)."""
    groups = {"": ["v1"]} if core else kinds.groups()
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": [_aggregated_group(kinds, name, versions) for name, versions in groups.items()]}
