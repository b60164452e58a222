"""Fields a request body gives twice, as kube-apiserver's strict decoders find them: the JSON
serializer's (sigs.k8s.io/json UnmarshalStrict: `duplicate field "spec.paused"`, the field's
path as an unknown field's) and the YAML one's (sigs.k8s.io/yaml YAMLToJSONStrict: `yaml:
unmarshal errors: line 4: key "name" already set in map`). The last value wins, as without
strictness; fieldValidation decides whether they refuse the request (validation.py).

JSON is decoded at C speed; only a body that may hold a duplicate (more `"key":` than the
decoded object has keys) is decoded again, pair by pair, to name them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

_KEY_END = re.compile(rb'"\s*:')  # at least one per key; a string holding `":` only adds more


def _keys(value: Any) -> int:
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def json_body(raw: bytes, duplicates: list[str] | None) -> Any:
    body = json.loads(raw)
    if duplicates is None or len(_KEY_END.findall(raw)) <= _keys(body):
        return body
    repeated: list[tuple[dict, str]] = []  # holds each dict, so that its id stays its own

    def pairs(items: list[tuple[str, Any]]) -> dict:
        obj: dict = {}
        for key, value in items:
            if key in obj:
                repeated.append((obj, key))
            obj[key] = value
        return obj

    body = json.loads(raw, object_pairs_hook=pairs)
    paths = _paths(body)
    duplicates += [f"{paths[id(obj)]}.{key}".lstrip(".") for obj, key in repeated if id(obj) in paths]
    return body


def _paths(body: Any) -> dict[int, str]:
    """id of each dict in the body -> its path (`spec.containers[0]`)."""
    found, stack = {}, [(body, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            found[id(node)] = path
            stack.extend((v, f"{path}.{k}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return found


class _Loader(yaml.SafeLoader):
    """SafeLoader that notes a mapping's repeated keys instead of silently taking the last."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.repeated: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _value in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            if key in seen:
                self.repeated.append(f'line {key_node.start_mark.line + 1}: key "{key}" already set in map')
            seen.add(key)
        return super().construct_mapping(node, deep)


def yaml_body(text: str, duplicates: list[str] | None) -> Any:
    loader = _Loader(text)
    try:
        body = loader.get_single_data()
    finally:
        loader.dispose()
    if duplicates is not None and loader.repeated:
        duplicates.append("yaml: unmarshal errors:\n  " + "\n  ".join(loader.repeated))
    return body
