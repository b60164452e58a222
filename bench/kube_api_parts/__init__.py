"""The parts of bench/kube_api.py, one module each: `clients.py` (kubectl and the kubernetes client
on the embedded cluster's kubeconfig, a job followed through the API), `submit_kill.py` (1. submit
and kill), `watch_delivery.py` (2. watch event delivery), `logs_follow.py` (3. `kubectl logs -f`
throughput). Each part returns its figures and prints its own report.

Imported with bench/ on sys.path (as bench/kube_api.py runs), beside local_cluster.py.
"""
