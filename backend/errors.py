"""The errors a user can act on, in a module with no dependencies, so the front door can catch
them without importing pydantic or a platform client. `str()` is always one line.

The CLI prints a user error and exits 2, the cockpit shows it as a notification; anything else is a
bug, which the CLI lets Python print and the cockpit logs and shows whole."""

from __future__ import annotations


class ClusterError(Exception):
    """A problem the user can act on; the message is one line and says what to do."""


class NotFound(ClusterError):
    pass


class InvalidResource(ClusterError):
    """A manifest or argument the platform refuses (bad name, unknown runtime, numNodes 0...)."""


class Unavailable(ClusterError):
    """The platform does not answer: controller down, API server unreachable, no kube context."""


class Timeout(ClusterError):
    pass


class ManifestError(ValueError):
    """A manifest that cannot be applied; the message is one line naming document and field."""


# What the front doors catch as "the user can act on it"; everything else is a bug.
USER_ERRORS: tuple[type[Exception], ...] = (ClusterError, ManifestError)


def one_line(what: BaseException | str, width: int | None = None) -> str:
    """`what` on one line, for a notification, a table cell or a status: an error's first line (its
    type's name when it says nothing), a text's lines joined; cut to `width` with an ellipsis."""
    if isinstance(what, BaseException):
        lines = str(what).strip().splitlines()
        text = " ".join(lines[0].split()) if lines else ""
        text = text or type(what).__name__
    else:
        text = " ".join(what.split())
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text
