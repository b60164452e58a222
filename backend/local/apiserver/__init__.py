"""The embedded cluster's Kubernetes API server: the HTTP protocol only. It knows kinds through the
registry (backend/local/registry), writes through the generic registry and reads the store; what
an object means, and what happens once it is stored, is the registry's strategies' and the
controllers'.

    server.py      HTTP(S) routing, authentication, metrics.k8s.io, errors as Status; subresources
                   it does not serve (exec, scale, ...) refused by name
    verbs.py       get, list, create, update (and /status, /finalize), patch, apply, delete, collections
    options.py     the query options (Create/Update/Patch/Delete/ListOptions) decoded and validated
    paging.py      lists in pages (limit, continue tokens); freshness.py reads from a future version
    streams.py     watches and pod logs (served by the pod's node, as kube-apiserver proxies them)
    faults.py      what a test breaks in those streams, in-process (drop, silence, a bookmark now)
    wire.py        bodies (bounded), query flags, JSON answers, label/field matchers
    patch.py       JSON merge, JSON (RFC 6902) and strategic merge patches (none for custom resources)
    validation.py  strict / warn / ignore field validation against each kind's schema (schemas.py)
    discovery.py   /api, /apis, /version; openapi.py the OpenAPI documents kubectl reads
    tables.py      metav1.Table rows for `kubectl get`; selectors.py label and field selectors
    protobuf.py    the protobuf bodies of `kubectl create`
    credentials.py the CA, serving certificate, token and the kubeconfig that names them
    listen.py      the TLS listener and the port file

Nothing here imports a controller, the kubelet or the composition root (pyproject's
import-linter contracts).
"""
