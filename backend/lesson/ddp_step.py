"""Step 3: the DDP training function in two local processes, launched by torchrun.

The run saves everything the workers print in the workspace (runs/step-3/ddp.log); the verify
reads that file, never the run's own opinion of how it went.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from backend.lesson.context import Handler, StepContext, line
from backend.lesson.evidence import same_loss_every_step
from backend.models import Evidence
from training.launch import ddp_command, with_python
from training.options import option_args

LOG_NAME = "ddp.log"
WORKERS = 2
STEPS = 40
COMMAND = ddp_command("--standalone", "--nproc-per-node", str(WORKERS), args=option_args({"steps": STEPS}))


def log_path(ctx: StepContext) -> Path:
    return ctx.run_dir / LOG_NAME


async def run_ddp(ctx: StepContext):
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    log = log_path(ctx)
    partial = log.with_name(f".{LOG_NAME}.partial")
    yield line("$ " + " ".join(COMMAND))
    # torchrun of the same interpreter as the cockpit's venv.
    proc = await asyncio.create_subprocess_exec(
        *with_python(COMMAND, sys.executable),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"),
        start_new_session=True,  # its own process group, so stopping the step stops both workers
    )
    try:
        with open(partial, "w", encoding="utf-8") as out:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                text = raw.decode(errors="replace").rstrip("\n")
                out.write(text + "\n")
                out.flush()
                yield line(text)
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
        if partial.exists():
            os.replace(partial, log)
    yield line(f"torchrun exited with code {code}; output saved to {log}")


async def verify_ddp(ctx: StepContext) -> Evidence:
    log = log_path(ctx)
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ctx.evidence(False, f"no run yet: {log} does not exist (kfcockpit lesson run 3)")
    return same_loss_every_step(text.splitlines(), str(log))


HANDLERS = {"3": Handler(verify=verify_ddp, run=run_ddp)}
