"""The embedded cluster's registry: what is stored and what a write means, below the HTTP protocol.

    kinds.py      the kinds stored and served (group, version, plural, scope, columns)
    store.py      objects keyed (kind, namespace, name), resourceVersions, history, watches, disk
    values.py     copies of stored objects (JSON values), faster than copy.deepcopy
    revision.py   the resourceVersion counter, persisted in reserved blocks (as etcd's revision)
    status.py     ApiError: errors as metav1.Status
    strategy.py   what a write of one kind means (Strategy); strategies/ has one per kind
    generic.py    every create, update and delete through its kind's strategy, deletion as upstream
    objectmeta.py every write's metadata validated as apimachinery's objectmeta.go
    managed_fields.py  managedFields on every write, server-side apply and its conflicts, over
                  fieldpath.py (field sets, compare, merge) and fieldshapes.py (each kind's shape)
    admission.py  the embedded cluster's own admission checks the strategies apply
    crds/         upstream's admission of custom resources: CRD schemas, CEL rules, webhooks
    merge.py      strategic and JSON merge, for patches and controllers' applies
    events.py     the events recorder (aggregated as client-go's)
    client.py     the in-process client controllers and kubelets use
    informer.py   list-then-watch of one kind, for controllers
"""
