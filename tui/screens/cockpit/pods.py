"""What the learner does to a pod: kill it (the fault the lesson is about: only a running pod the
learner can see, asked first unless the preferences say not to), freeze and thaw it (a hang to
practise on, where the cluster can), restart a whole group (a hung one: every running pod of its
newest attempt deleted, always asked first), read its lines alone, or go to a rank of a group too
large for a row per pod."""

from __future__ import annotations

from tui.screens.cockpit.part import Part


class PodActions(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self.frozen: set[str] = set()  # the pods this cockpit froze: F on one thaws it

    def ask_kill(self) -> None:
        screen = self.screen
        panels, table = screen.panels, screen.pods_table
        if not panels.is_shown("pods"):  # never kill a pod the learner cannot see
            panels.show("pods")
            self.notify("pick the pod to kill, then ctrl+k again", title="pods")
            return
        pod = table.selected_pod
        if pod is None or table.is_history(pod):
            self.notify("no running pod selected: pick one in the pods panel", severity="warning")
            return
        if not screen.app.config.confirm_kill:  # loaded before the panels: kill needs them
            self.kill(pod)
            return
        from tui.screens.confirm import ConfirmScreen

        screen.app.push_screen(
            ConfirmScreen(f"Kill pod {pod}?", f"Its {table.ranks_of(pod)} go with it; the group restarts with "
                          "restart attempt + 1 and resumes from the newest valid checkpoint.", yes="Kill"),
            lambda yes: self.kill(pod) if yes else None)

    def kill(self, pod: str):
        return self.run(self._kill(pod), group="kill")

    async def _kill(self, pod: str) -> None:
        cluster = self.screen.session.cluster
        if await self.call(f"kill {pod}", cluster.kill_pod(pod), ok=True) is not None:
            self.notify(f"killed {pod} ({self.screen.pods_table.ranks_of(pod)}): watch the group restart and "
                        "resume", title="fault injected")

    def toggle_freeze(self) -> None:
        screen = self.screen
        cluster = screen.session.cluster
        if cluster is not None and not cluster.capabilities.freezes_pods:
            self.notify(f"{cluster.capabilities.description} cannot freeze a pod; the hang detector works "
                        "the same on a real hang", severity="warning")
            return
        pod = screen.pods_table.selected_pod
        if pod is None or screen.pods_table.is_history(pod) or not screen.panels.is_shown("pods"):
            screen.panels.show("pods")
            self.notify("no running pod selected: pick one in the pods panel, then F", severity="warning")
            return
        frozen = pod not in self.frozen
        self.run(self._freeze(pod, frozen), group="freeze")

    async def _freeze(self, pod: str, frozen: bool) -> None:
        cluster = self.screen.session.cluster
        verb = "freeze" if frozen else "thaw"
        if await self.call(f"{verb} {pod}", cluster.freeze_pod(pod, frozen), ok=True) is None:
            return
        (self.frozen.add if frozen else self.frozen.discard)(pod)
        self.changed("frozen")
        self.notify(f"froze {pod}: its rank stops, the others wait; the hang is called once the silence "
                    "outlasts the rule (F again thaws it, R restarts the group)" if frozen
                    else f"thawed {pod}: its group goes on", title="fault injected" if frozen else "pods")

    def ask_restart_group(self) -> None:
        screen = self.screen
        table = screen.pods_table
        pods = sorted(name for name, pod in table.pods.items()
                      if pod.restart_attempt == table.latest_attempt and not table.is_history(name)
                      and not pod.phase.finished)
        if not pods:
            self.notify("no running group to restart: follow a running job first", severity="warning")
            return
        from tui.screens.confirm import ConfirmScreen

        hang = screen.timeline.model.hang(screen.clock())
        why = f"{hang.one_line()}\n\n" if hang is not None else ""
        screen.app.push_screen(
            ConfirmScreen(f"Restart {table.job}'s group ({len(pods)} pods)?",
                          f"{why}Its pods are deleted; the failure policy makes a new group, which "
                          "resumes from the newest valid checkpoint and uses one restart of the budget.",
                          yes="Restart"),
            lambda yes: self.run(self._restart_group(pods), group="kill") if yes else None)

    async def _restart_group(self, pods: list[str]) -> None:
        import asyncio

        from backend.errors import NotFound

        cluster = self.screen.session.cluster

        async def delete(pod: str) -> None:
            try:
                await cluster.kill_pod(pod)
            except NotFound:
                pass  # the first deletion's restart took it already

        if await self.call("restart the group", asyncio.gather(*(delete(pod) for pod in pods)), ok=True):
            self.notify(f"deleted {len(pods)} pods: watch the group come back", title="group restarted")
            self.changed("restarted")

    def show_logs(self, pod: str | None) -> None:
        """The logs panel, with only `pod`'s lines when one is given."""
        if pod is not None:
            self.screen.log_view.show_pod(pod)
        self.screen.panels.show("logs")

    def ask_rank(self) -> None:
        """Which rank to go to (g): its row stays in the pods panel, and its logs are read."""
        from tui.screens.prompt import PromptScreen

        def chosen(answer: str | None) -> None:
            if answer is not None:
                self.go_to_rank(answer)

        self.screen.app.push_screen(PromptScreen("Go to rank", hint="a rank number · escape cancels"), chosen)

    def go_to_rank(self, answer: str) -> None:
        screen = self.screen
        if not answer.isdigit():
            self.notify(f"not a rank: {answer!r}; type its number", severity="warning")
            return
        if screen.pods_table.go_to(int(answer)) is None:
            self.notify(f"no pod of rank {answer} in the followed job", severity="warning")
            return
        screen.panels.show("pods")
