"""Name checks with k8s.io/apimachinery v0.36's messages (pkg/util/validation/validation.go,
pkg/api/validate/content/kube.go): DNS-1035 labels, RFC 1123 labels and subdomains, qualified names
(label keys), label values and domain-prefixed paths. Each returns the list of problems the
Go function returns, so callers word their errors as upstream's callers do.
"""

from __future__ import annotations

import re

from backend.local.registry import fielderrors as fe
from backend.local.registry.fielderrors import FieldError

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _LABEL_KEY + ")?"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_LABEL_KEY_MESSAGE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                      "alphanumeric character")


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, pattern: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _full(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def dns1035_label(value: str) -> list[str]:
    problems = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_DNS1035_LABEL, value):
        problems.append(regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                    "start with an alphabetic character, and end with an alphanumeric character",
                                    _DNS1035_LABEL, "my-name", "abc-123"))
    return problems


def dns1123_label(value: str) -> list[str]:
    problems = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_DNS1123_LABEL, value):
        problems.append(regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                                    "'-', and must start and end with an alphanumeric character",
                                    _DNS1123_LABEL, "my-name", "123-abc"))
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    problems = [max_len_error(253)] if len(value) > 253 else []
    if not _full(_DNS1123_SUBDOMAIN, value):
        problems.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                    "characters, '-' or '.', and must start and end with an alphanumeric character",
                                    _DNS1123_SUBDOMAIN, "example.com"))
    return problems


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName (= content.IsLabelKey)."""
    parts = value.split("/")
    problems = []
    if len(parts) > 2:
        return ["a valid label key " + regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        problems += ["prefix part must be non-empty"] if not prefix else \
            ["prefix part " + p for p in dns1123_subdomain(prefix)]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part " + max_len_error(63))
    if not _full(_LABEL_KEY, name):
        problems.append("name part " + regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc"))
    return problems


def label_value(value: str) -> list[str]:
    problems = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_LABEL_VALUE, value):
        problems.append(regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                    "'-', '_' or '.', and must start and end with an alphanumeric character",
                                    _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return problems


def domain_prefixed_path(field: str, value: str) -> list[FieldError]:
    """IsDomainPrefixedPath(fldPath, value)."""
    if not value:
        return [fe.required(field)]
    host, slash, path = value.partition("/")
    if not slash or not host or not path:
        return [fe.invalid_value(field, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = [fe.invalid_value(field, host, problem) for problem in dns1123_subdomain(host)]
    if not _full(_HTTP_PATH, path):
        errors.append(fe.invalid_value(field, path, regex_error("Invalid path", _HTTP_PATH)))
    return errors
