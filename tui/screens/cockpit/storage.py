"""Volumes, checkpoints and snapshots: what the checkpoints panel shows and the loss chart's
finished runs, read when asked (a tab opened, r, a job finished) and, while a job steps, at most
every few seconds; snapshots taken and compared.

On kube every read starts a reader pod, so nothing here runs in a loop: a stepping job only arms
one timer, and only while the checkpoints panel is on screen.
"""

from __future__ import annotations

import time

from tui.screens.cockpit.part import Part

CHECKPOINT_REFRESH_SECONDS = 3.0  # at most this often while a job writes checkpoints


class Storage(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self._timer = None

    def refresh(self):
        return self.run(self._refresh(), group="storage", exclusive=True)

    async def _refresh(self) -> None:
        screen = self.screen
        cluster = screen.session.cluster
        if cluster is None:
            return
        volumes = await self.call("list volumes", cluster.volumes())
        if volumes is not None:
            job = screen.followed_job()[1]
            from backend.lesson.jobs import VOLUME

            preferred = set(job.volumes) if job is not None else set()
            volumes.sort(key=lambda v: (v.name not in preferred, v.name))
            # the followed job's volume; with none followed, the lesson's own (not a pipeline
            # run's, named by its uuid, which sorts first)
            shown = job.volumes[0] if job is not None and job.volumes else VOLUME
            screen.ckpt_panel.show_volumes(volumes, shown)
            if screen.ckpt_panel.volume is not None:
                await self._load_volume(screen.ckpt_panel.volume)
        snapshots = await self.call("list snapshots", cluster.snapshots())
        if snapshots is not None:
            screen.ckpt_panel.show_snapshots(snapshots)
        self.changed("storage")

    def load_volume(self, volume: str):
        return self.run(self._load_volume_now(volume), group="volume", exclusive=True)

    async def _load_volume_now(self, volume: str) -> None:
        await self._load_volume(volume)
        self.changed("storage")

    async def _load_volume(self, volume: str) -> None:
        screen = self.screen
        cluster = screen.session.cluster
        checkpoints = await self.call(f"read checkpoints on {volume}", cluster.checkpoints(volume))
        if checkpoints is not None:
            screen.ckpt_panel.show_checkpoints(volume, checkpoints)
        metrics = await self.call(f"read metrics on {volume}", cluster.read_metrics(volume=volume))
        if metrics:
            screen.loss_chart.set_finished_runs(metrics)

    def checkpoints_changed_soon(self) -> None:
        """A job stepped; its checkpoints may have changed. Read them when the tab is open, and
        not more often than every few seconds (on kube, a read starts a pod)."""
        if self._timer is not None or not self.screen.panels.is_shown("checkpoints"):
            return

        def due() -> None:
            self._timer = None
            volume = self.screen.ckpt_panel.volume
            if volume is not None:
                self.load_volume(volume)

        self._timer = self.screen.set_timer(CHECKPOINT_REFRESH_SECONDS, due)

    # ------------------------------------------------------------------ snapshots: take, compare

    def ask_snapshot(self) -> None:
        """Snapshot the volume shown (else the followed job's first), under a name the learner
        confirms (s)."""
        screen = self.screen
        volume = screen.ckpt_panel.volume
        job = screen.followed_job()[1]
        if volume is None and job is not None and job.volumes:
            volume = job.volumes[0]
        if volume is None:
            self.notify("no volume yet: a training step creates one", severity="warning")
            return
        from tui.screens.prompt import PromptScreen

        default = f"{volume}-{time.strftime('%H%M%S', time.localtime(screen.clock()))}"
        screen.app.push_screen(PromptScreen(f"Snapshot volume {volume} as", default[:63]),
                               lambda name: self.take_snapshot(volume, name) if name else None)

    def take_snapshot(self, volume: str, name: str):
        return self.run(self._take_snapshot(volume, name), group="snapshot")

    async def _take_snapshot(self, volume: str, name: str) -> None:
        cluster = self.screen.session.cluster
        snap = await self.call(f"snapshot {volume}", cluster.snapshot(volume, name))
        if snap is not None:
            self.notify(f"{snap.name}: {snap.files} files of {volume}", title="snapshot taken")
            self.refresh()

    def ask_compare(self) -> None:
        """The two marked snapshots (else the newest two) side by side (c)."""
        pair = self.screen.ckpt_panel.compare_pair()
        if pair is None:
            self.notify("compare needs two snapshots: take them with s", severity="warning")
            self.screen.panels.show("checkpoints")
            return
        self.compare(*pair)

    def compare(self, a: str, b: str):
        return self.run(self._compare(a, b), group="compare", exclusive=True)

    async def _compare(self, a: str, b: str) -> None:
        from tui.screens.compare import CompareScreen

        cluster = self.screen.session.cluster
        snaps = []
        for name in (a, b):
            snap = self.screen.ckpt_panel.snapshots.get(name)
            if snap is None:
                self.notify(f"snapshot {name} is gone", severity="warning")
                return
            if not snap.metrics:
                metrics = await self.call(f"read metrics of {name}", cluster.read_metrics(snapshot=name))
                if metrics:
                    snap = snap.model_copy(update={"metrics": metrics})
            snaps.append(snap)
        await self.screen.app.push_screen(CompareScreen(*snaps))
