"""The lesson's pipelines, each defined once for two targets.

    print     step 1        one task that prints its inputs
    train     steps 4-6     checkpoint volume -> two-worker TrainJob -> checkpoints read by another task
    ray       step 8        checkpoint volume -> Ray Train with two CPU workers (ray declared to install)
    lesson    steps 7-12    the full run: volume, a two-worker and a one-worker TrainJob with a
                            snapshot after each, their metrics compared, Ray Train; compiled to
                            manifests/pipeline.yaml

Target "kube" creates the volume with kfp-kubernetes CreatePVC. kfp.local refuses container
components, and CreatePVC is one, so target "local" uses `create_volume`, a lightweight component
with the same inputs and the same `name` output that asks the embedded cluster for the volume.
That task is the only difference between the two targets (a test checks it); both carry the same
platform settings, which kfp.local ignores.
"""

# No `from __future__ import annotations`: KFP reads the parameter types as objects, not strings.
from typing import Callable

from backend.pipelines import components, platform
from backend.pipelines.platform import CONTROL, NODE_SELECTOR, RAY_TASK, WORKER, TaskPlatform

TARGETS = ("kube", "local")
VOLUME_SUFFIX = "-checkpoints"
ACCESS_MODES = ["ReadWriteOnce"]
# VolumeSnapshots need a CSI driver: csi-hostpath on kind (and minikube's addon) provides this class.
STORAGE_CLASS = "csi-hostpath-sc"

CONTROL_TASK = TaskPlatform(CONTROL)
VOLUME_TASK = TaskPlatform(CONTROL, mount_volume=True)
RAY = TaskPlatform(RAY_TASK, mount_volume=True)


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"unknown pipeline target {target!r} (choose from {', '.join(TARGETS)})")


def _volume(target: str, size, storage_class):
    """The checkpoint volume task; its output "name" is the claim every later task uses."""
    from kfp import kubernetes

    make = kubernetes.CreatePVC if target == "kube" else components.create_volume
    task = make(pvc_name_suffix=VOLUME_SUFFIX, access_modes=ACCESS_MODES, size=size,
                storage_class_name=storage_class)
    return task.set_caching_options(False)


def _task(task, settings: TaskPlatform, volume=None):
    # Every run really runs: a cached task would show no pod and no log.
    return platform.apply(task, settings, volume).set_caching_options(False)


def _train(volume, workers, steps, ckpt_every, step_delay):
    task = components.train_job(volume=volume, num_nodes=workers, steps=steps, ckpt_every=ckpt_every,
                                step_delay=step_delay, resources=WORKER.as_k8s(),
                                node_selector=dict(NODE_SELECTOR))
    return _task(task, VOLUME_TASK, volume)


def print_pipeline(target: str = "kube"):
    from kfp import dsl

    _check_target(target)

    @dsl.pipeline(name="kfcockpit-print-inputs",
                  description="Lesson step 1: one lightweight component that prints its inputs.")
    def print_inputs(message: str = "hello from kfcockpit", workers: int = 2) -> str:
        task = _task(components.print_inputs(message=message, workers=workers), CONTROL_TASK)
        return task.output

    return print_inputs


def train_pipeline(target: str = "kube"):
    from kfp import dsl

    _check_target(target)

    @dsl.pipeline(name="kfcockpit-train",
                  description="Lesson steps 4-6: a checkpoint volume, a two-worker TrainJob "
                              "submitted from a task, its checkpoints read from another task.")
    def train(workers: int = 2, steps: int = 60, ckpt_every: int = 5, step_delay: float = 0.1,
              volume_size: str = "1Gi", storage_class: str = STORAGE_CLASS):
        volume = _volume(target, volume_size, storage_class).outputs["name"]
        run = _train(volume, workers, steps, ckpt_every, step_delay)
        _task(components.list_checkpoints(volume=volume), VOLUME_TASK, volume).after(run)

    return train


def ray_pipeline(target: str = "kube"):
    from kfp import dsl

    _check_target(target)

    @dsl.pipeline(name="kfcockpit-ray-train",
                  description="Lesson step 8: the training loop under Ray Train with two CPU "
                              "workers, as a lightweight component that declares ray.")
    def ray(workers: int = 2, steps: int = 30, ckpt_every: int = 5,
            volume_size: str = "1Gi", storage_class: str = STORAGE_CLASS):
        volume = _volume(target, volume_size, storage_class).outputs["name"]
        _task(components.ray_train_declared(volume=volume, num_workers=workers, steps=steps,
                                            ckpt_every=ckpt_every), RAY, volume)

    return ray


def lesson_pipeline(target: str = "kube"):
    from kfp import dsl

    _check_target(target)

    @dsl.pipeline(name="kfcockpit-lesson",
                  description="The lesson's full run: a checkpoint volume, a two-worker and a "
                              "one-worker TrainJob with a snapshot after each, their metrics "
                              "compared, and the same loop under Ray Train. compare_workers must "
                              "differ from workers (each worker count has its own run directory).")
    def lesson(workers: int = 2, compare_workers: int = 1, steps: int = 40, ckpt_every: int = 5,
               step_delay: float = 0.0, ray_workers: int = 2, ray_steps: int = 20,
               volume_size: str = "1Gi", storage_class: str = STORAGE_CLASS):
        volume = _volume(target, volume_size, storage_class).outputs["name"]
        first = _train(volume, workers, steps, ckpt_every, step_delay)
        _task(components.list_checkpoints(volume=volume), VOLUME_TASK, volume).after(first)
        first_snapshot = _task(components.snapshot_volume(volume=volume, label="first"),
                               CONTROL_TASK).after(first)
        second = _train(volume, compare_workers, steps, ckpt_every, step_delay).after(first_snapshot)
        second_snapshot = _task(components.snapshot_volume(volume=volume, label="second"),
                                CONTROL_TASK).after(second)
        _task(components.compare_runs(snapshot_a=first_snapshot.output, run_a=first.outputs["run"],
                                      snapshot_b=second_snapshot.output, run_b=second.outputs["run"]),
              CONTROL_TASK)
        # After the snapshots, so the DDP runs and Ray never compete for the same CPUs.
        _task(components.ray_train(volume=volume, num_workers=ray_workers, steps=ray_steps,
                                   ckpt_every=ckpt_every), RAY, volume).after(second_snapshot)

    return lesson


PIPELINES: dict[str, Callable] = {
    "print": print_pipeline,
    "train": train_pipeline,
    "ray": ray_pipeline,
    "lesson": lesson_pipeline,
}
