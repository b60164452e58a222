"""A kubelet in-process against a real registry, running real (small) processes: the pod
lifecycle as the kubelet lives it (pkg/kubelet: pod workers, restartPolicy and CrashLoopBackOff,
graceful deletion, activeDeadlineSeconds, CreateContainerConfigError), the pod's environment and
mounts, the node's network for rendezvous ports, the pids bound, a restart of the kubelet."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from backend.local.node import confine, pidns
from backend.local.node.kubelet import Kubelet
from backend.local.node.limits import PodCgroups
from backend.local.node.network import Network
from backend.local.registry.events import Events
from backend.processes import Children
from tests.controlplane import eventually, gone, plane, running, until

PY = sys.executable


@asynccontextmanager
async def kubelet(tmp_path: Path, client, pids_limit: int = 256, network: Network | None = None,
                  memory_max: int = 0, confined: bool = False):
    import asyncio

    children = Children()
    children.install()
    name = hashlib.sha1(str(tmp_path).encode()).hexdigest()[:12]  # noqa: S324 - a name, not a secret
    cgroups = PodCgroups.find(f"test-{name}", memory_max)
    node = Kubelet(client, "node-1", tmp_path / "cluster", lambda ns, claim: tmp_path / "volumes" / ns / claim,
                   {"cpu": "2", "memory": "4Gi", "pods": "110"}, children, network or Network(), cgroups,
                   Events(client, host="test").recorder("kubelet"), pids_limit, confined=confined,
                   own_pids=confined and pidns.available() is None)
    task = asyncio.create_task(node.run())
    try:
        await eventually(client, lambda: client.get("Node", None, "node-1"))
        yield node
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        children.uninstall()
        cgroups.close()


def _pod(client, name: str, command: list[str], restart: str = "Never", **spec) -> dict:
    containers = [{"name": "main", "image": "x", "command": command, **spec.pop("container", {})}]
    client.create("Pod", {"metadata": {"name": name, "namespace": "default", **spec.pop("metadata", {})},
                          "spec": {"restartPolicy": restart, "containers": containers, **spec}})
    return client.bind("default", name, "node-1")


def _phase(*phases: str):
    return lambda pod: pod is not None and pod["status"].get("phase") in phases


def _state(pod: dict) -> dict:
    """The container's status (an empty one before the kubelet first reported it)."""
    return (pod["status"].get("containerStatuses") or [{"state": {}, "restartCount": None}])[0]


async def _log(node: Kubelet, name: str, **options) -> str:
    pod = node.client.get("Pod", "default", name)
    return b"".join([chunk async for chunk in node.logs(pod, options)]).decode()


async def _printed(node: Kubelet, name: str, text: str) -> None:
    """Return once the pod's log holds `text` (following it, as `kubectl logs -f`)."""
    pod = node.client.get("Pod", "default", name)
    async for chunk in node.logs(pod, {"follow": "true"}):
        if text.encode() in chunk:
            return
    raise AssertionError(f"{name} ended without printing {text!r}")


async def test_a_pod_runs_to_completion_and_its_log_is_served(tmp_path):
    client = plane()
    async with kubelet(tmp_path, client) as node:
        _pod(client, "hello", [PY, "-c", "print('hello from a pod')"])
        done = await until(client, "Pod", "default", "hello", _phase("Succeeded"))
        terminated = _state(done)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert [c["type"] for c in done["status"]["conditions"]][0] == "PodScheduled"  # the scheduler's kept
        assert done["metadata"]["labels"]["kfcockpit.io/launch"] == "exec"
        assert await _log(node, "hello") == "hello from a pod\n"
        reasons = [e["reason"] for e in client.list("Event", "default")]
        assert reasons == ["Created", "Started"]


async def test_on_failure_restarts_at_once_then_backs_off(tmp_path):
    client = plane()
    async with kubelet(tmp_path, client):
        _pod(client, "crash", [PY, "-c", "raise SystemExit(3)"], restart="OnFailure")
        waiting = await until(client, "Pod", "default", "crash",
                              lambda p: "waiting" in _state(p)["state"] and _state(p)["restartCount"] == 1)
        state = _state(waiting)
        assert state["state"]["waiting"]["reason"] == "CrashLoopBackOff" and waiting["status"]["phase"] == "Running"
        assert state["lastState"]["terminated"]["exitCode"] == 3
        assert "BackOff" in [e["reason"] for e in client.list("Event", "default")]


