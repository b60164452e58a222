"""`kfcockpit pipeline compile|run|show`: the lesson's Kubeflow pipeline, headless."""

from __future__ import annotations

import argparse
import sys
import time

from tui.cli.common import EXIT_FAILED, add_command, add_output_option, fail, print_json, settings_from
from backend.words import count

RUN_HELP = """\
Runs a compiled pipeline and shows each task's progress, log and outcome as they happen.
On the embedded cluster (default) it runs with kfp.local: each task is a local process using
this venv, and kfp.local ignores the pipeline's platform settings (requests, limits, volume
mounts, node selector, image pull policy). With --backend kube it is submitted to the Pipelines
endpoint (--kfp-host, default http://localhost:8080: kubectl port-forward -n kubeflow
svc/ml-pipeline-ui 8080:80), where those settings apply.
Default file: manifests/pipeline-local.yaml (embedded) or manifests/pipeline.yaml (kube).
Exit 0 when the run succeeded, 1 when it ran and failed, 2 on bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    group = add_command(sub, "pipeline", help="compile, inspect and run the lesson's Kubeflow pipeline")
    cmds = group.add_subparsers(title="pipeline commands", metavar="COMMAND", parser_class=type(group))

    compile_cmd = add_command(cmds, "compile", help="compile the pipeline to its pinned file(s)",
                              description="Compiles the lesson's pipeline deterministically. Without "
                              "--output it writes both committed files: manifests/pipeline.yaml (for a "
                              "cluster) and manifests/pipeline-local.yaml (for kfp.local; its volume "
                              "task is a lightweight component instead of kfp-kubernetes CreatePVC).")
    compile_cmd.add_argument("--pipeline", default="lesson", choices=("lesson", "train", "ray", "print"),
                             help="which pipeline (default: lesson, the full run)")
    compile_cmd.add_argument("--target", choices=("kube", "local"), default=None,
                             help="compile for a cluster or for kfp.local (default with --output: kube)")
    compile_cmd.add_argument("--output", "-O", metavar="FILE", help="write only this file")
    compile_cmd.set_defaults(handler=compile_handler)

    run_cmd = add_command(cmds, "run", help="run a compiled pipeline, showing each task as it goes",
                          description=RUN_HELP)
    run_cmd.add_argument("--file", "-f", help="the compiled pipeline (default: the committed one)")
    run_cmd.add_argument("--kfp-host", help="Pipelines endpoint on --backend kube "
                                            "(default http://localhost:8080)")
    run_cmd.add_argument("--arg", "-a", action="append", default=[], metavar="KEY=VALUE",
                         help="a pipeline parameter, e.g. --arg steps=20 (repeatable)")
    run_cmd.add_argument("--quiet", "-q", action="store_true", help="task outcomes only, no task logs")
    add_output_option(run_cmd)
    run_cmd.set_defaults(handler=run_handler)

    show_cmd = add_command(cmds, "show", help="parameters, tasks, image and platform settings of a compiled file")
    show_cmd.add_argument("--file", "-f", help="the compiled pipeline (default: the committed one)")
    add_output_option(show_cmd)
    show_cmd.set_defaults(handler=show_handler)
    group.set_defaults(handler=lambda args: group.print_help() or 0)


def _display(path) -> str:
    from pathlib import Path

    from backend.project import PROJECT_ROOT

    path = Path(path).absolute()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def compile_handler(args: argparse.Namespace) -> int:
    from backend.pipelines.compiled import COMPILED_FILES, compile_pipeline, load_compiled

    if args.output:
        plan = [(args.output, args.target or "kube")]
    else:
        targets = [args.target] if args.target else ["kube", "local"]
        if args.pipeline != "lesson":
            fail("--pipeline other than lesson needs --output (the committed files hold the lesson pipeline)")
        plan = [(COMPILED_FILES[t], t) for t in targets]
    for path, target in plan:
        compiled = load_compiled(compile_pipeline(path, args.pipeline, target))
        print(f"wrote {_display(path)}: {compiled.name}, {count(len(compiled.tasks), 'task')}, for "
              f"{'a cluster' if target == 'kube' else 'kfp.local'}, images {', '.join(compiled.images)}")
    return 0


def _arguments(pairs: list[str]) -> dict[str, str]:
    arguments = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--arg {pair!r} is not KEY=VALUE")
        arguments[key.strip()] = value
    return arguments


class _Printer:
    """Shows events as they arrive: plain lines, greppable, one per event."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.started: dict[str, float] = {}

    def __call__(self, event) -> None:
        if event.kind == "note":
            line = f"note: {event.text}"
        elif event.kind == "pipeline-started":
            line = f"pipeline {event.text} started"
        elif event.kind == "task-started":
            self.started[event.task] = event.at
            line = f"task {event.task} running" + (f" ({event.text})" if event.text else "")
        elif event.kind == "task-log":
            if self.quiet:
                return
            line = f"  {event.task} | {event.text}"
        elif event.kind == "task-finished":
            took = event.at - self.started.get(event.task, event.at)
            line = f"task {event.task} {event.state.value} in {took:.1f}s" + (f": {event.text}" if event.text else "")
        else:  # pipeline-finished: the summary below says it with more
            return
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


