"""Run one compiled pipeline with kfp.local, in a process of its own (started by `local_runner`).

    python -m backend.pipelines.local_child FILE PIPELINE_ROOT ARGUMENTS_JSON

A process of its own because kfp.local keeps global state (its config singleton, the root
logger's handlers, and `builtins.print` while a task streams), which must not leak into the
cockpit. `SubprocessRunner(use_venv=False)` runs each task with this interpreter, so the tasks
import this project and its pinned dependencies from the current venv, as they would from the
pinned image on a cluster. The parent reads the progress kfp.local prints on stdout.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings


def main(argv: list[str]) -> int:
    path, pipeline_root, arguments = argv[0], argv[1], json.loads(argv[2])
    # Every task's own prints must stream line by line, not when its pipe buffer fills.
    os.environ["PYTHONUNBUFFERED"] = "1"
    # kfp.local warns when an image name lacks "python"; the pinned image is a Python image whose
    # contents this venv matches, which is the point of running tasks here.
    warnings.filterwarnings("ignore", message="You may be attemping to run a task", category=RuntimeWarning)
    from kfp import local
    from kfp.components import load_component_from_file

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=pipeline_root,
               raise_on_error=False)
    pipeline = load_component_from_file(path)
    pipeline(**arguments)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # The run is over and reported. Leave without the interpreter's teardown (freeing kfp's and the
    # kubernetes client's modules takes a second or more on a busy machine), which the parent
    # would otherwise wait for before it can return the run's result.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
