"""The Kubeflow Trainer side of the comparison: the loop launched by torchrun, its group restarted.

Until the embedded cluster runs TrainJobs, this side is measured the way the Trainer runs a job,
by hand: torchrun starts the workers of the group (as in each Trainer pod); when a worker is
killed, torchrun fails the group, and the group is launched again with the same arguments (what
JobSet's failure policy does for a TrainJob), which resumes from the newest checkpoint on the
volume. Later the same figures come from the Cluster protocol: apply the TrainJob, kill_pod,
wait_job.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from backend.compare.figures import ComparisonPlan, Measurement
from backend.compare.observer import ObservationError, RunObserver
from backend.raytrain.lines import LineProcess, option_args, python_env
from training import metrics as metrics_file

TITLE = "Trainer (TrainJob)"
SHORT = {"launch_model": "declared TrainJob", "recovery_model": "JobSet restarts group",
         "owner": "platform team (YAML)", "measured_with": "torchrun + relaunch"}
DETAIL = {
    "launch_detail": "a TrainJob resource is declared (kubectl apply); the Trainer controller "
                     "creates the worker pods from the TrainingRuntime, with torchrun in each",
    "recovery_detail": "a dead pod fails the group; the JobSet failure policy recreates every pod "
                       "(up to maxRestarts) and the loop resumes from the newest checkpoint on the volume",
    "owner_detail": "the platform team, who own the TrainingRuntime and review the TrainJob YAML "
                    "like any other cluster resource",
}
MAX_GROUP_STARTS = 3  # the kill plus a margin; the runtime's maxRestarts plays this role


def torchrun_argv(plan: ComparisonPlan, ckpt_dir: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={plan.workers}", "-m", "training.ddp",
            *option_args(plan.train_options()), "--ckpt-dir", str(ckpt_dir)]


async def measure_trainer(plan: ComparisonPlan, workdir: Path) -> Measurement:
    ckpt_dir = workdir / "trainer"
    argv = torchrun_argv(plan, ckpt_dir)
    launched = time.time()
    observer = RunObserver(plan, launched)
    for _ in range(MAX_GROUP_STARTS):
        group = await LineProcess.start(argv, python_env(), cwd=workdir, log_dir=workdir,
                                        name="trainer-torchrun")
        try:
            async for line in group.lines():
                pid = observer.see(line)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    observer.killed(time.time())
        except BaseException:  # an error or Ctrl-C while measuring: torchrun stops its workers
            await group.stop()
            raise
        if await group.wait() == 0:
            break
    else:
        raise ObservationError(f"the torchrun group did not finish in {MAX_GROUP_STARTS} launches "
                               f"(see {workdir / 'trainer-torchrun.stderr'})")
    figures = observer.figures(time.time(), metrics_file.read(ckpt_dir))
    return Measurement(side="trainer", title=TITLE, **SHORT, **DETAIL, workers=plan.workers,
                       steps=plan.steps, run_dir=str(ckpt_dir), log_file=str(group.stdout_log),
                       **figures)
