"""kubectl and the kubernetes client on one embedded cluster's kubeconfig, and a job's pods and
lines as a client follows them through the API: what every part of bench/kube_api.py drives."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import local_cluster  # noqa: F401 - puts the repository on sys.path for the imports below

from backend.kube.pods import has_started
from backend.kube.threads import Ended, Halt, cancel_all, iterate_in_thread, pump
from backend.local.layout import Layout
from backend.local.node.logs import read_lines
from training.logfmt import step_and_loss

KUBECTL = str(Path(sys.executable).parent / "kubectl")
NAMESPACE = "default"
JOBSET = "jobset.sigs.k8s.io/jobset-name"
ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")


class Api:
    """kubectl and the kubernetes client on one embedded cluster's kubeconfig. kubectl keeps its
    discovery and OpenAPI cache in the state root (KUBECACHEDIR), never in ~/.kube."""

    def __init__(self, home: Path):
        from kubernetes import client, config

        self.home = home
        self.kubeconfig = home / "kubeconfig"
        self.env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), KUBECACHEDIR=str(home / "kube-cache"))
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=configuration)
        self.client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)

    async def kubectl(self, *args: str, input: str | None = None) -> float:
        """Run kubectl to its end (it must succeed); how long it ran."""
        started = time.time()
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, *args, env=self.env, stdin=asyncio.subprocess.PIPE if input else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate(input.encode() if input else None)
        if proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {err.decode().strip()}")
        return time.time() - started

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([KUBECTL, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    async def create_job(self, body: dict) -> None:
        await asyncio.to_thread(self.custom.create_namespaced_custom_object, *TRAINER[:2], NAMESPACE, TRAINER[2],
                                body, _preload_content=False)

    async def delete_job(self, name: str) -> None:
        await asyncio.to_thread(self.custom.delete_namespaced_custom_object, *TRAINER[:2], NAMESPACE, TRAINER[2],
                                name, _preload_content=False)

    async def delete_pod(self, name: str) -> None:
        await asyncio.to_thread(self.core.delete_namespaced_pod, name, NAMESPACE, grace_period_seconds=0,
                                _preload_content=False)

    def close(self) -> None:
        self.client.close()


class Follower:
    """A job's pods and lines as a client follows them through the API: a pod watch opened (its
    initial events ended) before the job is submitted, and each pod's log followed from the
    moment the watch shows its container started. Every line is stamped where its thread reads it."""

    def __init__(self, api: Api, job: str):
        self.api, self.job = api, job
        self.queue: asyncio.Queue = asyncio.Queue()
        self.pods: dict[str, dict[str, str]] = {}  # name -> labels
        self.tasks: list[asyncio.Task] = []

    @classmethod
    async def start(cls, api: Api, job: str) -> "Follower":
        self = cls(api, job)
        self.tasks.append(pump(iterate_in_thread(self._watch_pods, f"watch-{job}"), self.queue, ""))
        while True:  # until the watch's synthetic bookmark: from here on every pod is seen
            _, item = await self.queue.get()
            if isinstance(item, Ended):
                raise RuntimeError(f"the pod watch of {job} ended: {item.error}")
            if item["type"] == "BOOKMARK":
                return self

    def _watch_pods(self, emit: Callable[[Any], None], halt: Halt) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        response = self.api.core.list_namespaced_pod(
            NAMESPACE, label_selector=f"{JOBSET}={self.job}", watch=True, allow_watch_bookmarks=True,
            send_initial_events=True, resource_version_match="NotOlderThan", timeout_seconds=900,
            _preload_content=False)
        with halt.track(response):
            for line in iter_resp_lines(response):
                emit(json.loads(line))

    def _follow_log(self, pod: str) -> Callable[[Callable[[Any], None], Halt], None]:
        def produce(emit: Callable[[Any], None], halt: Halt) -> None:
            from kubernetes.watch.watch import iter_resp_lines

            response = self.api.core.read_namespaced_pod_log(pod, NAMESPACE, follow=True, _preload_content=False)
            with halt.track(response):
                for line in iter_resp_lines(response):
                    emit((time.time(), line))
        return produce

    async def lines(self) -> AsyncIterator[tuple[float, str, str]]:
        """(arrival, pod, text) of every line of every pod, replacements included."""
        while True:
            line = await self._next()
            if line is not None:
                yield line

    async def until_pods(self, count: int) -> None:
        while len(self.pods) < count:
            await self._next()

    async def _next(self) -> tuple[float, str, str] | None:
        """The next line, or None when the item was something else (a pod event, a log's end)."""
        tag, item = await self.queue.get()
        if isinstance(item, Ended):
            if tag == "":
                raise RuntimeError(f"the pod watch of {self.job} ended: {item.error}")
            return None  # a pod's log ends with the pod (or it was gone before its log was opened)
        if tag:
            return item[0], tag, item[1]
        if item["type"] in ("ADDED", "MODIFIED"):
            meta = item["object"]["metadata"]
            # As stern does: a pod's log is opened once its container has started (before that
            # the API server answers 400: no host assigned yet, or the container is waiting).
            if meta["name"] not in self.pods and has_started(item["object"]):
                self.pods[meta["name"]] = meta.get("labels") or {}
                self.tasks.append(pump(iterate_in_thread(self._follow_log(meta["name"]), f"log-{meta['name']}"),
                                       self.queue, meta["name"]))
        return None

    async def close(self) -> None:
        await cancel_all(self.tasks)


def stamped_lines(home: Path, pod: str, namespace: str = "default") -> list[tuple[float, str]]:
    """(time, text) of every line pod `pod` printed, as its kubelet stamped them in the node's
    log files (logs/<namespace>/<pod>_<uid>/<container>/<restart>.log)."""
    found = []
    for path in sorted((Layout(home).logs / namespace).glob(f"{pod}_*/*/*.log")):
        found += [(t, text) for t, text, _ in read_lines(path, 0, path.stat().st_size)]
    return found


def first_step_time(home: Path, job: str, pods: list[str]) -> float:
    """When the earliest of `pods` printed its first step, as the kubelet stamped it."""
    found = []
    for pod in pods:
        found += [next((t for t, text in stamped_lines(home, pod) if step_and_loss(text)), None)]
    stamps = [t for t in found if t is not None]
    if not stamps:
        raise RuntimeError(f"no step line in the log files of {job} ({', '.join(pods)})")
    return min(stamps)
