"""Field sets over JSON objects, as sigs.k8s.io/structured-merge-diff (v6) computes them for
server-side apply: which paths a value sets, what changed between two values, how an applied
configuration merges into a live object, and the FieldsV1 form `managedFields` stores them in.

A path is a tuple of elements: ("f", name) for an object's field, ("k", '{"name":"x"}') for an
item of a map list (its keys as canonical JSON), ("v", '"x"') for an item of a set. What each
place of an object is (struct, map, which kind of list) is its `fieldshapes.Shape`.

- `field_set(value, shape)`: typed/tofieldset.go: every leaf, every list item, every map
  entry, and a struct's field only when it is null or empty;
- `compare(old, new, shape)`: typed/compare.go: the paths added, modified and removed (a new or
  gone object counts with its children; an atomic list or map is one leaf);
- `merge(live, config, shape)`: typed/merge.go: the configuration's values win, map lists merge
  item by item in the order merge.go keeps, atomic values are replaced whole;
- `remove_items(value, paths, shape)`: typed/remove.go, and `ensure_named` is
  Set.EnsureNamedFieldsAreMembers, which prune (managed_fields.py) needs;
- `to_fields_v1` / `from_fields_v1`: fieldpath/serialize.go; `path_string`: Path.String().
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from backend.local.registry.fieldshapes import ATOMIC, SET, Shape

Element = tuple[str, str]
Path = tuple[Element, ...]
MISSING: Any = object()  # a value that is absent (not JSON null)
_TYPE_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def item_element(item: Any, kind: str, keys: tuple[str, ...]) -> Element | None:
    """The path element of a list item; None when the item cannot have one (a map list's
    item without its keys), which makes the list atomic here."""
    if kind == SET:
        return None if isinstance(item, (dict, list)) else ("v", _canon(item))
    if not isinstance(item, dict) or not keys or any(k not in item or item[k] is None for k in keys):
        return None
    return ("k", _canon({k: item[k] for k in keys}))


def _elements(items: list[Any], shape: Shape) -> list[Element] | None:
    """Each item's element, or None for a list handled atomically (its type, missing keys, or
    duplicates, which SMD keeps as one opaque entry and this does as an atomic list)."""
    kind, keys = shape.list_type()
    if kind == ATOMIC:
        return None
    found = [item_element(i, kind, keys) for i in items]
    if any(e is None for e in found) or len(set(found)) != len(found):
        return None
    return found  # type: ignore[return-value]


# ---------------------------------------------------------------------------------- field sets

def field_set(value: Any, shape: Shape) -> set[Path]:
    out: set[Path] = set()
    _field_set(value, shape, (), out)
    return out


def _field_set(value: Any, shape: Shape, path: Path, out: set[Path]) -> None:
    if isinstance(value, dict):
        if shape.atomic_map():
            out.add(path)
            return
        for key, child in value.items():
            here = path + (("f", key),)
            _field_set(child, shape.field(key), here, out)
            if child is None or child == {} or not shape.declares(key):
                out.add(here)
    elif isinstance(value, list):
        elements = _elements(value, shape)
        if elements is None:
            out.add(path)
            return
        for item, element in zip(value, elements):
            here = path + (element,)
            _field_set(item, shape.item(), here, out)
            out.add(here)
    elif path:
        out.add(path)


def ensure_named(paths: Iterable[Path], shape: Shape) -> set[Path]:
    """The paths, and every struct field on the way to one (Set.EnsureNamedFieldsAreMembers)."""
    out = set(paths)
    for path in list(out):
        here = shape
        for i, element in enumerate(path[:-1]):
            if element[0] == "f":
                if here.is_struct() and here.declares(element[1]):
                    out.add(path[:i + 1])
                here = here.field(element[1])
            else:
                here = here.item()
    return out


# ---------------------------------------------------------------------------------- compare

@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    def changed(self) -> set[Path]:
        return self.added | self.modified


def compare(old: Any, new: Any, shape: Shape) -> Comparison:
    found = Comparison()
    _compare(old, new, shape, (), found)
    return found


def _same(a: Any, b: Any) -> bool:
    return a == b and (type(a) is type(b) or not isinstance(a, bool) and not isinstance(b, bool))


def _leaf(old: Any, new: Any, path: Path, found: Comparison) -> None:
    if old is MISSING:
        found.added.add(path)
    elif new is MISSING:
        found.removed.add(path)
    elif not _same(old, new):
        found.modified.add(path)


def _compare(old: Any, new: Any, shape: Shape, path: Path, found: Comparison) -> None:
    if type(old) is type(new) and type(old) in (dict, list) and old == new:
        # an unchanged subtree (most of an object on most writes), skipped at C speed; Python's
        # equality takes 1 and true, or 1 and 1.0, as equal where a leaf's comparison would not
        return
    present = [v for v in (old, new) if v is not MISSING]
    if len(present) == 2 and type(old) is not type(new) and not (old is None or new is None):
        _leaf(old, new, path, found)
    elif all(isinstance(v, dict) for v in present if v is not None) and any(isinstance(v, dict) for v in present):
        left, right = (old if isinstance(old, dict) else {}), (new if isinstance(new, dict) else {})
        if shape.atomic_map() or (not left and not right):
            _leaf(old, new, path, found)
            return
        for key in {**left, **right}:
            _compare(left.get(key, MISSING), right.get(key, MISSING), shape.field(key), path + (("f", key),), found)
    elif any(isinstance(v, list) for v in present):
        left, right = (old if isinstance(old, list) else []), (new if isinstance(new, list) else [])
        lefts, rights = _elements(left, shape), _elements(right, shape)
        if lefts is None or rights is None or (not left and not right):
            _leaf(old, new, path, found)
            return
        before, after = dict(zip(lefts, left)), dict(zip(rights, right))
        for element in {**before, **after}:
            _compare(before.get(element, MISSING), after.get(element, MISSING), shape.item(), path + (element,), found)
    else:
        _leaf(old, new, path, found)
        return
    if old is MISSING:
        found.added.add(path)
    elif new is MISSING:
        found.removed.add(path)


# ---------------------------------------------------------------------------------- merge

def merge(live: Any, config: Any, shape: Shape) -> Any:
    """`config` applied over `live`; a null in `config` removes the field."""
    if config is MISSING:
        return live
    if live is MISSING or live is None or config is None:
        return copy.deepcopy(config)
    if isinstance(live, dict) and isinstance(config, dict) and not shape.atomic_map():
        out = dict(live)
        for key, value in config.items():
            merged = merge(live.get(key, MISSING), value, shape.field(key))
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    if isinstance(live, list) and isinstance(config, list):
        merged_list = _merge_list(live, config, shape)
        if merged_list is not None:
            return merged_list
    return copy.deepcopy(config)


def _merge_list(live: list[Any], config: list[Any], shape: Shape) -> list[Any] | None:
    """Items merged by element; live items the configuration does not name stay where they
    were, and the shared ones follow the configuration's order (typed/merge.go visitListItems)."""
    lefts, rights = _elements(live, shape), _elements(config, shape)
    if lefts is None or rights is None:
        return None
    before, after = dict(zip(lefts, live)), dict(zip(rights, config))
    shared = [e for e in rights if e in before]
    next_shared = shared.pop(0) if shared else None
    item = shape.item()
    out: list[Any] = []
    done: set[Element] = set()
    li = ri = 0
    while li < len(lefts) or ri < len(rights):
        if li < len(lefts) and ri < len(rights):
            element = lefts[li]
            if element == rights[ri]:
                done.add(element)
                out.append(merge(before[element], after[element], item))
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if element in after and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(lefts):
            element = lefts[li]
            if element not in after:
                out.append(live[li])
                li += 1
                continue
            if element in done:
                li += 1
        if ri < len(rights):
            element = rights[ri]
            done.add(element)
            out.append(merge(before.get(element, MISSING), after[element], item))
            ri += 1
            if next_shared is not None and next_shared == element:
                next_shared = shared.pop(0) if shared else None
    return out