async def run_handler(args: argparse.Namespace) -> int:
    from backend.pipelines.runs import run_pipeline_file

    settings = settings_from(args)
    printer = _Printer(args.quiet) if args.output == "table" else None
    result = await run_pipeline_file(settings, args.file, _arguments(args.arg), printer)
    if args.output == "json":
        print_json(result)
    else:
        took = (result.finished or time.time()) - result.started
        print(f"pipeline {result.pipeline} {result.state.value} in {took:.0f}s ({result.backend}, "
              f"run {result.run_id})")
        for task in result.tasks:
            outputs = " ".join(f"{k}={v}" for k, v in sorted(task.outputs.items()))
            print(f"  {task.name:<20} {task.state.value:<10} {outputs}".rstrip())
        if result.error:
            print(f"error: {result.error}")
        print(f"details: {result.location}")
    return 0 if result.ok else EXIT_FAILED


def _default(parameter) -> str:
    # KFP stores integer defaults as floats (2.0); show them as the integers they are.
    if parameter.type == "NUMBER_INTEGER" and isinstance(parameter.default, float):
        return str(int(parameter.default))
    return str(parameter.default)


def show_handler(args: argparse.Namespace) -> int:
    from backend.pipelines.compiled import load_compiled
    from backend.pipelines.runs import committed_file

    compiled = load_compiled(args.file or committed_file(settings_from(args)))
    if args.output == "json":
        print_json(compiled)
        return 0
    print(f"pipeline {compiled.name} ({_display(compiled.path)}, {compiled.sdk_version})")
    print(f"image: {', '.join(compiled.images)}")
    print("parameters: " + ", ".join(f"{k}={_default(p)}" for k, p in compiled.parameters.items()))
    print(f"tasks: {', '.join(compiled.tasks)}")
    containers = ", ".join(compiled.container_executors)
    runs_here = "yes" if compiled.runs_locally else f"no (container components: {containers})"
    print(f"runs with kfp.local: {runs_here}")
    print("platform settings, request/limit (kfp.local ignores them; a cluster applies them):")
    for executor in sorted(set(compiled.platform) | set(compiled.resources)):
        settings, r = compiled.platform.get(executor, {}), compiled.resources.get(executor, {})
        parts = []
        if r:
            parts.append(f"cpu {r.get('resourceCpuRequest', '-')}/{r.get('resourceCpuLimit', '-')} "
                         f"memory {r.get('resourceMemoryRequest', '-')}/{r.get('resourceMemoryLimit', '-')}")
        if "nodeSelector" in settings:
            labels = settings["nodeSelector"].get("labels", {})
            parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in labels.items()))
        for mount in settings.get("pvcMount", []):
            parts.append(f"pvc at {mount.get('mountPath')}")
        if "imagePullPolicy" in settings:
            parts.append(f"pull {settings['imagePullPolicy']}")
        print(f"  {executor.removeprefix('exec-'):<20} " + "; ".join(parts))
    return 0
