"""The cockpit itself: `kfcockpit` (no command) and `kfcockpit serve` (browser mode)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def register(sub: argparse._SubParsersAction) -> None:
    pass  # `serve` arrives with the TUI


def open_cockpit(args: argparse.Namespace) -> int:
    try:
        from tui.app import run_cockpit  # noqa: F401
    except ModuleNotFoundError:
        # Until the cockpit UI exists, show the real part that does: two DDP workers on torchrun.
        print("kfcockpit: the cockpit UI is not built yet; running the training core instead "
              "(2 workers, torchrun, 40 steps)", flush=True)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               "-m", "training.ddp", "--steps", "40", "--step-delay", "0.05"]
        return subprocess.call(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))
    from tui.app import run_cockpit

    return run_cockpit(args)
