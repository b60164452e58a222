"""What runs inside a worker pod: the DDP train loop, checkpoints, the Ray Train variant.

Imports neither `backend` nor `tui`: a pod has only torch (and ray) installed. The modules
`logfmt`, `checkpoint_format` and `metrics` import no torch, so the cockpit can read what
workers write without loading torch.
"""
