"""The checkpoint browser's reader pod: a short-lived pod that mounts a volume read-only, runs
`backend.kube.volume_reader` and exits; its log is the answer. The pod is deleted afterwards
whatever happens (success, failure, timeout, cancellation).

It runs the image of the lesson's TrainingRuntime, which the cluster already holds (the workers
run it), so reading a volume pulls nothing new.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any, AsyncIterator, Callable

from backend.cluster import ClusterError, Timeout
from backend.kube.pods import trainer_status
from backend.kube.volume_reader import parse_output
from backend.models import Checkpoint, RunMetrics

BASE_IMAGE = "kfcockpit-base:0.1.0"
READER_CONTAINER = "reader"
MOUNT_PATH = "/data"
READER_LABELS = {"app.kubernetes.io/name": "kfcockpit-reader", "app.kubernetes.io/part-of": "kfcockpit"}
# Waiting reasons after which the pod will not start by itself.
_STUCK = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
          "CreateContainerError"}


def reader_pod(name: str, claim: str, image: str, args: tuple[str, ...] = ()) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(READER_LABELS)},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 300,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": READER_CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python", "-m", "backend.kube.volume_reader", MOUNT_PATH, *args],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": MOUNT_PATH, "readOnly": True}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
        },
    }


def new_reader_name() -> str:
    return f"kfcockpit-reader-{secrets.token_hex(3)}"


def _waiting_problem(raw: dict) -> str:
    """Why a Pending pod is not starting, in a few words, or ''."""
    status = raw.get("status") or {}
    waiting = ((trainer_status(raw).get("state") or {}).get("waiting")) or {}
    if waiting.get("reason"):
        return f"{waiting['reason']}: {waiting.get('message', '')}".strip(": ")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {condition.get('message', '')}".strip()
    return ""


async def run_reader(*, create: Callable[[dict], Any], delete: Callable[[str], Any],
                     watch: Callable[[str], AsyncIterator[dict]], read_log: Callable[[str], Any],
                     claim: str, image: str, timeout: float, args: tuple[str, ...] = ()) -> dict:
    """Start the reader on `claim` (with the reader's `args`), wait for it to end, return the
    parsed result; delete the pod."""
    name = new_reader_name()
    await create(reader_pod(name, claim, image, args))
    try:
        seen: dict = {}
        try:
            async with asyncio.timeout(timeout):
                async for raw in watch(name):
                    seen = raw
                    phase = (raw.get("status") or {}).get("phase")
                    if phase in ("Succeeded", "Failed"):
                        break
                    reason = ((trainer_status(raw).get("state") or {}).get("waiting") or {}).get("reason")
                    if reason in _STUCK:
                        raise ClusterError(f"the reader pod for volume {claim} cannot start: "
                                           f"{_waiting_problem(raw)} (is image {image} on the nodes? "
                                           "see README, 'On a real cluster')")
        except TimeoutError:
            problem = _waiting_problem(seen) or f"phase {(seen.get('status') or {}).get('phase', 'unknown')}"
            raise Timeout(f"the reader pod for volume {claim} did not finish in {timeout:.0f}s "
                          f"({problem})") from None
        text = await read_log(name)
        if (seen.get("status") or {}).get("phase") == "Failed":
            last = (text.strip().splitlines() or ["no output"])[-1]
            raise ClusterError(f"the reader pod for volume {claim} failed: {last}")
        try:
            return parse_output(text)
        except ValueError as exc:
            raise ClusterError(f"the reader pod for volume {claim} printed no result ({exc})") from None
    finally:
        await asyncio.shield(delete(name))


def checkpoints_from(volume: str, result: dict) -> list[Checkpoint]:
    return [Checkpoint(volume=volume, **entry) for entry in result.get("checkpoints") or []]


def metrics_from(result: dict) -> list[RunMetrics]:
    found = []
    for entry in result.get("metrics") or []:
        try:
            found.append(RunMetrics.model_validate(entry))
        except ValueError:
            continue  # a metrics.json from something else than training.ddp
    return found
