"""The anatomy of a job (`kfcockpit explain`, the cockpit's `a`): the chain of objects a TrainJob
becomes, what each runtime patch changed, and, for one pod, each piece the platform put there with
who put it there and the upstream code that does it.

The boundary: this package reads objects already fetched (`JobObjects`, JSON dicts) and imports
no client; `backend/kube/anatomy.py` fetches them through the Kubernetes API, so the rules hold
on the embedded cluster and on a real one alike.
"""
