"""The Ray Train variant's plumbing, for the embedded cluster's RayJobs and whoever reads them.

`tempdir` keeps Ray's temp files of a state root under `<home>/ray/`; `groups` tells Ray Train's
worker groups apart from their `event=start` lines. `entrypoint` builds and reads a
`python -m training.ray_train` command line (workers, max failures), for the embedded cluster,
the kube backend, the comparison and the pipelines alike. Nothing here imports ray or torch.
"""
