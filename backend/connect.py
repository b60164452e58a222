"""Pick the Cluster implementation for the settings. Imports lazily: the kube backend pulls in
the `kubernetes` client, which the UI must not load at start-up."""

from __future__ import annotations

from backend.cluster import Cluster
from backend.settings import Settings


def connect(settings: Settings) -> Cluster:
    if settings.backend == "kube":
        from backend.kube.cluster import KubeCluster

        return KubeCluster.from_settings(settings)
    from backend.local.cluster import LocalCluster

    return LocalCluster(settings.home)
