"""Several ranks in a pod, through real processes (issue 43): a TrainJob of two nodes with
`spec.trainer.numProcPerNode: 2` (Trainer v2.3: the torch plugin's EnforceMLPolicy sets it as
PET_NPROC_PER_NODE, so torchrun starts two processes in each pod) trains world 4 on the CPU, and
the cockpit shows four ranks: log prefixes that are the lines' own `rank=`, a pod row per pod
naming its two ranks with its step, no restart before a real one (the loss chart used to mark
one at every step: two ranks' lines of one pod read as one rank going back a step), and a pod
killed is its two ranks gone and one restart counted."""

from __future__ import annotations

import re

from backend.lesson.jobs import apply_runtime_and_volume, fresh_name, lesson_trainjob
from tests.tui.conftest import connected, make_app, wait_until

STEPS = 24
KILL_AT = 8


async def test_a_job_of_two_ranks_per_pod_shows_four_ranks_and_one_restart_per_kill(home):
    app = make_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await connected(screen)
        cluster = screen.session.cluster
        await apply_runtime_and_volume(cluster)
        name = fresh_name("ranks")
        job = lesson_trainjob(name, 2, STEPS, ckpt_every=4, step_delay=0.1)
        job.spec.trainer.num_proc_per_node = 2
        await cluster.apply(job)
        await wait_until(screen, lambda: screen.following.followed == name, "the cockpit to follow the job")
        buffer = screen.log_view.buffer
        table = screen.pods_table
        await wait_until(screen, lambda: any(step >= KILL_AT for step, _ in table.steps.values())
                         and len(table.steps) == 2, f"step {KILL_AT}")
        assert screen.loss_chart.restarts.get(name, set()) == set()  # two ranks a pod are no restart
        victim = next(p.name for p in table.pods.values() if list(p.ranks) == [2, 3])
        await screen.pod_actions.kill(victim).wait()
        assert any(f"killed {victim} (ranks 2-3)" in n.message for n in app._notifications)

        def done() -> bool:
            summary = screen.following.jobs.get(name)
            steps = screen.pods_table.steps
            live = [p.name for p in table.pods.values() if p.restart_attempt == 1]
            return summary is not None and summary.phase.finished and len(live) == 2 \
                and all(steps.get(pod, (0,))[0] == STEPS for pod in live)

        await wait_until(screen, done, "the job to finish with both pods at the last step", timeout=240)
        assert screen.following.jobs[name].phase.value == "Complete"
        assert sorted(buffer.ranks) == [0, 1, 2, 3]
        for shown in buffer:
            said = re.search(r"(?:^| )rank=(\d+)", shown.partition(" | ")[2])
            if " | " in shown and said:
                assert shown.startswith(f"r{said.group(1)} | "), shown
        await pilot.pause()
        rank, step = (table.shown_columns.index(key) for key in ("rank", "step"))
        rows = [(table.get_row_at(i)[rank].plain, table.get_row_at(i)[step].plain) for i in range(table.row_count)]
        assert sorted(rows[:4]) == [(str(r), str(STEPS)) for r in range(4)]  # the new group on top, a row per rank
        assert len(screen.loss_chart.restarts[name]) == 1  # one marker: where the new group resumed
        [restart] = screen.timeline.model.restarts()
        assert "(ranks 2-3)" in restart.moments[0].what
        assert screen.timeline.model.goodput_report(screen.clock()).restarts == 1