async def test_graceful_deletion_is_sigterm_then_the_pod_goes(tmp_path):
    client = plane()
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
              "print('up', flush=True)\ntime.sleep(600)")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "sleeper", [PY, "-c", script])
        await until(client, "Pod", "default", "sleeper", _phase("Running"))
        await _printed(node, "sleeper", "up")  # its SIGTERM handler is set
        kept = client.delete("Pod", "default", "sleeper")
        assert kept["metadata"]["deletionGracePeriodSeconds"] == 30
        await until(client, "Pod", "default", "sleeper", gone)
        assert "Killing" in [e["reason"] for e in client.list("Event", "default")]
        assert node.workers == {}


def _states(pids: list[int]) -> set[str]:
    """The processes' states as /proc shows them (T: stopped)."""
    found = set()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            found.add(f.read().rsplit(")", 1)[1].split()[0])
    return found


async def _become(pids: list[int], state: set[str]) -> None:
    """A signal's effect on /proc is not an event anyone can wait on: look until it shows."""
    import asyncio

    for _ in range(500):
        if _states(pids) <= state:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"processes {pids} are {_states(pids)}, not {state}")


async def test_a_frozen_pods_processes_stop_until_thawed_and_a_frozen_pod_still_ends_gracefully(tmp_path):
    """kfcockpit's own (no upstream kubelet has it): FREEZE_ANNOTATION "true" stops every process
    of the pod (a frozen node's rank: Running, silent), its removal continues them; deletion thaws
    a frozen pod so its SIGTERM handler runs (the training core saves there)."""
    from backend.models import FREEZE_ANNOTATION

    client = plane()
    script = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
              "print('up', child.pid, flush=True)\ntime.sleep(600)")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "rank", [PY, "-c", script])
        await until(client, "Pod", "default", "rank", _phase("Running"))
        await _printed(node, "rank", "up")
        child = int((await _log(node, "rank")).split()[1])
        pids = [node.pod_pid("default", "rank"), child]

        def annotate(value: str | None) -> None:
            pod = client.get("Pod", "default", "rank")
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations.pop(FREEZE_ANNOTATION, None)
            annotations.update({FREEZE_ANNOTATION: value} if value is not None else {})
            client.update("Pod", pod)

        def reasons() -> list[str]:  # a repeated event is one Event counted again, as upstream's
            return [e["reason"] for e in client.list("Event", "default") for _ in range(e.get("count") or 1)]

        annotate("true")
        await eventually(client, lambda: "Frozen" in reasons())
        await _become(pids, {"T"})
        assert client.get("Pod", "default", "rank")["status"]["phase"] == "Running"  # as kubectl sees it
        annotate(None)
        await eventually(client, lambda: "Thawed" in reasons())
        await _become(pids, {"S", "R"})

        annotate("true")
        await eventually(client, lambda: reasons().count("Frozen") == 2)
        await _become(pids, {"T"})
        import asyncio

        said = asyncio.create_task(_printed(node, "rank", "got SIGTERM"))  # read before the pod goes
        client.delete("Pod", "default", "rank")
        await asyncio.wait_for(said, 30)  # its handler ran: thawed, not killed at the grace's end
        await until(client, "Pod", "default", "rank", gone)


