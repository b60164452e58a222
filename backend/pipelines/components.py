"""The lesson's components: lightweight Python components on the pinned base image.

Every component runs on `BASE_IMAGE` with `install_kfp_package=False`: the image already holds kfp,
torch, ray and this project at the locked versions, so no task installs anything when it starts
(lesson step 9). Bodies stay a few lines: KFP ships a component's source as text, so the work is
in `task_runtime`, which the image (and, locally, the current venv) provides.

The one exception is `ray_train_declared`, the lesson's step-8 form of the Ray Train component: it
declares ray in `packages_to_install`, as that step asks; step 9 then drops the declaration
(`ray_train`), which is what the compiled pipeline uses.
"""

# No `from __future__ import annotations`: KFP reads the parameter types as objects, not strings.
import functools
from typing import NamedTuple

from kfp import dsl

from backend.pipelines.images import BASE_IMAGE, RAY_PACKAGES

pinned = functools.partial(dsl.component, base_image=BASE_IMAGE, install_kfp_package=False)


@pinned
def print_inputs(message: str, workers: int) -> str:
    """Lesson step 1: prove the chain from laptop to pod before any training code runs."""
    import platform

    print(f"input message={message!r}", flush=True)
    print(f"input workers={workers}", flush=True)
    print(f"ran on host={platform.node()} python={platform.python_version()}", flush=True)
    return f"message={message!r} workers={workers}"


@pinned
def create_volume(access_modes: list, size: str, pvc_name_suffix: str,
                  storage_class_name: str) -> NamedTuple("Outputs", [("name", str)]):
    """The local pipeline's stand-in for kfp-kubernetes CreatePVC (a container component, which
    kfp.local refuses): same inputs, same `name` output, the volume made by the embedded cluster."""
    from backend.pipelines.task_runtime import create_volume as create

    return (create(access_modes, size, pvc_name_suffix, storage_class_name),)


@pinned
def train_job(volume: str, num_nodes: int, steps: int, ckpt_every: int, step_delay: float,
              resources: dict, node_selector: dict) -> NamedTuple("Outputs", [
                  ("job", str), ("run", str), ("final_loss", float), ("world_size", int),
                  ("wall_seconds", float), ("checkpoints", int)]):
    """Lesson step 4: submit a TrainJob with `num_nodes` workers and wait for Complete/Failed."""
    from backend.pipelines.task_runtime import train_and_wait

    return train_and_wait(volume, num_nodes, steps, ckpt_every, step_delay, resources, node_selector)


@pinned
def list_checkpoints(volume: str) -> NamedTuple("Outputs", [("valid", int), ("newest_step", int)]):
    """Lesson step 5: the checkpoints are visible from a separate pod that mounts the volume."""
    from backend.pipelines.task_runtime import list_checkpoints as list_them

    return list_them(volume)


@pinned
def snapshot_volume(volume: str, label: str) -> str:
    """Lesson step 7: keep a run's state in a VolumeSnapshot before the next run writes."""
    from backend.pipelines.task_runtime import snapshot_volume as snapshot

    return snapshot(volume, label)


@pinned
def compare_runs(snapshot_a: str, run_a: str, snapshot_b: str, run_b: str) -> str:
    """Lesson step 7: final loss and wall time of two runs, side by side, from their snapshots."""
    from backend.pipelines.task_runtime import compare_runs as compare

    return compare(snapshot_a, run_a, snapshot_b, run_b)


def ray_train(volume: str, num_workers: int, steps: int,
              ckpt_every: int) -> NamedTuple("Outputs", [("run", str), ("final_loss", float),
                                                         ("world_size", int)]):
    """Lessons steps 8-9: the same loop under Ray Train, `num_workers` CPU workers in this task."""
    from backend.pipelines.task_runtime import ray_train

    return ray_train(volume, num_workers, steps, ckpt_every)


# Both forms are the component "ray-train"; only the declared packages differ.
ray_train_declared = dsl.component(ray_train, base_image=BASE_IMAGE, install_kfp_package=False,
                                   packages_to_install=RAY_PACKAGES)
ray_train = pinned(ray_train)
