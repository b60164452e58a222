"""2. Watch event delivery: merge patches at a steady rate from a process of their own, each
carrying its send time, of a ConfigMap (persisted) and of a running pod's annotations (in memory);
the latency from a patch's send to its MODIFIED event at a kubernetes-client watch and at
`kubectl get -w`, against the patches' own round trips."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from kube_api_parts.clients import NAMESPACE, Api, Follower


class Target:
    """The object whose writes are watched: where it is, and where a patch puts its stamp."""

    def __init__(self, plural: str, name: str):
        self.plural, self.name = plural, name
        self.path = f"/api/v1/namespaces/{NAMESPACE}/{plural}/{name}"
        self.field = "data" if plural == "configmaps" else "annotations"  # what a patch sets

    def patch(self, seq: int, sent: float) -> dict:
        stamp = {"benchseq": str(seq), "bencht": f"{sent:.6f}"}
        return {"data": stamp} if self.field == "data" else {"metadata": {"annotations": stamp}}

    def stamp(self, obj: dict) -> tuple[int, float] | None:
        carried = (obj.get("data") if self.field == "data" else obj["metadata"].get("annotations")) or {}
        return (int(carried["benchseq"]), float(carried["bencht"])) if "benchseq" in carried else None

    @property
    def jsonpath(self) -> str:
        at = ".data" if self.field == "data" else ".metadata.annotations"
        return f"jsonpath={{{at}.benchseq}} {{{at}.bencht}}{{\"\\n\"}}"


def patch_load(kubeconfig: str, path: str, field: str, rate: float, seconds: float, results) -> None:
    """The load, in a process of its own (its client work holds no GIL the watchers need): from
    one thread, a merge patch of the target every 1/rate s carrying its send time, each sent on
    time whether or not the ones before have been answered (the server answers in order anyway)."""
    asyncio.run(_patch_load(kubeconfig, path, field, rate, seconds, results))


async def _patch_load(kubeconfig: str, path: str, field: str, rate: float, seconds: float, results) -> None:
    import base64
    import ssl

    import aiohttp

    config = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    headers = {"Authorization": f"Bearer {user['token']}", "Content-Type": "application/merge-patch+json"}
    target = Target(path.split("/")[-2], path.split("/")[-1])
    round_trips: list[float] = []
    async with aiohttp.ClientSession(cluster["server"], headers=headers,
                                     connector=aiohttp.TCPConnector(ssl=context, limit=16)) as session:
        async def send(seq: int) -> None:
            sent = time.time()
            async with session.patch(path, data=json.dumps(target.patch(seq, sent))) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"patch {path}: {response.status} {await response.text()}")
            round_trips.append(time.time() - sent)

        await asyncio.gather(*(send(-3) for _ in range(4)))  # connections open before the clock starts
        round_trips.clear()
        start = time.time() + 0.05
        sends = []
        for seq in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + seq / rate - time.time()))
            sends.append(asyncio.create_task(send(seq)))
        await asyncio.gather(*sends)
    results.put((round_trips, time.time() - start))


class ClientWatch(threading.Thread):
    """A kubernetes-client watch of the target (events deserialized, as a user's code gets them)."""

    def __init__(self, api: Api, target: Target, since: str, expected: int):
        super().__init__(daemon=True)
        self.api, self.target, self.since, self.expected = api, target, since, expected
        self.latency: dict[int, float] = {}
        self.warm = threading.Event()

    def run(self) -> None:
        from kubernetes import watch

        listing = (self.api.core.list_namespaced_config_map if self.target.plural == "configmaps"
                   else self.api.core.list_namespaced_pod)
        w = watch.Watch()
        for event in w.stream(listing, NAMESPACE, field_selector=f"metadata.name={self.target.name}",
                              resource_version=self.since, timeout_seconds=600):
            arrival = time.time()
            found = self.target.stamp(event["raw_object"]) if event["type"] == "MODIFIED" else None
            if found is None:
                continue
            seq, sent = found
            if seq == -1:
                self.warm.set()  # a warm-up patch: the watch is open
            elif seq >= 0:
                self.latency[seq] = arrival - sent
                if seq == self.expected - 1:
                    w.stop()
                    return


class KubectlWatch(threading.Thread):
    """`kubectl get -w`, one line per event, stamped as it is read."""

    def __init__(self, api: Api, target: Target, expected: int):
        super().__init__(daemon=True)
        self.proc = api.popen("get", target.plural, target.name, "-w", "-o", target.jsonpath)
        self.expected = expected
        self.latency: dict[int, float] = {}
        self.warm = threading.Event()

    def run(self) -> None:
        for line in self.proc.stdout:
            arrival = time.time()
            seq, _, sent = line.decode().strip().partition(" ")
            if not sent:
                continue  # an event of someone else's write
            if int(seq) == -1:  # not before: kubectl prints the object it listed before its watch is open
                self.warm.set()
            elif int(seq) >= 0:
                self.latency[int(seq)] = arrival - float(sent)
                if int(seq) == self.expected - 1:
                    break
        self.proc.kill()
        self.proc.wait()


async def watch_latency(api: Api, target: Target, rate: float, seconds: float) -> dict[str, Any]:
    expected = int(rate * seconds)
    live = await asyncio.to_thread(api.client.call_api, target.path, "GET", auth_settings=["BearerToken"],
                                   response_type="object", _return_http_data_only=True)
    watchers = [ClientWatch(api, target, live["metadata"]["resourceVersion"], expected),
                KubectlWatch(api, target, expected)]
    for w in watchers:
        w.start()
    # One patch both have seen: both watches are open. Neither can miss it: the client watches from
    # the version listed before it, kubectl lists (showing the patch) or watches from its listing.
    await asyncio.to_thread(api.client.call_api, target.path, "PATCH", body=target.patch(-1, 0),
                            header_params={"Content-Type": "application/merge-patch+json"},
                            auth_settings=["BearerToken"], _preload_content=False)
    for w in watchers:
        if not await asyncio.to_thread(w.warm.wait, 20):
            raise RuntimeError(f"the watches of {target.path} saw no event in 20 s")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    load = context.Process(target=patch_load, daemon=True,
                           args=(str(api.kubeconfig), target.path, target.field, rate, seconds, results))
    load.start()
    try:
        round_trips, took = await asyncio.to_thread(results.get, True, seconds + 120)
    finally:
        load.join(5)
        if load.is_alive():
            load.kill()
    for w in watchers:
        await asyncio.to_thread(w.join, 10)
    if watchers[1].is_alive():
        watchers[1].proc.kill()
    return {"sent": len(round_trips), "rate": len(round_trips) / took, "round_trip": round_trips,
            "client": list(watchers[0].latency.values()), "kubectl": list(watchers[1].latency.values())}


SLEEPER = "import signal; signal.pause()"  # a pod that lives, until deleted, while its object is patched


async def watch_both(api: Api, rate: float, seconds: float) -> dict[str, dict[str, Any]]:
    """Writes of a ConfigMap (a persisted kind: every write is fsynced) and of a running pod's
    annotations (pods live in memory, as the runners' pod updates do), each watched."""
    found = {}
    await asyncio.to_thread(api.core.create_namespaced_config_map, NAMESPACE, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench-watch"}, "data": {"pad": "x" * 3000}},
        _preload_content=False)
    try:
        found["configmap"] = await watch_latency(api, Target("configmaps", "bench-watch"), rate, seconds)
    finally:
        await asyncio.to_thread(api.core.delete_namespaced_config_map, "bench-watch", NAMESPACE,
                                _preload_content=False)
    follower = await Follower.start(api, "watch-sleeper")
    await api.create_job({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                          "metadata": {"name": "watch-sleeper"},
                          "spec": {"runtimeRef": {"name": "torch-distributed"},
                                   "trainer": {"numNodes": 1, "command": ["python", "-c", SLEEPER]}}})
    try:
        await follower.until_pods(1)
        found["pod"] = await watch_latency(api, Target("pods", next(iter(follower.pods))), rate, seconds)
    finally:
        await follower.close()
        await api.delete_job("watch-sleeper")
    return found


# ---------------------------------------------------------------- report


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report_watched(watched: dict[str, dict[str, Any]], rate: float, seconds: float) -> None:
    print(f"2. watch event delivery at {rate:g} writes/s for {seconds:g} s, from a patch's send to its MODIFIED "
          "event; goal p99 <= 50 ms")
    for what, label in (("configmap", "a ConfigMap (persisted: fsync)"), ("pod", "a running pod's annotations")):
        got = watched[what]
        rt = got["round_trip"]
        print(f" {label}: {got['sent']} patches at {got['rate']:.0f}/s")
        print(f"  {'patch round trip (baseline)':<38} p50 {percentile(rt, .5) * 1000:6.1f} ms  "
              f"p99 {percentile(rt, .99) * 1000:6.1f} ms  max {max(rt) * 1000:6.1f} ms")
        for side, name in (("client", "kubernetes-client watch"), ("kubectl", "kubectl get -w")):
            seen = got[side]
            if not seen:
                print(f"  {name:<38} no event received  OVER GOAL")
                continue
            p99 = percentile(seen, .99)
            print(f"  {name:<38} p50 {percentile(seen, .5) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  "
                  f"max {max(seen) * 1000:6.1f} ms  ({len(seen)}/{got['sent']} events)"
                  + ("  ok" if p99 <= 0.05 and len(seen) == got["sent"] else "  OVER GOAL"))