async def test_a_slowed_pod_is_stopped_in_turns_while_it_computes_and_still_ends_gracefully(tmp_path):
    """kfcockpit's own too: SLOW_ANNOTATION "0.25" has the kubelet stop a computing pod's
    processes for three times as long as they were busy (throttle.py), said by an Event; removed,
    it runs at full speed again; a slowed pod deleted mid-pause still runs its SIGTERM handler."""
    import asyncio

    from backend.models import SLOW_ANNOTATION

    client = plane()
    script = ("import signal, sys\n"
              "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
              "print('up', flush=True)\nwhile True: pass")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "rank", [PY, "-c", script])
        await until(client, "Pod", "default", "rank", _phase("Running"))
        await _printed(node, "rank", "up")
        pids = [node.pod_pid("default", "rank")]

        def annotate(value: str | None) -> None:
            pod = client.get("Pod", "default", "rank")
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations.pop(SLOW_ANNOTATION, None)
            annotations.update({SLOW_ANNOTATION: value} if value is not None else {})
            client.update("Pod", pod)

        def reasons() -> list[str]:
            return [e["reason"] for e in client.list("Event", "default") for _ in range(e.get("count") or 1)]

        annotate("0.25")
        await eventually(client, lambda: "Slowed" in reasons())
        await _become(pids, {"T"})  # paused: it computed, and owes three times that
        await _become(pids, {"R"})  # and on again
        assert client.get("Pod", "default", "rank")["status"]["phase"] == "Running"
        annotate(None)
        await eventually(client, lambda: "Unslowed" in reasons())

        annotate("0.25")
        await eventually(client, lambda: reasons().count("Slowed") == 2)
        await _become(pids, {"T"})
        said = asyncio.create_task(_printed(node, "rank", "got SIGTERM"))  # read before the pod goes
        client.delete("Pod", "default", "rank")  # mid-pause: continued, so its handler runs
        await asyncio.wait_for(said, 30)
        await until(client, "Pod", "default", "rank", gone)


async def test_a_container_that_ignores_sigterm_is_killed_after_its_grace(tmp_path):
    client = plane()
    script = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('up', flush=True)\ntime.sleep(600)")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "stubborn", [PY, "-c", script], terminationGracePeriodSeconds=1)
        await until(client, "Pod", "default", "stubborn", _phase("Running"))
        await _printed(node, "stubborn", "up")
        client.delete("Pod", "default", "stubborn")
        await until(client, "Pod", "default", "stubborn", gone)


async def test_environment_references_and_mounts(tmp_path):
    client = plane()
    (tmp_path / "volumes" / "default" / "data").mkdir(parents=True)
    (tmp_path / "volumes" / "default" / "data" / "f").write_text("on the volume")
    script = ("import os, sys\n"
              "print(os.environ['FROM_CM'], os.environ['POD'], os.environ['INDEX'], os.environ['BOTH'])\n"
              "print(open(sys.argv[1] + '/f').read(), open(sys.argv[2]).read())")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "env", [PY, "-c", script, "/data", "/etc/conf/key"], metadata={"annotations": {"idx": "7"}},
             volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                      {"name": "conf", "configMap": {"name": "settings"}}],
             container={"env": [{"name": "FROM_CM",
                                 "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "key"}}},
                                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "INDEX", "valueFrom": {"fieldRef": {
                                    "fieldPath": "metadata.annotations['idx']"}}},
                                {"name": "BOTH", "value": "$(POD)-$(INDEX)"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                         {"name": "conf", "mountPath": "/etc/conf"}]})
        waiting = await until(client, "Pod", "default", "env", lambda p: "waiting" in _state(p)["state"])
        assert _state(waiting)["state"]["waiting"]["reason"] == "CreateContainerConfigError"
        assert "configmap 'settings' not found" in _state(waiting)["state"]["waiting"]["message"]
        client.create("ConfigMap", {"metadata": {"name": "settings", "namespace": "default"}, "data": {"key": "v"}})
        await until(client, "Pod", "default", "env", _phase("Succeeded"))
        assert await _log(node, "env") == "v env 7 env-7\non the volume v\n"


async def test_a_pod_is_not_told_where_the_cluster_keeps_its_state(tmp_path):
    """Found: every pod's KFCOCKPIT_CLUSTER named the state root, where the admin token, the
    signing key and every namespace's volumes are (issue 44). Its processes are still found by
    the cluster's marker, a digest of the root."""
    from backend.local.node.podspec import cluster_marker

    client = plane()
    async with kubelet(tmp_path, client) as node:
        _pod(client, "env", [PY, "-c", "import json, os; print(json.dumps(dict(os.environ)))"])
        await until(client, "Pod", "default", "env", _phase("Succeeded"))
        env = json.loads(await _log(node, "env"))
    root = str(tmp_path / "cluster")
    assert "KFCOCKPIT_CLUSTER" not in env
    assert [k for k, v in env.items() if root in v] == []
    assert cluster_marker(root).items() <= env.items()


