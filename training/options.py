"""Command-line options both launchers share (torchrun's `ddp`, Ray's `ray_train`). No torch:
`--help` and bad arguments answer at once, before any heavy import.

Every error is one line on stderr and exit 2, not argparse's usage block.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from training.atomic import process_tag
from training.device import BACKENDS, DEVICES, PRECISIONS

EXIT_USAGE = 2

# Hidden width of the MLP per --model-size. "tiny" is the lesson's model (0.9 MB of state, the
# figures the lesson quotes); "1gb" is wide and shallow so its training state (parameters plus
# Adam's two moments, 3 x 4 bytes per parameter) is ~1.02 GB while a CPU step stays about a second.
MODEL_SIZES = {"tiny": 256, "1gb": 9216}
# Adam's learning rate per preset when --lr is not given. Adam moves every weight by about lr per
# step, and a 9216-wide layer sums 36x more of them per output than the tiny one: the tiny model's
# 0.005 sends the wide one's loss from 0.78 to 1610 by step 2, and 1e-4 still to 7 (measured).
# At 1e-5 it goes 0.78 -> 0.20 over the first 11 steps.
PRESET_LR = {"tiny": 0.005, "1gb": 1e-5}


@dataclass
class TrainConfig:
    """What decides the numbers of a run; the same for either launcher."""

    steps: int = 40
    batch_size: int = 32  # per worker
    lr: float = 0.005
    seed: int = 0
    features: int = 32
    model_size: str = "tiny"
    hidden: int = MODEL_SIZES["tiny"]
    samples: int = 8192
    ckpt_every: int = 5
    keep: int = 3
    step_delay: float = 0.0  # seconds slept after each step, to pace demos; 0 for real work
    precision: str = "fp32"  # "bf16": forward pass under torch.autocast to bfloat16 (weights stay fp32)


# TrainConfig fields offered as options, with their help, in --help order.
_OPTION_HELP = {
    "steps": "optimizer steps in total",
    "ckpt_every": "checkpoint every N steps",
    "keep": "checkpoints kept",
    "batch_size": "samples per worker per step",
    "lr": "Adam learning rate (overrides --model-size)",
    "seed": "seed of data and initial weights",
    "hidden": "hidden width of the MLP (overrides --model-size)",
    "samples": "size of the synthetic data set",
    "step_delay": "seconds to pause after each step, to pace a demo",
}


class OneLineParser(argparse.ArgumentParser):
    def __init__(self, prog: str, doc: str | None):
        super().__init__(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)

    def error(self, message: str) -> None:  # one clear line, not usage + message
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_USAGE)


def add_train_options(parser: argparse.ArgumentParser) -> None:
    defaults = TrainConfig()
    parser.add_argument("--model-size", choices=sorted(MODEL_SIZES), default=defaults.model_size,
                        help=f"model preset: tiny (the lesson's) or 1gb (~1 GB of training state) "
                             f"(default {defaults.model_size})")
    for field in fields(TrainConfig):
        if field.name in _OPTION_HELP:
            default = getattr(defaults, field.name)
            preset = field.name in ("hidden", "lr")
            shown = "the preset's" if preset else default
            parser.add_argument("--" + field.name.replace("_", "-"), type=type(default),
                                default=None if preset else default,
                                help=f"{_OPTION_HELP[field.name]} (default {shown})")
    parser.add_argument("--precision", choices=PRECISIONS, default=defaults.precision,
                        help=f"fp32, or bf16 autocast of the forward pass (default {defaults.precision})")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per worker (default 1)")
    parser.add_argument("--collective-timeout", type=duration, default=DEFAULT_COLLECTIVE_TIMEOUT, metavar="DURATION",
                        help="how long a collective waits for a peer before the step fails and the platform "
                             "restarts the group: seconds, or 90s, 5m, 1h (default 5m; torch's own is 30m, "
                             "so a frozen rank would hold the group half an hour)")
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where each worker computes: cuda (the GPU of its LOCAL_RANK), cpu, or auto "
                             "(cuda when a GPU is visible) (default auto)")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="process group: nccl, gloo (carries CUDA tensors too, and lets ranks share "
                             "a GPU), or auto (nccl on cuda, gloo on cpu) (default auto)")


DEFAULT_COLLECTIVE_TIMEOUT = 300.0
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds of `90`, `90s`, `5m` or `1h` (argparse's type: a bad one is one line, exit 2)."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (seconds, or 90s, 5m, 1h)") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than 0")
    return seconds


def option_args(options: dict[str, object]) -> list[str]:
    """{"ckpt_every": 5} -> ["--ckpt-every", "5"]: the loop's options (or any other of a launcher's)
    as words of a command line, the inverse of `add_train_options`."""
    args: list[str] = []
    for key, value in options.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    return args


def check_train_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                        also_at_least_one: tuple[str, ...] = ()) -> None:
    if args.hidden is None:
        args.hidden = MODEL_SIZES[args.model_size]
    if args.lr is None:
        args.lr = PRESET_LR[args.model_size]
    for name in ("steps", "ckpt_every", "keep", "batch_size", "hidden", "samples", "threads",
                 *also_at_least_one):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.lr <= 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if args.step_delay < 0:
        parser.error(f"--step-delay must not be negative, got {args.step_delay}")


def require_writable(parser: argparse.ArgumentParser, directory: Path, option: str) -> None:
    """Create `directory` if needed and prove a file can be written there, or fail in one line."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{process_tag()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        parser.error(f"cannot write to {option} {directory}: {exc.strerror or exc}")


def train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(model_size=args.model_size, precision=args.precision,
                       **{name: getattr(args, name) for name in _OPTION_HELP})


def option_value(args: list[str], option: str) -> str | None:
    """The value of `--option V` or `--option=V` (the last one given, as argparse takes it)."""
    value = None
    for i, word in enumerate(args):
        if word == option and i + 1 < len(args):
            value = args[i + 1]
        elif word.startswith(option + "="):
            value = word.split("=", 1)[1]
    return value
