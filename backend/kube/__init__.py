"""The Cluster protocol on Kubernetes with Kubeflow Trainer v2.3, JobSet and CSI snapshots.

Nothing here is imported at UI start-up: `backend.connect` imports `backend.kube.cluster` only
when the kube backend is chosen, and only the modules that talk to the API server import the
`kubernetes` client. `volume_reader` runs inside the reader pod and imports the standard
library and training's torch-free formats only.
"""
