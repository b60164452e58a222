"""The CRDs' CEL rules (`x-kubernetes-validations`), evaluated as kube-apiserver does
(k8s.io/apiextensions-apiserver v0.36 pkg/apiserver/schema/cel/validation.go), with the
`common-expression-language` evaluator (cel-rust).

- A rule runs on each non-null value its schema node holds; `self` is that value (the root's
  `metadata` shows only name and generateName), with property names escaped as Kubernetes does
  (`a.b` → `a__dot__b`; a reserved word such as `namespace` is both `__namespace__` and itself).
- A transition rule (one that reads `oldSelf`) runs only on update and only where the value has a
  correlated old value: through object properties, and through list-type=map items by their
  keys; never through sets or atomic lists. Lists of type set and map compare regardless of order.
- A false rule is `Invalid value` at the node's path (`<nil>` at the root), showing the value
  when it is a scalar (`spec.managedBy: Invalid value: "x": ManagedBy must be ...`) and none for
  an object or list (`spec.trainer: Invalid value: field is immutable`), with the rule's
  message (or `failed rule: <rule>`); its `reason` picks Forbidden or Required instead.
- An error raised while evaluating is `Invalid value: "<type>": <error> evaluating rule: <rule>`.
- Ratcheting: a non-transition rule that fails on a value unchanged from its correlated old one
  (or under an unchanged correlated parent) is returned as a warning, not an error.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from backend.local.registry import fielderrors as fe
from backend.local.registry.fielderrors import FieldError
from backend.local.registry.crds.openapi_schema import correlate_item
from backend.local.registry.crds.structural import additional

# CEL's reserved words (k8s.io/apiserver/pkg/cel/common/escaping.go)
_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})


def escape(name: str) -> str:
    if name in _RESERVED:
        return f"__{name}__"
    return (name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
            .replace("/", "__slash__"))


@lru_cache(maxsize=256)
def _program(rule: str) -> Any:
    import cel  # the evaluator loads on the first rule (its import pulls in its CLI's libraries)

    return cel.compile(rule)


def _uses_old_self(rule: str) -> bool:
    return "oldSelf" in _program(rule).variables()


def to_cel(value: Any, schema: dict[str, Any] | None, unordered: bool = False) -> Any:
    """The value CEL sees for `value` under `schema` (UnstructuredToVal). With `unordered`, list-type
    set and map lists are put in a canonical order, so that `self == oldSelf` ignores order."""
    if schema is None or value is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            fields = {escape(k): to_cel(v, props.get(k), unordered) for k, v in value.items() if k in props}
            # a reserved word is reachable by its own name too (DeclTypeProvider's recognizeKeywordAsFieldName)
            fields.update({k: fields[escape(k)] for k in value if k in props and k in _RESERVED})
            return fields
        extra = additional(schema)
        return {k: to_cel(v, extra, unordered) for k, v in value.items()}
    if isinstance(value, list):
        items = [to_cel(v, schema.get("items"), unordered) for v in value]
        kind = schema.get("x-kubernetes-list-type")
        if unordered and kind in ("set", "map"):
            keys = schema.get("x-kubernetes-list-map-keys") or []

            def order(item: Any) -> str:
                picked = {k: item.get(escape(k)) for k in keys} if kind == "map" and isinstance(item, dict) else item
                return fe.go_json(picked)
            items.sort(key=order)
        return items
    return value


def _root_view(obj: dict[str, Any], schema: dict[str, Any], unordered: bool) -> dict[str, Any]:
    view = to_cel(obj, schema, unordered)
    meta = obj.get("metadata") or {}
    view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    view.update({k: obj[k] for k in ("apiVersion", "kind") if k in obj})
    return view


class _Rules:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []

    def node(self, value: Any, schema: dict[str, Any], path: str | None, old: Any, unchanged: bool,
             root: bool = False) -> None:
        if value is None:
            return
        correlated = old is not None
        unchanged = (old == value) if correlated else unchanged
        for rule in schema.get("x-kubernetes-validations") or []:
            self._rule(rule, value, schema, path, old, unchanged, root)
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            extra = additional(schema)
            olds = old if isinstance(old, dict) else {}
            for key, item in value.items():
                sub = props.get(key) if key in props else extra
                if sub is not None:
                    self.node(item, sub, f"{path}.{key}" if path else key, olds.get(key), unchanged)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self.node(item, schema["items"], f"{path}[{i}]", correlate_item(schema, item, old), unchanged)

    def _rule(self, rule: dict[str, Any], value: Any, schema: dict[str, Any], path: str | None, old: Any,
              unchanged: bool, root: bool) -> None:
        text = rule["rule"]
        transition = _uses_old_self(text)
        if transition and old is None:
            return  # transition rules need a comparable old value
        view = _root_view if root else to_cel
        activation = {"self": view(value, schema, transition)}
        if transition:
            activation["oldSelf"] = view(old, schema, True)
        message = (rule.get("message") or "").strip()
        shown = message or text.strip()
        kind = schema.get("type", "")
        try:
            passed = _program(text).execute(activation)
        except KeyError as exc:
            self.errors.append(fe.invalid_value(path, kind, f"no such key: {exc.args[0]} evaluating rule: {shown}"))
            return
        except (RuntimeError, ValueError, TypeError) as exc:
            self.errors.append(fe.invalid_value(path, kind, f"{exc} evaluating rule: {shown}"))
            return
        if passed is True:
            return
        target = path
        if rule.get("fieldPath"):
            suffix = rule["fieldPath"].lstrip(".")
            target = f"{path}.{suffix}" if path else suffix
        detail = message or f"failed rule: {text.strip()}"
        reason = rule.get("reason")
        if reason == "FieldValueForbidden":
            error = fe.forbidden(target, detail)
        elif reason == "FieldValueRequired":
            error = fe.required(target, detail)
        else:
            error = fe.invalid_value(target, fe.OMIT if kind in ("object", "array") else value, detail)
        if not transition and unchanged:
            self.warnings.append(str(error))
        else:
            self.errors.append(error)


def validate(obj: dict[str, Any], schema: dict[str, Any], old: dict[str, Any] | None = None
             ) -> tuple[list[FieldError], list[str]]:
    """(errors, warnings) of every rule in the CRD's schema for the object (and its old self)."""
    rules = _Rules()
    rules.node(obj, schema, None, old, False, root=True)
    return rules.errors, rules.warnings
