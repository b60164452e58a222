"""The embedded cluster driven through its Kubernetes API: the cockpit's own client, kubectl and the
kubernetes client, in the same run.

  1. submit -> first step of the lesson's two-worker TrainJob (manifests/trainjob.yaml, paced):
     the cockpit's client (`KubeCluster.apply`, bench/local_cluster.py's path), `kubectl apply -f`
     and the kubernetes client's create, in the same rounds; goal <= 0.3 s.
     kill -> first resumed step: the cockpit's `kill_pod`, `kubectl delete pod` of rank 1 and the
     client's delete with grace 0; goal <= 0.3 s.
     "printed" (the figure) is the worker's step line as the controller stamped it in the pod's
     log file (the cockpit's figure is that stamp, read from its own log follow); "seen" is when a
     client following the job through the API (a pod watch, then each pod's log followed)
     received that line. Both count from the moment the command started, kubectl's own start-up
     included ("kubectl ran": how long the kubectl process took). Then, once each, the first
     submit after a controller restart (the API's lazily built schemas; kubectl with an empty
     cache, as on its first use).
  2. watch event delivery: from one thread, 100 merge patches a second for --watch-seconds, each
     carrying its send time, of a pod-sized ConfigMap (a persisted kind) and of a running pod's
     annotations (pods live in memory); the latency is from a patch's send to its MODIFIED event
     at a kubernetes-client watch and at `kubectl get -w`, on the same clock. The patches' own
     round trips are the baseline; goal p99 <= 50 ms.
  3. `kubectl logs -f -l jobset.sigs.k8s.io/jobset-name=JOB --max-log-requests 4` of a TrainJob on
     the stock torch-distributed ClusterTrainingRuntime whose two workers print --log-lines lines
     each as fast as they can: lines/s received against lines/s the controller wrote to its log
     files (the baseline), and how long after its writing the last line arrived; goal: keeps up
     with 10k lines/s.

    .venv/bin/python bench/kube_api.py [--rounds 5] [--watch-seconds 10] [--log-lines 100000] [--only PART]
    .venv/bin/python bench/kube_api.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from kube_api_parts.clients import Api
from kube_api_parts.logs_follow import logs_throughput, report_logs
from kube_api_parts.submit_kill import first_after_start, report_first, report_timed, submit_and_kill
from kube_api_parts.watch_delivery import report_watched, watch_both
from local_cluster import REPO, embedded_cluster


PARTS = ("submit", "watch", "logs")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--watch-seconds", type=float, default=10.0)
    p.add_argument("--watch-rate", type=float, default=100.0, help="patches per second")
    p.add_argument("--log-lines", type=int, default=100_000, help="lines each of the two workers prints")
    p.add_argument("--quick", action="store_true", help="1 round, a 3 s watch, 20k lines per worker")
    p.add_argument("--only", action="append", choices=PARTS, help="run only this part (1, 2 or 3; repeatable)")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.watch_seconds, a.log_lines = 1, 3.0, 20_000
    parts = a.only or PARTS
    got: dict[str, Any] = {}
    load_before = os.getloadavg()[0]
    async with embedded_cluster() as (cluster, home):
        api = Api(home)
        try:
            # "a running cluster with the runtime and volume applied": through kubectl too, which
            # also fills its discovery cache.
            await api.kubectl("apply", "-f", str(REPO / "manifests" / "runtime.yaml"),
                              "-f", str(REPO / "manifests" / "volume.yaml"))
            if "submit" in parts:
                got["timed"] = await submit_and_kill(cluster, api, a.rounds)
            if "watch" in parts:
                got["watched"] = await watch_both(api, a.watch_rate, a.watch_seconds)
            if "logs" in parts:
                got["logs"] = await logs_throughput(api, a.log_lines)
            if "submit" in parts:  # last: it restarts the controller
                got["first"] = await first_after_start(cluster, api)
        finally:
            api.close()
    print(f"\nthe machine's 1-minute load average: {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"({os.cpu_count()} cores; every figure is sensitive to it)")
    if "timed" in got:
        print()
        report_timed(got["timed"], a.rounds)
        report_first(got["first"], [r[0] for r in got["timed"]["submit cockpit"]])
    if "watched" in got:
        print()
        report_watched(got["watched"], a.watch_rate, a.watch_seconds)
    if "logs" in got:
        print()
        report_logs(got["logs"], a.log_lines)


if __name__ == "__main__":
    asyncio.run(main())
