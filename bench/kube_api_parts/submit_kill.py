"""1. submit -> first step and kill -> first resumed step of the lesson's TrainJob: the cockpit's
client, `kubectl apply` / `kubectl delete pod` and the kubernetes client, in the same rounds; then
the first submit after a controller start. See bench/kube_api.py for what "printed" and "seen" are."""

from __future__ import annotations

import statistics
import time
from typing import Awaitable, Callable

import yaml

from kube_api_parts.clients import ATTEMPT, Api, Follower, first_step_time
from local_cluster import KILL_AT, SHORT, job_manifest, ours_first_step, ours_restart

from backend.kube.cluster import KubeCluster
from backend.local.embedded import Embedded
from backend.models import LABEL_RANK
from training.logfmt import step_and_loss

GOAL_SECONDS = 0.3


async def api_first_step(api: Api, name: str, submit: Callable[[str], Awaitable[float | None]]
                         ) -> tuple[float, float, float | None]:
    """(printed, seen, command ran) in seconds from the submit's start."""
    follower = await Follower.start(api, name)
    try:
        started = time.time()
        ran = await submit(name)
        async for arrival, _pod, text in follower.lines():
            if step_and_loss(text):
                return first_step_time(api.home, name, list(follower.pods)) - started, arrival - started, ran
    finally:
        await follower.close()
        await api.delete_job(name)
    raise RuntimeError(f"{name} printed no step")


async def api_restart(api: Api, name: str, kill: Callable[[str], Awaitable[float | None]]
                      ) -> tuple[float, float, float | None]:
    """Rank 1 deleted at step KILL_AT; (printed, seen, command ran) from the kill's start until the
    recreated group's first step."""
    follower = await Follower.start(api, name)
    killed = ran = None
    try:
        await api.create_job(job_manifest(name, SHORT + ["--ckpt-every", "5", "--ckpt-dir", f"/checkpoints/{name}"]))
        async for arrival, pod, text in follower.lines():
            found = step_and_loss(text)
            if found is None:
                continue
            if killed is None and found[0] >= KILL_AT:
                victim = next(p for p, labels in follower.pods.items()
                              if labels.get(LABEL_RANK) == "1" and labels.get(ATTEMPT) == "0")
                killed = time.time()
                ran = await kill(victim)
            elif killed is not None and follower.pods[pod].get(ATTEMPT, "0") != "0":
                new = [p for p, labels in follower.pods.items() if labels.get(ATTEMPT, "0") != "0"]
                return first_step_time(api.home, name, new) - killed, arrival - killed, ran
    finally:
        await follower.close()
        await api.delete_job(name)
    raise RuntimeError(f"{name} did not come back after the kill")


def submitters(api: Api) -> dict[str, Callable[[str], Awaitable[float | None]]]:
    async def kubectl_apply(name: str) -> float:
        return await api.kubectl("apply", "-f", "-", input=yaml.safe_dump(job_manifest(name, SHORT)))

    async def client_create(name: str) -> None:
        await api.create_job(job_manifest(name, SHORT))

    return {"kubectl": kubectl_apply, "client": client_create}


