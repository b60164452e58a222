"""The embedded local cluster: Kubernetes' model at one machine's scale, files as the API.

One detached controller process per state root (controller.py) runs the pods and serves the
Kubernetes API (apiserver/, api.py); every client drives it through that API with the kube
backend. Outside this package only `embedded.Embedded` is used: start on demand, up, down, the
kubeconfig, the checks only it has (over client.py's life-cycle socket). See ARCHITECTURE.md.
"""
