"""`kfcockpit lesson …`: the lesson headless — list, run, verify, status, notes, reset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from backend.errors import one_line
from tui.cli.common import EXIT_FAILED, add_command, add_output_option, print_json, print_table

EVIDENCE_WIDTH = 110  # a table's evidence column, so a row stays one line

DESCRIPTION = """\
The lesson's 15 steps (setup-1..setup-3, 1..12) on the current platform, without the cockpit.

  kfcockpit lesson list                  the steps and where you are
  kfcockpit lesson run 3                 do step 3, then check its "done when"
  kfcockpit lesson run 2 --note FILE     reading steps are done by a note you write
  kfcockpit lesson run --all             every runnable step in order, with a table of evidence
  kfcockpit lesson verify [STEP]         check again from what is on disk and on the cluster
  kfcockpit lesson status [-o json]      progress and the last evidence of every step
  kfcockpit lesson note STEP [--note F]  show a step's note, or save one from a file ('-': stdin)
  kfcockpit lesson reset [STEP]          forget progress of one step or all (notes are kept)

Exit codes: 0 done, 1 ran but the "done when" is not met, 2 bad input (unknown step, out of order)."""


def register(sub: argparse._SubParsersAction) -> None:
    lesson = add_command(sub, "lesson", help="the lesson's steps headless: list, run, verify, status",
                         description=DESCRIPTION)
    actions = lesson.add_subparsers(title="lesson commands", metavar="ACTION",
                                    parser_class=type(lesson))
    lesson.set_defaults(handler=lambda args: _usage(lesson))

    p = add_command(actions, "list", help="the steps, their kind and status")
    p.set_defaults(handler=cmd_list)

    p = add_command(actions, "run", help="run a step's action, then verify it (or --all)")
    p.add_argument("step", nargs="?", help="step id: setup-1..setup-3, 1..12")
    p.add_argument("--all", action="store_true", help="every runnable step in order; exit 0 only if all pass")
    p.add_argument("--note", type=Path, metavar="FILE", help="save this file as the step's note first ('-': stdin)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="do not stream the steps' output lines (with --all they go to stderr)")
    p.set_defaults(handler=cmd_run)

    p = add_command(actions, "verify", help="check a step's \"done when\" now (all steps without STEP)")
    p.add_argument("step", nargs="?")
    p.set_defaults(handler=cmd_verify)

    p = add_command(actions, "status", help="progress and last evidence of every step")
    add_output_option(p)
    p.set_defaults(handler=cmd_status)

    p = add_command(actions, "note", help="show a step's note, or save one with --note FILE")
    p.add_argument("step")
    p.add_argument("--note", type=Path, metavar="FILE", help="the note to save ('-': stdin)")
    p.set_defaults(handler=cmd_note)

    p = add_command(actions, "reset", help="forget the progress of one step, or of all")
    p.add_argument("step", nargs="?")
    p.set_defaults(handler=cmd_reset)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


# ---------------------------------------------------------------- helpers


def _connect(args: argparse.Namespace):
    """(the platform's Cluster, None) or, when there is none to talk to, (None, why): the steps
    that need it say so, the others (step 3, the notes) still run."""
    from backend.cluster import Unavailable
    from tui.cli.common import cluster_from

    try:
        return cluster_from(args), None
    except Unavailable as exc:  # e.g. no kubeconfig, API server down
        return None, str(exc)


def _lesson(args: argparse.Namespace, cluster=None, unreachable: str | None = None):
    from backend.lesson.engine import Lesson
    from tui.cli.common import settings_from

    return Lesson(cluster, settings_from(args), unreachable)


def _refuse_if_unreachable(lesson, step) -> None:
    """One step asked for, which needs a platform that does not answer: one line, exit 2."""
    from backend.cluster import Unavailable

    if lesson.unreachable and lesson.unavailable(step.id):
        raise Unavailable(f"{step.label} needs the cluster: {lesson.unreachable}")


class _Session:
    """A Lesson with a connected Cluster, closed on the way out."""

    def __init__(self, args: argparse.Namespace):
        self.args = args

    async def __aenter__(self):
        self.cluster, unreachable = _connect(self.args)
        return _lesson(self.args, self.cluster, unreachable)

    async def __aexit__(self, *exc) -> None:
        if self.cluster is not None:
            await self.cluster.close()


def _read_note(path: Path) -> str:
    from backend.lesson.engine import LessonError

    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise LessonError(f"cannot read the note file {path}: {reason}") from None


def _print_evidence(step, evidence) -> None:
    mark = "PASS" if evidence.ok else "NOT DONE"
    print(f"{mark}  {step.label}: {evidence.seen}")
    print(f"      checked: {evidence.checked}")
    for detail in evidence.details:
        print(f"      {detail}")


# ---------------------------------------------------------------- commands


def cmd_list(args: argparse.Namespace) -> int:
    lesson = _lesson(args)
    states = lesson.states()
    print_table(["STEP", "KIND", "STATUS", "NEEDS", "TITLE"],
                [[s.id, s.kind, states[s.id].status.value, ",".join(s.needs) or "-", s.title]
                 for s in lesson.steps])
    return 0


async def cmd_run(args: argparse.Namespace) -> int:
    from backend.lesson.engine import LessonError

    if args.all and args.step:
        raise LessonError("give a step or --all, not both")
    if args.all:
        if args.note:
            raise LessonError("--note goes with one step, not --all")
        return await _run_all(args)
    if not args.step:
        raise LessonError("which step? give a step id (kfcockpit lesson list) or --all")
    async with _Session(args) as lesson:
        step = lesson.step(args.step)
        if args.note:
            lesson.save_note(step.id, _read_note(args.note))
        lesson.check_order(step.id)  # before anything starts: exit 2 with what to do first
        _refuse_if_unreachable(lesson, step)
        evidence = await _stream(lesson, step, quiet=args.quiet)
        _print_evidence(step, evidence)
        return 0 if evidence.ok else EXIT_FAILED


async def _stream(lesson, step, quiet: bool, out=None):
    out = out or sys.stdout
    evidence = None
    async for update in lesson.run(step.id):
        if update.kind == "line" and not quiet:
            print(update.text, file=out, flush=True)
        elif update.kind == "job":
            print(f"TrainJob {update.job} started (follow it: kfcockpit logs {update.job} -f)",
                  file=out, flush=True)
        elif update.kind == "evidence":
            evidence = update.evidence
    return evidence


async def _run_all(args: argparse.Namespace) -> int:
    rows, passed, counted = [], 0, 0
    async with _Session(args) as lesson:
        for step in lesson.steps:
            if step.kind == "reading":
                if not lesson.note(step.id).strip():
                    rows.append([step.id, "note", f"a reading step: write your note "
                                                  f"(kfcockpit lesson note {step.id} --note FILE)"])
                    continue
                evidence = await lesson.verify(step.id)
            else:
                blocker = lesson.blocked_by(step.id)
                if blocker is not None:
                    counted += 1
                    rows.append([step.id, "skipped", f"needs {blocker.label} to pass first"])
                    continue
                print(f"== {step.label}: {step.title}", file=sys.stderr, flush=True)
                # Progress goes to stderr, so stdout holds only the table.
                evidence = await _stream(lesson, step, quiet=args.quiet, out=sys.stderr)
            counted += 1
            passed += evidence.ok
            rows.append([step.id, "pass" if evidence.ok else "FAIL", one_line(evidence.seen, EVIDENCE_WIDTH)])
    print_table(["STEP", "RESULT", "EVIDENCE"], rows)
    print(f"{passed} of {counted} passed")
    return 0 if passed == counted else EXIT_FAILED


async def cmd_verify(args: argparse.Namespace) -> int:
    async with _Session(args) as lesson:
        if args.step:
            step = lesson.step(args.step)
            _refuse_if_unreachable(lesson, step)
            evidence = await lesson.verify(step.id)
            _print_evidence(step, evidence)
            return 0 if evidence.ok else EXIT_FAILED
        rows, ok = [], True
        for step in lesson.steps:
            evidence = await lesson.verify(step.id)
            ok = ok and evidence.ok
            rows.append([step.id, "pass" if evidence.ok else "NOT DONE", one_line(evidence.seen, EVIDENCE_WIDTH)])
        print_table(["STEP", "RESULT", "EVIDENCE"], rows)
        return 0 if ok else EXIT_FAILED


def cmd_status(args: argparse.Namespace) -> int:
    lesson = _lesson(args)
    states = lesson.states()
    if args.output == "json":
        print_json([{"id": s.id, "section": s.section, "number": s.number, "title": s.title,
                     "kind": s.kind, "status": states[s.id].status.value,
                     "updated": states[s.id].updated, "evidence": states[s.id].evidence,
                     "has_note": bool(lesson.note(s.id).strip())} for s in lesson.steps])
        return 0
    rows = []
    for s in lesson.steps:
        state = states[s.id]
        rows.append([s.id, state.status.value, one_line(state.evidence.seen, 90) if state.evidence else ""])
    print_table(["STEP", "STATUS", "EVIDENCE"], rows)
    done = sum(st.status.value == "done" for st in states.values())
    print(f"{done} of {len(lesson.steps)} steps done (workspace: {lesson.settings.workspace})")
    return 0


async def cmd_note(args: argparse.Namespace) -> int:
    lesson = _lesson(args)
    step = lesson.step(args.step)
    if args.note is None:
        text = lesson.note(step.id)
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            print(f"no note for {step.label} yet. {step.note_prompt or ''}".rstrip())
        return 0
    lesson.save_note(step.id, _read_note(args.note))
    print(f"saved the note for {step.label} ({lesson.store.note_path(step.id)})")
    if step.kind == "reading":
        _print_evidence(step, await lesson.verify(step.id))
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    lesson = _lesson(args)
    if args.step:
        step = lesson.step(args.step)
        lesson.reset(step.id)
        print(f"progress of {step.label} reset (its note and logs are kept)")
    else:
        lesson.reset()
        print("progress of every step reset (notes and logs are kept)")
    return 0
