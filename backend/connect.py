"""Settings → the one Cluster implementation: the kube backend on a kubeconfig context.

The embedded cluster is the default context: started on demand here, then driven through its
API server exactly as kind is. Imports lazily: the `kubernetes` client must not load at the UI's
start-up. Blocking (it may start the embedded controller): call it from a thread in an event
loop that draws.
"""

from __future__ import annotations

from backend.cluster import Cluster
from backend.settings import Settings


def connect(settings: Settings) -> Cluster:
    from backend.kube.cluster import KubeCluster

    if settings.backend == "kube":
        return KubeCluster.from_settings(settings)
    from backend.local.embedded import CONTEXT, Embedded

    embedded = Embedded(settings.home)
    embedded.start()
    on_embedded = settings.model_copy(update={"kubeconfig": str(embedded.kubeconfig), "context": CONTEXT})
    return KubeCluster.from_settings(on_embedded, embedded=embedded)
