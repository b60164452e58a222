"""The command line that starts the torchrun launcher's training (`training.ddp`), defined once for
everything that builds one: a TrainJob's trainer.command (the pipeline's job, the embedded cluster's
prewarm), lesson step 3's torchrun on this machine, the benches and the tests. torchrun's own
options come before `-m training.ddp`, the training's (`options.option_args`) after it.

manifests/trainjob.yaml and runtime.yaml spell the same words for kubectl, which cannot call this:
tests/training/test_launch.py keeps them equal. Standard library only: the cockpit imports it
before its first paint, and nothing in training/ may import the cockpit.
"""

from __future__ import annotations

from collections.abc import Sequence

DDP_MODULE = "training.ddp"
TORCHRUN = "torchrun"
TORCHRUN_MODULE = "torch.distributed.run"  # what the torchrun console script runs


def ddp_command(*torchrun_options: str, args: Sequence[str] = ()) -> list[str]:
    """`torchrun [OPTIONS] -m training.ddp [ARGS]`. With no options it is a TrainJob's trainer.command:
    on a cluster torchrun reads nodes, rank and rendezvous from the PET_* variables the Trainer sets,
    and the embedded cluster starts exactly this shape on a warm worker (podspec.warm_target)."""
    return [TORCHRUN, *torchrun_options, "-m", DDP_MODULE, *args]


def with_python(command: Sequence[str], python: str) -> list[str]:
    """A torchrun command run as `PYTHON -m torch.distributed.run`: on this machine the interpreter
    is chosen (the venv's), not whichever torchrun comes first on PATH."""
    if not command or command[0] != TORCHRUN:
        raise ValueError(f"not a torchrun command: {list(command)}")
    return [python, "-m", TORCHRUN_MODULE, *command[1:]]
