"""The Ray Train variant's plumbing, shared by the local cluster's RayJobs and a standalone run.

`tempdir` keeps Ray's temp files of a state root under `<home>/ray/`; `groups` tells Ray Train's
worker groups apart from their `event=start` lines. `runner.RayRun` launches
`python -m training.ray_train` outside any cluster, follows its worker group, kills a worker on
request and makes sure no Ray process outlives the run (`leftovers`). `lines` is the plumbing for
any launcher whose stdout is logfmt lines. `entrypoint` reads what a `training.ray_train` command
line asks for (workers, max failures), for the embedded cluster and the kube backend alike.
Nothing here imports ray or torch.
"""
