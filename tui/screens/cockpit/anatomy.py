"""`a`: the followed job's anatomy, read through the Cluster (`explain`, objects only) and shown
on a screen of its own (tui/screens/anatomy.py); a job that is no TrainJob, or is gone, is a
one-line notification."""

from __future__ import annotations

from tui.screens.cockpit.part import Part


class AnatomyView(Part):
    def show(self) -> None:
        job = self.job_to_show("no job followed yet: run step 5 or pick one with j, then a")
        if job is not None:
            self.run(self._show(job), group="anatomy", exclusive=True)

    async def _show(self, job: str) -> None:
        anatomy = await self.call(f"explain {job}", self.screen.session.cluster.explain(job))
        if anatomy is None:
            return
        from tui.screens.anatomy import AnatomyScreen

        lesson = self.screen.session.lesson
        if lesson is not None:
            lesson.saw_anatomy(anatomy)  # step 2's verify cites what was looked at
        await self.screen.app.push_screen(AnatomyScreen(anatomy))
        self.changed("anatomy")
