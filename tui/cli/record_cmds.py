"""`kfcockpit record` and `kfcockpit replay`: a job as the cockpit watches it, into one file, and
the cockpit on that file with no cluster at all (backend/recording/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.cli.common import EXIT_USAGE, add_command, cluster_from, fail

RECORD_DESCRIPTION = """\
Record what the cockpit watches of a job (the job, its pods, the nodes, the Events, its merged
logs, its pods' usage, its volume's checkpoints and metrics, with their times) until it ends or
ctrl+c, into one gzip'd file that `kfcockpit replay` plays back with no cluster.

Bounded: at most --max-lines log lines of each rank and 2000 Events are kept; what went over is
counted and printed at the end.

  kfcockpit record lesson-ddp -o kill-and-resume.kfrec.gz
  kfcockpit record -o newest.kfrec.gz          the newest unfinished job"""

REPLAY_DESCRIPTION = """\
Open the cockpit on a recording (kfcockpit record), with no cluster: every panel works as live;
what would change a cluster (kill, fail a node, freeze, run a step) says it is a replay.
Keys: P pause/play, [ and ] 10 s back/forward, < and > slower/faster.

  kfcockpit replay manifests/recordings/kill-and-resume.kfrec.gz --speed 4
  kfcockpit serve --replay FILE                 the same, served to a room"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "record", help="record a job as the cockpit watches it, for replay",
                    description=RECORD_DESCRIPTION)
    p.add_argument("job", nargs="?", help="a TrainJob or RayJob name (default: the newest unfinished job)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the recording to write (.kfrec.gz)")
    p.add_argument("--max-lines", type=int, default=None, metavar="N",
                   help="log lines kept of each rank (default: 20000)")
    p.set_defaults(handler=cmd_record)

    p = add_command(sub, "replay", help="open the cockpit on a recording, with no cluster",
                    description=REPLAY_DESCRIPTION)
    replay_options(p)
    p.set_defaults(handler=cmd_replay)


def replay_options(p: argparse.ArgumentParser) -> None:
    from tui.cli.app_cmds import cockpit_options

    p.add_argument("file", help="a recording made by kfcockpit record")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X", help="play X times as fast (default 1)")
    p.add_argument("--from", dest="start", type=_seconds, default=0.0, metavar="T",
                   help="start T seconds into the recording (default 0)")
    p.add_argument("--loop", action="store_true", help="start again at the end")
    cockpit_options(p, suppress=True, follow=False)


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r}: a speed from above 0 to 100")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds from the start, 0 or more")
    return value


async def cmd_record(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from backend.recording.recorder import LINES_PER_RANK, Recorder, newest_job

    if args.max_lines is not None and args.max_lines < 1:
        return fail(f"--max-lines {args.max_lines}: keep at least 1 line of each rank", EXIT_USAGE, exit_now=False)
    cluster = cluster_from(args)
    try:
        job = args.job or await newest_job(cluster)
        if job is None:
            return fail("no job to record: name one, or start one first", EXIT_USAGE, exit_now=False)
        await cluster.get_job(job)  # an unknown job: one line (NotFound), before a word of recording
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        recorder = Recorder(cluster, job, Path(args.output), lines_per_rank=args.max_lines or LINES_PER_RANK)
        print(f"recording {job} until it ends (ctrl+c stops) into {args.output}", file=sys.stderr)
        recorded = await recorder.run(stop)
    finally:
        await cluster.close()
    print(recorded.one_line())
    return 0


def load_replay(args: argparse.Namespace):
    """The recording and a ReplayCluster on it, or BadRecording (one line, exit 2), before any UI."""
    from backend.recording.format import load
    from backend.recording.playhead import Playhead
    from backend.recording.replay import ReplayCluster

    recording = load(Path(args.file))
    if args.start > recording.ended:
        from backend.recording.format import BadRecording

        raise BadRecording(f"--from {args.start:g}: the recording is {recording.ended:.0f}s long")
    return ReplayCluster(recording, Playhead(recording.ended, args.speed, args.start, args.loop))


def cmd_replay(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tui.app import run_cockpit
    from tui.cli.app_cmds import launch_from_args

    cluster = load_replay(args)
    launch = replace(launch_from_args(args), platform="replay", follow=cluster.recording.job,
                     connect=lambda settings: cluster, clock=cluster.now)
    return run_cockpit(launch)
