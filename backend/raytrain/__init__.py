"""The Ray Train variant, run from the backend: a local Ray per run, its lines, its workers.

`runner.RayRun` launches `python -m training.ray_train` with Ray's temp files under the state root,
follows its worker group (rank -> pid, restart attempt) from the logfmt lines, kills a worker on
request and makes sure no Ray process outlives the run (`leftovers`). `lines` is the plumbing for
any launcher whose stdout is logfmt lines. Nothing here imports ray or torch.
"""
