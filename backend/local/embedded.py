"""The embedded cluster as the rest of the cockpit sees it: a Kubernetes to start, stop and find.

Everything else (jobs, pods, logs, volumes, snapshots) goes through its API server with the
kube backend, exactly as on kind: this module only starts the controller on demand, stops it,
says where its kubeconfig is, and runs the checks a real cluster has no equivalent for
(the controller process, warm workers, torch for pods, hard-linked snapshots).

Start-up is the controller client's (flock, no polling); a cluster stopped on purpose
(`kfcockpit cluster down`) stays stopped until `up`: `start` then raises Unavailable.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from backend.cluster import Capabilities
from backend.errors import Unavailable
from backend.local import shape as shapes
from backend.local.client import ControllerClient
from backend.local.layout import Layout
from backend.settings import Settings
from backend.words import count

CONTEXT = "kfcockpit"  # the context name in the embedded kubeconfig (apiserver/credentials.py)
DESCRIPTION = "the embedded local cluster"
# How its kubelet slows a pod (node/throttle.py), said by `kfcockpit pod slow`.
SLOWED_BY = "a SIGSTOP/SIGCONT duty cycle on its processes, in proportion to their busy time"


def capabilities(settings: Settings) -> Capabilities:
    """What the embedded cluster offers beside its API: its pods and pipelines run on this
    machine, its nodes' machines fail and come back on request, a fresh one anywhere, volumes'
    files readable here, warm workers, a controller started again when a connection lost it,
    and its own setup checks."""
    embedded = Embedded(settings.home)
    namespace = settings.namespace or "default"
    return Capabilities(
        description=DESCRIPTION, record=f"{DESCRIPTION} (state in {settings.home})",
        pods_here=True, pipelines_here=True, freezes_pods=True, slows_pods=SLOWED_BY,
        fail_node=embedded.fail_node, restore_node=embedded.restore_node,
        fresh=lambda home: Fresh(settings.model_copy(update={"home": home})),
        volume_path=lambda claim: embedded.mount(claim, namespace),
        warm=embedded.warm, checks=embedded.checks, revive=embedded.revive)


@dataclass
class Fresh:
    """A clean embedded cluster at its own state root. Its controller is detached, so whoever
    starts it stops it; stopped on purpose, it stays stopped until `up`."""

    settings: Settings

    @property
    def kubeconfig(self) -> Path:
        return Embedded(self.settings.home).kubeconfig

    async def up(self, warm: bool) -> None:
        await Embedded(self.settings.home).up(warm=warm)

    async def down(self) -> None:
        await Embedded(self.settings.home).down()


class Embedded:
    def __init__(self, home: Path):
        self.layout = Layout(home)
        self.client = ControllerClient(self.layout)

    @property
    def kubeconfig(self) -> Path:
        return self.layout.home / "kubeconfig"

    def server(self) -> str:
        """The API server's address now (its port can change when a controller starts again)."""
        try:
            return f"https://127.0.0.1:{int((self.layout.root / 'api-port').read_text())}"
        except (OSError, ValueError):
            raise Unavailable("the embedded cluster has no API server address yet "
                              "(start it: kfcockpit cluster up)") from None

    def start(self) -> None:
        """Blocking (call from a thread in an event loop): start the controller unless one
        answers; Unavailable when it was stopped on purpose or does not start."""
        self.client.start_controller()

    def revive(self) -> str:
        """For a connection that lost the API server: start a controller again (a crashed or
        idle-stopped one; never one stopped on purpose) and return the address to use."""
        self.start()
        return self.server()

    def shape(self) -> shapes.Shape:
        """The cluster's shape: as chosen, else the lesson's (shape.py)."""
        return shapes.load(self.layout.shape_file)

    def reshape(self, **changes) -> bool:
        """The shape with these changes (shape.Shape's fields) from the next start on: checked
        first (InvalidResource, nothing written); True when a controller runs now (it keeps its
        shape until then)."""
        changed = replace(self.shape(), **changes).check()
        shapes.save(self.layout.shape_file, changed)
        return self.client.answers()

    async def fail_node(self, name: str) -> str:
        """The machine of one node is lost: every process on it ends at once (fleet.py)."""
        return (await self.client.call("node-fail", start=False, node=name))["message"]

    async def restore_node(self, name: str) -> str:
        return (await self.client.call("node-restore", start=False, node=name))["message"]

    def mount(self, claim: str, namespace: str = "default") -> Path:
        """Where a kfp.local task (a process here, which kfp.local gives no mounts) finds the
        volume of PVC `claim`: the directory the embedded cluster keeps it in; NotFound until
        the claim is bound."""
        return self.layout.claim_dir(namespace, claim)

    async def up(self, warm: bool = True) -> dict:
        """Start it (also after `down`), with its warm workers unless `warm` is False (a reader
        that runs no job); the controller's status."""
        return await self.client.call("up" if warm else "ping", explicit=True)

    async def warm(self) -> None:
        """Have a running controller start its warm workers now (as `up` does), for pods that come
        seconds later; nothing when none runs (the first job starts them)."""
        try:
            await self.client.call("up", start=False)
        except (Unavailable, FileNotFoundError):  # none runs, or no state root yet
            pass

    async def warmed(self) -> dict:
        """Start the warm workers and return once they can fork pods (a zygote has imported
        torch, seconds after `up`): what a node that has run a while offers its first job. The
        controller's status."""
        return await self.client.call("warmed", explicit=True)

    async def down(self) -> int | None:
        """Stop the controller and every pod, for good until `up`; the pid that stopped."""
        return await self.client.shutdown()

    async def status(self) -> dict | None:
        return await self.client.ping()

    async def checks(self) -> list:
        """What only the embedded cluster has: its controller process, warm workers, torch for
        pods, and a state root where snapshots can hard-link."""
        from backend.models import Check

        checks = []
        status = await self.client.ping()
        if status:
            checks.append(Check(name="controller", ok=True,
                                detail=f"running (pid {status['pid']}, up {time.time() - status['started']:.0f}s)"))
            warm = status.get("warm") or []
            problems = [w["problem"] for w in warm if w["problem"] and w["problem"] != "stopped"]
            ready = any(w["ready"] for w in warm)
            checks.append(Check(
                name="warm-workers", ok=not problems,
                detail=(f"pods run their command as is (slower start): {problems[0]}" if problems else
                        "pods start from a process with torch imported" if ready else
                        "warm workers start with the first runtime or job (kfcockpit cluster up starts them now)"),
                fix="" if not problems else f"see {self.layout.controller_log}"))
            checks.append(self._nodes_check(status))
        else:
            stopped = self.layout.stopped.exists()
            checks.append(Check(name="controller", ok=False, fix="kfcockpit cluster up",
                                detail="the embedded cluster was stopped (kfcockpit cluster down)" if stopped
                                else "the embedded cluster's controller is not running"))
        problem = await asyncio.to_thread(self._hard_link_problem)
        checks.append(Check(name="snapshots-on-disk", ok=not problem,
                            detail="hard-linked snapshots supported" if not problem else f"cannot hard-link: {problem}",
                            fix="" if not problem else "put KFCOCKPIT_HOME on a local filesystem"))
        return checks

    @staticmethod
    def _nodes_check(status: dict):
        """The nodes, the failed ones named, and whether their GPUs are simulated (pods train on CPU)."""
        from backend.models import Check

        nodes, failed = status.get("nodes") or [], status.get("failed_nodes") or []
        detail = f"{count(len(nodes), 'node')}: {', '.join(nodes)}"
        if failed:
            detail += f"; failed: {', '.join(failed)}"
        if status.get("simulated_gpus"):
            detail += "; nvidia.com/gpu simulated (no such GPUs here): GPU pods train on CPU"
        return Check(name="nodes", ok=not failed, detail=detail,
                     fix="" if not failed else " && ".join(f"kfcockpit node restore {n}" for n in failed))

    def _hard_link_problem(self) -> str:
        self.layout.create()
        with tempfile.TemporaryDirectory(dir=self.layout.root) as d:
            try:
                (Path(d) / "a").write_bytes(b"")
                os.link(Path(d) / "a", Path(d) / "b")
            except OSError as exc:
                return exc.strerror or str(exc)
        return ""
