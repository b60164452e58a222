"""The embedded local cluster: Kubernetes' model at one machine's scale, files as the API.

`LocalCluster` (cluster.py) is what the rest of the cockpit uses; it talks to one detached
controller process per state root (controller.py) over a Unix socket. See ARCHITECTURE.md.
"""
