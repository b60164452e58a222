"""The embedded cluster's registry: what is stored and what a write means, below the HTTP protocol.

    kinds.py      the kinds stored and served (group, version, plural, scope, columns)
    store.py      objects keyed (kind, namespace, name), resourceVersions, history, watches, disk
    status.py     ApiError: errors as metav1.Status
    strategy.py   what a write of one kind means (Strategy); strategies/ has one per kind
    generic.py    every create, update and delete through its kind's strategy, deletion as upstream
    admission.py  upstream admission rules the strategies apply (CRD defaults, webhooks)
    client.py     the in-process client controllers and kubelets use
    informer.py   list-then-watch of one kind, for controllers
"""