async def test_a_sub_path_lands_in_its_subdirectory_of_the_volume(tmp_path):
    """Found ignored: files written under a subPath mount landed in the volume's root (issue 44).
    The kubelet makes a missing subPath a directory (pkg/volume/util/subpath doSafeMakeDir); a
    ConfigMap key named by subPath is that one file; subPathExpr expands the container's env."""
    client = plane()
    volume = tmp_path / "volumes" / "default" / "data"
    volume.mkdir(parents=True)
    client.create("ConfigMap", {"metadata": {"name": "settings", "namespace": "default"},
                                "data": {"train.yaml": "steps: 3"}})
    script = ("import sys\n"
              "open(sys.argv[1] + '/x', 'w').write('run')\n"
              "open(sys.argv[2] + '/y', 'w').write('pod')\n"
              "print(open(sys.argv[3]).read())")
    async with kubelet(tmp_path, client) as node:
        _pod(client, "sub", [PY, "-c", script, "/ckpt", "/mine", "/etc/app/train.yaml"],
             volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                      {"name": "conf", "configMap": {"name": "settings"}}],
             container={"env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/ckpt", "subPath": "runs/run-1"},
                                         {"name": "data", "mountPath": "/mine", "subPathExpr": "pods/$(POD)"},
                                         {"name": "conf", "mountPath": "/etc/app/train.yaml",
                                          "subPath": "train.yaml"}]})
        await until(client, "Pod", "default", "sub", _phase("Succeeded"))
        assert await _log(node, "sub") == "steps: 3\n"
    assert (volume / "runs" / "run-1" / "x").read_text() == "run"
    assert (volume / "pods" / "sub" / "y").read_text() == "pod"
    assert not (volume / "x").exists() and not (volume / "y").exists()


async def test_a_sub_path_that_a_symlink_leads_out_of_the_volume_is_refused(tmp_path):
    client = plane()
    volume = tmp_path / "volumes" / "default" / "data"
    volume.mkdir(parents=True)
    (volume / "out").symlink_to(tmp_path)  # planted by a pod that had the volume before
    async with kubelet(tmp_path, client):
        _pod(client, "escape", [PY, "-c", "print('ran')"],
             volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
             container={"volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "out"}]})
        waiting = await until(client, "Pod", "default", "escape", lambda p: "waiting" in _state(p)["state"])
    assert "is not within the volume" in _state(waiting)["state"]["waiting"]["message"]


SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# A pod of ns-b that reads its training config from a ConfigMap, follows the path written in it
# (a path its command never names, so no rewrite could reach it), and tries what it must not reach.
_CONFINED = """
import json, os, sys
config = json.load(open("/etc/app/config.json"))
open(config["checkpoint"], "w").write("step 7")
tries = {}
for path in sys.argv[1:]:
    try:
        open(path).read()
        tries[path] = "read"
    except OSError as exc:
        tries[path] = type(exc).__name__
print(json.dumps({"tries": tries, "token": open("/var/run/secrets/kubernetes.io/serviceaccount/token").read(),
                  "cluster": "KFCOCKPIT_CLUSTER" in os.environ}))
"""


async def test_a_confined_pod_sees_its_mounts_and_not_the_cluster(tmp_path):
    """Found: a pod of ns-b read the admin token and the signing key, and listed ns-a's volumes;
    a script opening /checkpoints/x from a config file got ENOENT (issue 44). Confined, the pod's
    mounts are at their mountPaths and the state root is empty; nothing is made on the machine."""
    if why := confine.available():
        pytest.skip(f"no mount namespace for a pod here: {why}")
    client = plane()
    root = tmp_path / "cluster"
    secrets = {"token": root / "pki" / "token", "key": root / "pki" / "service-account.key",
               "ns-a volume": root / "volumes" / "ns-a" / "pvc-1" / "model.pt"}
    for path in secrets.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not for ns-b")
    (tmp_path / "volumes" / "ns-b" / "data").mkdir(parents=True)
    client.create("Namespace", {"metadata": {"name": "ns-b"}})
    client.create("ConfigMap", {"metadata": {"name": "app", "namespace": "ns-b"},
                                "data": {"config.json": '{"checkpoint": "/checkpoints/x"}'}})
    client.create("Secret", {"metadata": {"name": "sa", "namespace": "ns-b"},
                             "data": {"token": base64.b64encode(b"ns-b token").decode()}})
    async with kubelet(tmp_path, client, confined=True) as node:
        client.create("Pod", {"metadata": {"name": "confined", "namespace": "ns-b"}, "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "app", "configMap": {"name": "app"}},
                        {"name": "sa", "secret": {"secretName": "sa"}}],
            "containers": [{"name": "main", "image": "x",
                            "command": [PY, "-c", _CONFINED, *map(str, secrets.values())],
                            "volumeMounts": [{"name": "data", "mountPath": "/checkpoints"},
                                             {"name": "app", "mountPath": "/etc/app"},
                                             {"name": "sa", "mountPath": SA_PATH}]}]}})
        client.bind("ns-b", "confined", "node-1")
        done = await until(client, "Pod", "ns-b", "confined", _phase("Succeeded", "Failed"))
        pod = client.get("Pod", "ns-b", "confined")
        printed = b"".join([chunk async for chunk in node.logs(pod, {})]).decode()
    assert done["status"]["phase"] == "Succeeded", printed
    seen = json.loads(printed)
    assert seen["tries"] == {str(p): "FileNotFoundError" for p in secrets.values()}
    assert seen["token"] == "ns-b token" and not seen["cluster"]
    assert (tmp_path / "volumes" / "ns-b" / "data" / "x").read_text() == "step 7"
    assert not Path("/checkpoints").exists() and not Path("/etc/app").exists()  # nothing made here


