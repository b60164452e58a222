"""Settings → the one Cluster implementation: the kube backend on a kubeconfig context, with what
its platform can do (`capabilities`).

The embedded cluster is the default context: started on demand here, then driven through its
API server exactly as kind is. This is the one place besides the settings and the CLI's platform
options that tells the platforms apart; everything else asks the Capabilities. Imports lazily:
the `kubernetes` client must not load at the UI's start-up. Blocking (it may start the embedded
controller): call `connect` from a thread in an event loop that draws.
"""

from __future__ import annotations

from backend.cluster import Capabilities, Cluster
from backend.settings import Settings


def capabilities(settings: Settings) -> Capabilities:
    """What the platform in `settings` can do, without connecting to it."""
    if settings.backend == "kube":
        namespace = settings.namespace or "(the context's own)"
        return Capabilities(
            description="the Kubernetes cluster",
            record=(f"Kubernetes, kube context {settings.context or '(the current one)'}, namespace {namespace}"
                    + (f", Pipelines endpoint {settings.kfp_host}" if settings.kfp_host else "")))
    from backend.local.embedded import capabilities as embedded

    return embedded(settings)


def connect(settings: Settings) -> Cluster:
    from backend.kube.cluster import KubeCluster

    able = capabilities(settings)
    if settings.backend == "kube":
        return KubeCluster.from_settings(settings, able)
    from backend.local.embedded import CONTEXT, Embedded

    embedded = Embedded(settings.home)
    embedded.start()
    on_embedded = settings.model_copy(update={"kubeconfig": str(embedded.kubeconfig), "context": CONTEXT})
    return KubeCluster.from_settings(on_embedded, able)
