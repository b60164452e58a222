"""The errors a user can act on, in a module with no dependencies, so the front door can catch
them without importing pydantic or a platform client. `str()` is always one line."""

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