async def test_a_group_meets_on_a_port_of_its_own_new_for_each_attempt(tmp_path):
    client = plane()
    network = Network()
    script = "import os; print(os.environ['PET_MASTER_ADDR'], os.environ['PET_MASTER_PORT'])"

    def member(name: str, attempt: str) -> None:
        _pod(client, name, [PY, "-c", script], metadata={"labels": {"jobset.sigs.k8s.io/restart-attempt": attempt}},
             container={"env": [{"name": "PET_MASTER_ADDR", "value": "job-node-0-0.job"},
                                {"name": "PET_MASTER_PORT", "value": "29500"}]})

    async with kubelet(tmp_path, client, network=network) as node:
        for name, attempt in (("a0", "0"), ("b0", "0"), ("a1", "1")):
            member(name, attempt)
        for name in ("a0", "b0", "a1"):
            await until(client, "Pod", "default", name, _phase("Succeeded"))
        seen = {name: (await _log(node, name)).split() for name in ("a0", "b0", "a1")}
    assert seen["a0"] == seen["b0"] and seen["a0"][0] == "127.0.0.1"
    assert seen["a1"][1] != seen["a0"][1] and int(seen["a0"][1]) != 29500


async def test_active_deadline_fails_the_pod(tmp_path):
    client = plane()
    async with kubelet(tmp_path, client):
        _pod(client, "slow", [PY, "-c", "import time; time.sleep(600)"], activeDeadlineSeconds=1)
        failed = await until(client, "Pod", "default", "slow", _phase("Failed"))
        assert failed["status"]["reason"] == "DeadlineExceeded"


async def test_a_pod_bounded_by_its_pids_limit_fails_and_says_why(tmp_path):
    if PodCgroups.find("probe").base is None:
        pytest.skip("no writable pids cgroup on this machine")
    client = plane()
    script = ("import os, time\nchildren = []\n"
              "for _ in range(1000):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(60); os._exit(0)\n"
              "    children.append(pid)\n")
    async with kubelet(tmp_path, client, pids_limit=20):
        _pod(client, "forker", [PY, "-c", script])
        failed = await until(client, "Pod", "default", "forker", _phase("Failed"))
        assert "limit of 20 processes" in _state(failed)["state"]["terminated"]["message"]