# ---------------------------------------------------------------------------------- remove

Trie = dict[Element, list]  # element -> [is a member, children]


def _trie(paths: Iterable[Path]) -> Trie:
    root: Trie = {}
    for path in paths:
        if not path:
            continue
        node = root
        for element in path[:-1]:
            node = node.setdefault(element, [False, {}])[1]
        node.setdefault(path[-1], [False, {}])[0] = True
    return root


def remove_items(value: Any, paths: Iterable[Path], shape: Shape) -> Any:
    """`value` without the members of `paths` (and all under them)."""
    return _remove(value, _trie(paths), shape)


def _remove(value: Any, trie: Trie, shape: Shape) -> Any:
    if not trie:
        return value
    if isinstance(value, dict) and not shape.atomic_map():
        out = {}
        for key, child in value.items():
            node = trie.get(("f", key))
            if node is None:
                out[key] = child
            elif not node[0]:
                out[key] = _remove(child, node[1], shape.field(key))
        return out
    if isinstance(value, list):
        elements = _elements(value, shape)
        if elements is None:
            return value
        kept = []
        for item, element in zip(value, elements):
            node = trie.get(element)
            if node is None:
                kept.append(item)
            elif not node[0]:
                kept.append(_remove(item, node[1], shape.item()))
        return kept
    return value


# ---------------------------------------------------------------------------------- FieldsV1

def _element_text(element: Element) -> str:
    return f"{element[0]}:{element[1]}"


def _sort_key(element: Element) -> tuple[int, str]:
    return _TYPE_ORDER.get(element[0], 9), element[1]


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    return _emit(_trie(paths))


def _emit(trie: Trie) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for element in sorted(trie, key=_sort_key):
        member, children = trie[element]
        body = _emit(children)
        if member and children:
            body = {".": {}, **body}
        out[_element_text(element)] = body
    return out


def from_fields_v1(doc: Any) -> set[Path]:
    """The paths of a FieldsV1 document; ValueError when it is not one."""
    if not isinstance(doc, dict):
        raise ValueError("fieldsV1 must be an object")
    out: set[Path] = set()
    _read(doc, (), out)
    return out


def _read(doc: dict[str, Any], path: Path, out: set[Path]) -> None:
    for text, body in doc.items():
        if text == ".":
            if path:
                out.add(path)
            continue
        kind, sep, content = text.partition(":")
        if not sep or kind not in ("f", "k", "v", "i") or not isinstance(body, dict):
            raise ValueError(f"invalid path element {text!r}")
        if kind in ("k", "v"):
            content = _canon(json.loads(content))
        element = (kind, content)
        if not body:
            out.add(path + (element,))
        else:
            _read(body, path + (element,), out)


def path_string(path: Path) -> str:
    """`.spec.containers[name="node"].image`, as fieldpath.Path.String() prints a path."""
    parts = []
    for kind, content in path:
        if kind == "f":
            parts.append("." + content)
        elif kind == "k":
            keys = json.loads(content)
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(keys.items())) + "]")
        elif kind == "v":
            parts.append(f"[={content}]")
        else:
            parts.append(f"[{content}]")
    return "".join(parts)
