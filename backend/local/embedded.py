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
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from backend.cluster import Capabilities
from backend.errors import Unavailable
from backend.local.client import ControllerClient
from backend.local.layout import Layout
from backend.settings import Settings

CONTEXT = "kfcockpit"  # the context name in the embedded kubeconfig (apiserver/credentials.py)
DESCRIPTION = "the embedded local cluster"


def capabilities(settings: Settings) -> Capabilities:
    """What the embedded cluster offers beside its API: its pods and pipelines run on this
    machine, a fresh one anywhere, volumes' files readable here, warm workers, a controller
    started again when a connection lost it, and its own setup checks."""
    embedded = Embedded(settings.home)
    namespace = settings.namespace or "default"
    return Capabilities(
        description=DESCRIPTION, record=f"{DESCRIPTION} (state in {settings.home})",
        pods_here=True, pipelines_here=True,
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

    def size_node(self, cpus: str | None, memory: str | None, max_pods: int | None = None) -> bool:
        """The node's CPUs and memory (Kubernetes quantities) and the pods it holds (the kubelet's
        --max-pods) from the next start on; True when a controller runs now (it keeps its size
        until then)."""
        from backend.quantity import quantity

        chosen = {"cpu": quantity(cpus) if cpus else None, "memory": quantity(memory) if memory else None,
                  "pods": max_pods}
        self.layout.root.mkdir(parents=True, exist_ok=True)
        self.layout.node_file.write_text(json.dumps(chosen))
        return self.client.controller_pid() is not None

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

    def _hard_link_problem(self) -> str:
        self.layout.create()
        with tempfile.TemporaryDirectory(dir=self.layout.root) as d:
            try:
                (Path(d) / "a").write_bytes(b"")
                os.link(Path(d) / "a", Path(d) / "b")
            except OSError as exc:
                return exc.strerror or str(exc)
        return ""