def _memory_hog(chunk_mib: int) -> str:
    """A pod's script that keeps allocating `chunk_mib` at a time, saying how much it holds."""
    return ("held = []\n"
            f"for i in range(64):\n    held.append(bytearray(b'\\x01') * ({chunk_mib} << 20))\n"
            f"    print('held', (i + 1) * {chunk_mib}, 'MiB', flush=True)\n")


async def _held_mib(node, pod: str) -> list[int]:
    """What a `_memory_hog` pod said it held, MiB, line by line."""
    return [int(line.split()[1]) for line in (await _log(node, pod)).splitlines() if line.startswith("held")]


async def test_the_nodes_pods_together_hold_no_more_than_its_allocatable_memory(tmp_path):
    """--enforce-node-allocatable=pods: the pods' cgroup is limited to the node's allocatable
    memory, so a pod that keeps allocating is killed by the kernel inside it (SIGKILL, 137) and
    neither this process nor the rest of the machine is touched."""
    client = plane()
    async with kubelet(tmp_path, client, memory_max=128 << 20) as node:
        if node.cgroups.memory is None:
            pytest.skip("no writable memory cgroup on this machine")
        _pod(client, "hog", [PY, "-c", _memory_hog(32)])
        failed = await until(client, "Pod", "default", "hog", _phase("Failed"))
        assert (_state(failed)["state"]["terminated"]["exitCode"], _state(failed)["state"]["terminated"]["reason"]) \
            == (137, "OOMKilled")
        held = await _held_mib(node, "hog")
        assert held and max(held) <= 128


@pytest.mark.parametrize("confined", [False, True])
async def test_a_pod_over_its_memory_limit_ends_oomkilled_and_the_others_run_on(tmp_path, confined):
    """resources.limits.memory is the pod's own cgroup limit: the kernel kills it there, the
    kubelet reports OOMKilled (exit 137) as upstream's does, and a pod beside it is untouched;
    the same for pods with mount and PID namespaces of their own (confine.py, pidns.py)."""
    if confined and (why := confine.available() or pidns.available()):
        pytest.skip(f"no mount and PID namespace for a pod here: {why}")
    client = plane()
    async with kubelet(tmp_path, client, memory_max=2 << 30, confined=confined) as node:
        if node.cgroups.memory is None:
            pytest.skip("no writable memory cgroup on this machine")
        _pod(client, "small", [PY, "-c", "import time; print('up', flush=True); time.sleep(600)"],
             container={"resources": {"limits": {"memory": "256Mi"}}})
        _pod(client, "hog", [PY, "-c", _memory_hog(16)], container={"resources": {"limits": {"memory": "96Mi"}}})
        failed = await until(client, "Pod", "default", "hog", _phase("Failed"))
        terminated = _state(failed)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")
        held = await _held_mib(node, "hog")
        assert held and max(held) <= 96
        assert client.get("Pod", "default", "small")["status"]["phase"] == "Running"


async def test_pods_left_by_a_previous_kubelet_end_as_their_restart_policy_says(tmp_path):
    client = plane()
    async with kubelet(tmp_path, client):
        _pod(client, "never", [PY, "-c", "import time; time.sleep(600)"])
        _pod(client, "again", [PY, "-c", "import time; time.sleep(600)"], restart="OnFailure")
        for name in ("never", "again"):
            await until(client, "Pod", "default", name, _phase("Running"))
    # the kubelet stopped, and its processes with it
    async with kubelet(tmp_path, client):
        lost = await until(client, "Pod", "default", "never", _phase("Failed"))
        assert "lost" in _state(lost)["state"]["terminated"]["message"]
        again = await until(client, "Pod", "default", "again",
                            lambda p: _state(p)["restartCount"] == 1 and "running" in _state(p)["state"])
        assert _state(again)["lastState"]["terminated"]["exitCode"] == 137