async def submit_and_kill(cluster: KubeCluster, api: Api, rounds: int) -> dict[str, list[tuple]]:
    kubectl_apply, client_create = submitters(api).values()

    async def kubectl_delete(pod: str) -> float:
        return await api.kubectl("delete", "pod", pod)

    results: dict[str, list[tuple]] = {key: [] for key in (
        "submit cockpit", "submit kubectl", "submit client", "kill cockpit", "kill kubectl", "kill client")}
    # One unmeasured round per API path: kubectl's discovery and OpenAPI cache, the client's pool.
    await api_first_step(api, "api-warm-kubectl", kubectl_apply)
    await api_first_step(api, "api-warm-client", client_create)
    for r in range(rounds):
        results["submit cockpit"].append((await ours_first_step(cluster, f"submit-cockpit-{r}", SHORT, warm=True),))
        results["submit kubectl"].append(await api_first_step(api, f"submit-kubectl-{r}", kubectl_apply))
        results["submit client"].append(await api_first_step(api, f"submit-client-{r}", client_create))
        print(f"round {r + 1}: submit -> first step: cockpit {results['submit cockpit'][-1][0]:.3f}s, "
              f"kubectl apply {results['submit kubectl'][-1][0]:.3f}s, client {results['submit client'][-1][0]:.3f}s",
              flush=True)
    for r in range(rounds):
        args = SHORT + ["--ckpt-every", "5", "--ckpt-dir", f"/checkpoints/kill-cockpit-{r}"]
        results["kill cockpit"].append((await ours_restart(cluster, f"kill-cockpit-{r}", args, KILL_AT),))
        results["kill kubectl"].append(await api_restart(api, f"kill-kubectl-{r}", kubectl_delete))
        results["kill client"].append(await api_restart(api, f"kill-client-{r}", api.delete_pod))
        print(f"round {r + 1}: kill -> first resumed step: cockpit {results['kill cockpit'][-1][0]:.3f}s, "
              f"kubectl delete pod {results['kill kubectl'][-1][0]:.3f}s, "
              f"client delete {results['kill client'][-1][0]:.3f}s", flush=True)
    return results


async def first_after_start(cluster: KubeCluster, api: Api) -> dict[str, tuple]:
    """The first TrainJob submitted through the API after a controller start (what a learner's
    first `kubectl apply` after `cluster up` meets): the controller restarted, its zygote warmed by
    a job through the cockpit's client, then one submit; kubectl with an empty cache, as on its
    first use against a cluster."""
    found = {}
    for side, submit in submitters(api).items():
        await Embedded(api.home).down()
        await Embedded(api.home).up()
        await ours_first_step(cluster, f"restart-warm-{side}", ["--steps", "3"], warm=True)
        cache = api.env["KUBECACHEDIR"]
        api.env["KUBECACHEDIR"] = str(api.home / "kube-cache-empty")
        try:
            found[side] = await api_first_step(api, f"first-{side}", submit)
        finally:
            api.env["KUBECACHEDIR"] = cache
        print(f"first submit after a controller start: {side} {found[side][0]:.3f}s", flush=True)
    return found


# ---------------------------------------------------------------- report


def row(label: str, values: list[float], extra: str = "") -> str:
    med = statistics.median(values)
    return f"  {label:<38} {med:7.3f} s  {min(values):6.3f}..{max(values):6.3f}{extra}"


def report_timed(timed: dict[str, list[tuple]], rounds: int) -> None:
    med = statistics.median
    print(f"1. kubectl and the kubernetes client vs the cockpit's client, medians of {rounds} round(s) "
          f"(min..max); goal <= {GOAL_SECONDS} s")
    for what, title in (("submit", "submit -> first step"), ("kill", "kill -> first resumed step")):
        print(f" {title}")
        ours = [r[0] for r in timed[f"{what} cockpit"]]
        print(row("cockpit (KubeCluster " + ("apply)" if what == "submit" else "kill_pod)"), ours))
        for side, label in (("kubectl", "kubectl apply -f" if what == "submit" else "kubectl delete pod"),
                            ("client", "client create" if what == "submit" else "client delete, grace 0")):
            got = timed[f"{what} {side}"]
            printed = [r[0] for r in got]
            extra = (f"  = {med(printed) / med(ours):.2f}x cockpit; seen {med([r[1] for r in got]):.3f} s"
                     + (f"; kubectl ran {med([r[2] for r in got]):.3f} s" if side == "kubectl" else "")
                     + ("  ok" if med(printed) <= GOAL_SECONDS else "  OVER GOAL"))
            print(row(label, printed, extra))


def report_first(first: dict[str, tuple], ours: list[float]) -> None:
    med = statistics.median(ours)
    print(" the first submit through the API after a controller start (one each)")
    for side, label in (("kubectl", "kubectl apply -f, empty kubectl cache"), ("client", "client create")):
        printed, seen, ran = first[side]
        print(f"  {label:<38} {printed:7.3f} s  = {printed / med:.2f}x cockpit; seen {seen:.3f} s"
              + (f"; kubectl ran {ran:.3f} s" if ran is not None else "")
              + ("  ok" if printed <= GOAL_SECONDS else "  OVER GOAL"))
