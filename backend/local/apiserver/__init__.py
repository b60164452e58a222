"""The embedded cluster's Kubernetes API server: the protocol, not the controllers.

    kinds.py      the resource types served (group, version, plural, scope, short names, columns)
    store.py      objects, resourceVersions, the watch cache with 410 Gone, persistence
    revision.py   the resourceVersion counter, persisted in reserved blocks (as etcd's revision)
    selectors.py  label and field selectors
    status.py     ApiError → a metav1.Status body with the right code and reason
    patch.py      JSON merge, JSON (RFC 6902) and strategic merge patches, server-side apply
    validation.py strict / warn / ignore field validation against each kind's schema
    discovery.py  /api, /apis, /version and the OpenAPI documents kubectl reads
    tables.py     metav1.Table rows for `kubectl get`
    credentials.py the CA, serving certificate, token and the kubeconfig that names them
    server.py     HTTP(S) routing, authentication, watch and log streaming

What happens to an object once stored (a TrainJob run, a pod killed) is the controller's, through
the `Hooks` it passes to the server (backend/local/api.py). Nothing here imports the controller.
"""
