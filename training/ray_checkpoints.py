"""The training loop's checkpoints under Ray Train, inside each Ray worker: reports at the same
steps on every rank (`ray.train.report` is a barrier), rank 0's checkpoint in Ray's layout, and
the survivor saves written beside Ray's (training/ray_train.py's docstring tells the whole story).
Ray and torch are imported where used: the driver imports this module too."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from training import checkpoint_format as fmt

SURVIVOR_REASONS = ("peer_failure", "sigterm")


class RayCheckpoints:
    """The loop's Checkpoints protocol on Ray Train, and the loop's on_step hook that reports.

    `ray.train.report` is a barrier: every worker must call it equally often. So every worker
    reports from `report_step` at the same steps (every `report_every` steps, at a checkpoint
    step and at the last step), and at a checkpoint step rank 0 attaches the checkpoint that
    `save` (which the loop calls just before) prepared. The file inside the Ray checkpoint
    directory is in `checkpoint_format` (torch.save + sidecar), so the checkpoint browser reads it
    and a user opens it with torch.load.
    """

    def __init__(self, rank: int, world: int, report_every: int, staging: Path, run_dir: Path):
        self.rank, self.world = rank, world
        self.report_every = report_every
        self.staging = staging
        self.run_dir = run_dir
        self._pending: dict | None = None
        self._checkpoint_due = False
        self._losses: list[float] = []  # since the last report
        self._reporting = None  # the loop's Training while inside ray.train.report (a barrier)
        self._checksums = fmt.Checksums()  # of the files this worker verified: each read once

    def load_latest(self) -> dict | None:
        """Ray's latest reported checkpoint, or a newer survivor save. Rank 0 chooses (after the
        checksum) and the others load what it names: a survivor of the last group may still be
        committing a save while this group starts, and ranks must not resume from different steps."""
        import ray.train

        from training.checkpoint import load_state, newest_valid, rank0_choice

        checkpoint = ray.train.get_checkpoint()
        chosen = rank0_choice(self._newer_survivor_save(checkpoint) if self.rank == 0 else "")
        if chosen:
            return load_state(Path(chosen))
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as directory:
            found = newest_valid(Path(directory), self.rank, self._checksums)
            return load_state(found) if found else None

    def _newer_survivor_save(self, checkpoint) -> str:
        """The newest valid survivor save newer than Ray's `checkpoint` (a path), or ""."""
        from training.checkpoint import newest_valid

        match = fmt.NAME_RE.match(f"{Path(checkpoint.path).name}.pt") if checkpoint else None
        reported = int(match.group(1)) if match else -1
        for directory in reversed(_survivor_dirs(self.run_dir)):
            step = int(fmt.NAME_RE.match(f"{directory.name}.pt").group(1))
            if step <= reported:
                break
            found = newest_valid(directory, self.rank, self._checksums)
            if found is not None:
                return str(found)
        return ""

    def save_now(self, state: dict, reason: str) -> bool:
        """A survivor's save, straight into the run's directory (see the module's docstring).
        True if this call wrote it (not when the step is saved already, or being saved by the
        other thread: the loop's and Ray's shutdown call may both try, see save_in_report)."""
        from training.checkpoint import save_once

        directory = self.run_dir / fmt.file_name(int(state["step"])).removesuffix(".pt")
        directory.mkdir(parents=True, exist_ok=True)
        return save_once(directory, state, reason, self.rank)

    def save_in_report(self) -> bool:
        """Ray tears the group down while this worker waits in `ray.train.report`'s barrier,
        which a dead peer never reaches: the loop would never get to its own save. It stands at
        a step boundary there, and once the stop is requested (before this is called) it checks
        the request as soon as the report returns, before another step: the state of its newest
        step is complete and stays so. Save it from the calling thread (Ray's shutdown call).
        True if this call wrote it; False when the loop is not in a report, or saves it itself."""
        training = self._reporting
        return training is not None and self.save_now(training.state(), "sigterm")

    def save(self, state: dict) -> None:
        self._checkpoint_due = True  # every rank: all must report at this step
        self._pending = state if self.rank == 0 else None

    def report_step(self, training, loss: float) -> None:
        import ray.train

        from training.loop import emit

        self._losses.append(loss)
        step = training.steps_done
        if not (self._checkpoint_due or step % self.report_every == 0 or step == training.cfg.steps):
            return
        epoch, _ = training.plan.position(step - 1)
        reported = {"step": step, "epoch": epoch, "loss": loss, "rank": self.rank, "pid": os.getpid(),
                    "mean_loss": sum(self._losses) / len(self._losses)}
        name = ""
        if self._pending is None:
            self._reporting = training
            ray.train.report(reported)
        else:
            from training.checkpoint import write_files

            with tempfile.TemporaryDirectory(dir=self.staging) as directory:
                name = write_files(Path(directory), self._pending, "periodic", self.rank).name
                self._reporting = training
                ray.train.report(reported, checkpoint=ray.train.Checkpoint.from_directory(directory),
                                 checkpoint_dir_name=name.removesuffix(".pt"))
            for older in _survivor_dirs(self.run_dir):  # superseded: Ray prunes only its own
                if int(fmt.NAME_RE.match(f"{older.name}.pt").group(1)) < step:
                    shutil.rmtree(older, ignore_errors=True)
        self._reporting = None
        # No "loss=" key: the cockpit takes lines with step= and loss= for step lines.
        emit(event="reported", step=step, epoch=epoch, mean_loss=reported["mean_loss"],
             rank=self.rank, world=self.world, checkpoint=name)
        self._pending, self._checkpoint_due, self._losses = None, False, []


def _survivor_dirs(run_dir: Path) -> list[Path]:
    """Checkpoint directories of the run written by survivors, oldest step first."""
    found = []
    for directory in run_dir.glob("ckpt-step-*"):
        data = directory / f"{directory.name}.pt"
        if not (directory.is_dir() and fmt.NAME_RE.match(data.name)):
            continue
        try:
            reason = fmt.read_meta(data).get("reason")
        except (fmt.InvalidCheckpoint, OSError):
            reason = None  # not committed (yet): a survivor's claim says whose it is
            if not fmt.claim_names(directory, int(fmt.NAME_RE.match(data.name).group(1))):
                continue
        if reason is None or reason in SURVIVOR_REASONS:
            found.append(directory)
    return sorted(found, key=lambda d: d.name)
