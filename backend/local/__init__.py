"""The embedded local cluster: Kubernetes' model at one machine's scale.

One detached process per state root (controller.py, the composition root) builds the store and
generic registry (registry/), the API server (apiserver/), the controllers (controllers/) and the
node's kubelet (node/), and wires them; every client drives it through its Kubernetes API with
the kube backend. The front (embedded.py: start on demand, up, down, the kubeconfig, its checks
and capabilities; client.py's life-cycle socket; layout.py) runs none of it. Outside this package
only backend/connect.py and the `cluster` commands import it. See ARCHITECTURE.md.
"""
