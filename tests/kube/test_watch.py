"""Pod watches survive everything a real API server does to a watch: 410 Gone (as an ERROR
event and as the HTTP status), a dropped stream, a silent stream, and they use bookmarks.
Every transition arrives once, in order: each step checks the exact next events, so a missed
or a repeated transition shows up as a wrong next event."""

from __future__ import annotations

from tests.kube.conftest import take, wait_for
from tests.kube.objects import PODS, set_phase, worker_pod

JOB = "lesson-ddp"
P0, P1 = f"{JOB}-node-0-0-a0", f"{JOB}-node-0-1-a0"
P0_NEW, P1_NEW = f"{JOB}-node-0-0-a1", f"{JOB}-node-0-1-a1"


def pod_lists(api):
    return [r for r in api.requests_for("GET", "/api/v1/namespaces/default/pods", watch=False)
            if r.path == "/api/v1/namespaces/default/pods"]


def seen(events):
    return [(e.type.value, e.pod.name, e.pod.phase.value) for e in events]


async def test_transitions_arrive_once_in_order_across_gone_drop_and_silence(api, cluster):
    api.put(PODS, worker_pod(JOB, 0))
    api.put(PODS, worker_pod(JOB, 1))
    api.put(PODS, worker_pod("other-job", 0))  # not selected
    events = cluster.watch_pods(JOB)
    try:
        first = await take(events, 2)
        assert seen(first) == [("ADDED", P0, "Pending"), ("ADDED", P1, "Pending")]
        assert [(e.pod.rank, e.pod.restart_attempt, e.pod.job) for e in first] == [(0, 0, JOB), (1, 0, JOB)]

        # 410 as an ERROR event: both pods start while the client is away and history is
        # compacted; the re-list's difference brings both transitions.
        await wait_for(lambda: api.wait_watching(PODS))

        def both_start():
            api.update(PODS, P0, set_phase("Running"))
            api.update(PODS, P1, set_phase("Running"))
            api.compact()

        api.drop_streams(then=both_start)
        assert seen(await take(events, 2)) == [("MODIFIED", P0, "Running"), ("MODIFIED", P1, "Running")]

        # 410 as the HTTP status, while JobSet replaces worker 0 (new name, restart attempt 1).
        await wait_for(lambda: api.wait_watching(PODS))
        api.gone_as_http_status = True

        def replace_worker_0():
            api.remove(PODS, P0)
            api.put(PODS, worker_pod(JOB, 0, attempt=1))
            api.compact()

        api.drop_streams(then=replace_worker_0)
        replaced = await take(events, 2)
        assert seen(replaced) == [("ADDED", P0_NEW, "Pending"), ("DELETED", P0, "Running")]
        assert replaced[0].pod.restart_attempt == 1 and replaced[0].pod.rank == 0
        assert replaced[1].pod.reason == "Deleted"

        # A dropped stream (history kept): the client resumes from its resourceVersion.
        await wait_for(lambda: api.wait_watching(PODS))
        api.drop_streams()
        api.update(PODS, P1, set_phase("Failed", exit_code=137))
        failed = await take(events, 1)
        assert seen(failed) == [("MODIFIED", P1, "Failed")]
        assert failed[0].pod.exit_code == 137

        # A silent stream: nothing arrives on it; after the read timeout the client reconnects
        # from its resourceVersion and gets the change.
        await wait_for(lambda: api.wait_watching(PODS))
        api.silence_watches()
        api.update(PODS, P0_NEW, set_phase("Running"))
        assert seen(await take(events, 1)) == [("MODIFIED", P0_NEW, "Running")]

        # The last change proves nothing was repeated in between.
        await wait_for(lambda: api.wait_watching(PODS))
        api.update(PODS, P0_NEW, set_phase("Succeeded"))
        assert seen(await take(events, 1)) == [("MODIFIED", P0_NEW, "Succeeded")]
    finally:
        await events.aclose()
    assert len(pod_lists(api)) == 3  # the first list, then one per 410


async def test_bookmarks_move_the_resume_point_without_a_relist(api, cluster):
    api.put(PODS, worker_pod(JOB, 0, phase="Running"))
    events = cluster.watch_pods(JOB)
    try:
        assert seen(await take(events, 1)) == [("ADDED", P0, "Running")]
        await wait_for(lambda: api.wait_watching(PODS))
        # Traffic the selector does not see moves the server's version on.
        api.put(PODS, worker_pod("other-job", 0))
        api.update(PODS, "other-job-node-0-0-a0", set_phase("Running"))
        api.bookmark()
        await wait_for(lambda: api.wait_bookmarks_sent(1))
        bookmarked = api.rv
        lists_before = len(pod_lists(api))

        # History before the bookmark is compacted away: only a client that took the bookmark's
        # version can resume without a re-list.
        api.drop_streams(then=lambda: api.compact_before(bookmarked))
        api.update(PODS, P0, set_phase("Succeeded"))
        assert seen(await take(events, 1)) == [("MODIFIED", P0, "Succeeded")]
    finally:
        await events.aclose()
    watches = api.requests_for("GET", "/namespaces/default/pods", watch=True)
    assert watches[-1].query["resourceVersion"] == str(bookmarked)
    assert watches[-1].query["allowWatchBookmarks"].lower() == "true"
    assert len(pod_lists(api)) == lists_before


async def test_a_pod_watch_reads_no_log_however_busy_the_pods_are(api, cluster):
    """One stream for all of a job's pods: what they print is the log stream's, which reads only
    the ranks its caller looks at (a watch that followed every pod's log for its step cost a
    thread and a connection per pod)."""
    api.put(PODS, worker_pod(JOB, 0, phase="Running"))
    events = cluster.watch_pods(JOB)
    try:
        assert seen(await take(events, 1)) == [("ADDED", P0, "Running")]
        api.append_log(P0, "event=start rank=0 world=2", "step=1 loss=0.912000 rank=0 world=2")
        api.update(PODS, P0, set_phase("Succeeded"))
        done = (await take(events, 1))[0]  # the next event is the pod's own change, no step update
        assert seen([done]) == [("MODIFIED", P0, "Succeeded")] and done.pod.last_step is None
        assert api.requests_for("GET", "/log") == []
    finally:
        await events.aclose()