async def test_a_pod_the_kubelet_fails_to_start_is_a_failure_the_jobs_backoff_limit_counts(tmp_path, monkeypatch):
    """The kubelet failing a pod's start (ENOSPC writing its files) fails that pod, and the Job's
    backoffLimit counts it (pkg/controller/job: a Failed pod is a failure whatever failed it): one
    pod for backoffLimit 0, never a storm of replacements. A status the disk refuses is reported
    again until it is taken (the kubelet's status manager retries), and nothing is left raising in
    a task nobody awaits ("Task exception was never retrieved")."""
    import asyncio
    import errno
    import gc
    import json

    from backend.local.controllers.job import JobController
    from backend.local.controllers.scheduler import Scheduler
    from backend.local.registry import store as store_module
    from training.atomic import write_atomic

    refused: list[str] = []

    def full_once(path, data, durable=True, mode=None):  # the disk is full when the failed pod's status is written
        obj = json.loads(data)
        if obj["kind"] == "Pod" and (obj.get("status") or {}).get("phase") == "Failed" and not refused:
            refused.append(obj["metadata"]["name"])
            raise OSError(errno.ENOSPC, "No space left on device")
        write_atomic(path, data, durable=durable, mode=mode)

    def no_space(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    unretrieved: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unretrieved.append(context))
    client = plane(tmp_path / "state")
    monkeypatch.setattr(store_module, "write_atomic", full_once)
    events = Events(client, host="test")
    created: list[str] = []
    client.registry.store.listeners.append(lambda kind, event: created.append(event.object["metadata"]["name"])
                                  if kind.kind == "Pod" and event.type == "ADDED" else None)
    async with kubelet(tmp_path, client) as node:
        monkeypatch.setattr(node, "prepare", no_space)
        async with running(JobController(client, events.recorder("job-controller")),
                           Scheduler(client, events.recorder("default-scheduler"))):
            client.create("Job", {"metadata": {"name": "once", "namespace": "default"}, "spec": {
                "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "x", "command": [PY, "-c", "pass"]}]}}}})
            failed = await until(client, "Job", "default", "once", lambda job: any(
                c["type"] == "Failed" and c["status"] == "True" for c in (job or {}).get("status", {}).get(
                    "conditions") or []))
    assert [c["reason"] for c in failed["status"]["conditions"] if c["type"] == "Failed"] == ["BackoffLimitExceeded"]
    assert len(created) == 1 and refused == created
    assert failed["status"].get("failed") == 1
    gc.collect()
    await asyncio.sleep(0)
    assert unretrieved == []


async def test_a_pod_named_as_long_as_a_name_may_be_runs(tmp_path):
    """A pod's name is a DNS subdomain (ValidatePodName: NameIsDNSSubdomain, up to 253
    characters), and upstream runs such a pod: its log directory's name stays within a file
    name's 255 bytes, and its Events (`<name>.<hex time>`, longer than 253) are taken as core/v1
    ValidateEventCreate takes them, without ValidateObjectMeta's name rule."""
    client = plane(tmp_path / "state")
    async with kubelet(tmp_path, client) as node:
        name = "p" * 240
        _pod(client, name, [PY, "-c", "print('hello')"])
        done = await until(client, "Pod", "default", name, _phase("Succeeded", "Failed"))
        assert (done["status"]["phase"], _state(done)["state"]["terminated"]["exitCode"]) == ("Succeeded", 0)
        assert await _log(node, name) == "hello\n"
        assert any(e["involvedObject"]["name"] == name for e in client.list("Event", "default"))


@pytest.mark.parametrize("status", [15, 1 << 8])  # ended by SIGTERM (a launcher passing it on), or exit 1
def test_an_oom_killed_container_is_reported_with_exit_code_137(status):
    """The kernel ends a container at its memory limit by killing its whole cgroup (the kubelet
    sets memory.oom.group, singleProcessOOMKill false): the container's status is OOMKilled with
    exit code 137 and signal 9, whatever its main process's wait status says (a launcher that
    died of the SIGTERM it sends its workers would otherwise show 143)."""
    from types import SimpleNamespace

    from backend.local.node.pod_worker import PodWorker

    node = SimpleNamespace(oom_killed=lambda pod: True, limit_reached=lambda pod: "")
    pod = {"metadata": {"uid": "u", "namespace": "default", "name": "p"},
           "spec": {"containers": [{"name": "main"}]}}
    run = SimpleNamespace(start_error="", started=0.0, pid=1, note="", log=SimpleNamespace(last_lines=[]))
    state = PodWorker(node, pod)._terminated(run, status)
    assert (state["exitCode"], state["reason"], state["signal"]) == (137, "OOMKilled", 9)


async def test_a_trainjob_whose_pods_the_kubelet_cannot_start_fails_within_its_restarts(tmp_path, monkeypatch):
    """The same for a TrainJob on a nearly full disk (issue #44: 135 pods in 25 s): each pod the
    kubelet fails to start fails its Job (backoffLimit 0), the JobSet restarts the group at most
    failurePolicy.maxRestarts times (jobset v0.12 failure_policy.go), then fails, and the TrainJob
    with it: the lesson's 2 nodes and maxRestarts 3 make at most 4 attempts, 8 pods, however many
    of the controllers' and the kubelet's writes the disk refuses on the way."""
    import errno
    import itertools

    from backend.local.registry import store as store_module
    from tests.controllers.test_training import _cluster, _trainjob
    from training.atomic import write_atomic

    def no_space(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    writes = itertools.count()

    def nearly_full(path, data, durable=True, mode=None):  # every third write finds the disk full
        if next(writes) % 3 == 2:
            no_space()
        write_atomic(path, data, durable=durable, mode=mode)

    client, controllers = _cluster(nodes=0)
    client.registry.store.directory = tmp_path / "state"  # kept on a disk that refuses some writes
    monkeypatch.setattr(store_module, "write_atomic", nearly_full)
    created: list[str] = []
    client.registry.store.listeners.append(lambda kind, event: created.append(event.object["metadata"]["name"])
                                  if kind.kind == "Pod" and event.type == "ADDED" else None)
    async with kubelet(tmp_path, client) as node:
        monkeypatch.setattr(node, "prepare", no_space)
        async with running(*controllers):
            _trainjob(client)
            failed = await until(client, "TrainJob", "default", "lesson-ddp", lambda job: any(
                c["type"] == "Failed" and c["status"] == "True"
                for c in ((job or {}).get("status") or {}).get("conditions") or []), timeout=60)
    assert failed is not None
    jobset = client.get("JobSet", "default", "lesson-ddp")
    assert jobset["status"].get("restarts") == 3
    assert len(created) <= 8


async def test_a_running_status_the_disk_refuses_is_sent_again_and_the_pod_runs_on(tmp_path, monkeypatch):
    """The kubelet's status manager keeps the latest status and resends it: a pod whose Running
    status the API refuses (a full disk) is not killed for it, shows Running once the status is
    taken, and ends as its process does."""
    import errno
    import json

    from backend.local.registry import store as store_module
    from training.atomic import write_atomic

    refused: list[str] = []

    def full_once(path, data, durable=True, mode=None):
        obj = json.loads(data)
        if obj["kind"] == "Pod" and (obj.get("status") or {}).get("phase") == "Running" and not refused:
            refused.append(obj["metadata"]["name"])
            raise OSError(errno.ENOSPC, "No space left on device")
        write_atomic(path, data, durable=durable, mode=mode)

    client = plane(tmp_path / "state")
    monkeypatch.setattr(store_module, "write_atomic", full_once)
    phases: list[str] = []
    client.registry.store.listeners.append(lambda kind, event: phases.append(event.object["status"].get("phase"))
                                  if kind.kind == "Pod" else None)
    async with kubelet(tmp_path, client) as node:
        _pod(client, "steady", [PY, "-c", "import time; time.sleep(600)"])
        running_pod = await until(client, "Pod", "default", "steady", _phase("Running"))
        assert refused == ["steady"] and _state(running_pod)["state"].get("running")
        node.workers[running_pod["metadata"]["uid"]].run.kill()  # now let it end
        ended = await until(client, "Pod", "default", "steady", _phase("Succeeded", "Failed"))
    assert _state(ended)["state"]["terminated"]["exitCode"] == 137  # its own end, not the kubelet's 128
    assert phases.count("Running") >= 1
