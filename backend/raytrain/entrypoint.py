"""What an entrypoint running the cockpit's Ray Train variant (`python -m training.ray_train ...`)
asks for, read from its words: the embedded cluster plans a RayJob's worker pods and restarts from
it (local/registry/strategies/rayjobs.py, strict: a bad number is refused at apply), the kube backend shows them in a
RayJob's summary (kube/rayjobs.py, lenient: a job it did not write is shown as it is).
No processes, no imports of Ray.
"""

from __future__ import annotations

from training.options import option_args

RAY_TRAIN_MODULE = "training.ray_train"


def ray_train_argv(python: str, *, num_workers: int, storage: str, name: str, max_failures: int | None = None,
                   temp_dir: str | None = None, options: dict[str, object] | None = None) -> list[str]:
    """The command line of one run of the Ray Train variant: `options` are the loop's own
    ({"steps": 30} -> --steps 30), as training.ddp takes them too."""
    argv = [python, "-m", RAY_TRAIN_MODULE, "--num-workers", str(num_workers)]
    if max_failures is not None:
        argv += ["--max-failures", str(max_failures)]
    argv += ["--storage", storage, "--name", name]
    if temp_dir is not None:
        argv += ["--temp-dir", temp_dir]
    return argv + option_args(options or {})


def ray_train_args(argv: list[str]) -> list[str] | None:
    """The arguments after `-m training.ray_train`; None when argv runs anything else."""
    try:
        at = argv.index("-m")
    except ValueError:
        return None
    if argv[at + 1:at + 2] != [RAY_TRAIN_MODULE]:
        return None
    return argv[at + 2:]
