"""How `make test` splits the suite between pytest-xdist workers (`--dist loadgroup`; four here).

A module- or session-scoped fixture is made once per worker that runs a test using it, so tests
sharing one go to one worker: every module is a group of its own, except the directories whose
conftest holds session fixtures (an embedded cluster, a measured Ray comparison), which are one
group each. Each test makes its own state root, and every "no process left" check looks for that
root's processes only, so the other worker's clusters, pods and Ray runs are not seen.

The longest groups are handed out first (`HEAVIEST_FIRST`, with xdist's own reordering by test
count turned off in the Makefile): given out by test count, the one-test lesson walk came last,
and the suite ended with one worker running it for minutes while the other sat idle.

`make check` is the developer's fast loop: `--in-process` keeps the tests that start no real
process (no embedded cluster, no torch worker, no Ray, no browser): `IN_PROCESS`, directories whole
and single modules, chosen by their measured time. A test that starts processes belongs elsewhere,
or its module leaves the list."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# directories whose tests share session-scoped fixtures (see their conftest.py)
SESSION_SHARED = ("conformance", "ray")
# Groups of 40 s or more of test time (`make test PYTEST_ARGS=--durations=0`, summed per group),
# longest first; every other group follows in collection order, the short ones filling the end.
HEAVIEST_FIRST = ("lesson/test_lesson_in_cockpit.py", "ray", "local/test_rayjobs.py", "local/test_controller.py",
                  "training/test_ddp_processes.py", "conformance", "local/test_jobs.py", "local/test_chaos.py",
                  "local/test_node_failure.py", "tui/test_snapshots.py")


# `make check`: about a minute here. Directories whole, then modules of mixed directories.
IN_PROCESS = (
    "apiserver", "backend", "controllers", "install", "kube", "node", "registry",
    "lesson/test_evidence_text.py", "lesson/test_on_kube.py", "lesson/test_progress_and_notes.py",
    "lesson/test_steps_data.py", "local/test_migrate.py", "local/test_placement.py",
    "pipelines/test_cli.py", "pipelines/test_image.py", "pipelines/test_kfp_local.py",
    "recording/test_replay.py", "recording/test_replay_cockpit.py",
    "training/test_checksums.py", "training/test_exit_save.py", "training/test_formats.py",
    "training/test_gpu_manifest.py", "training/test_launch.py", "training/test_run_record.py",
    "tui/test_config.py", "tui/test_following.py", "tui/test_format.py", "tui/test_hangup.py",
    "tui/test_job_bar.py", "tui/test_k9s_plugin.py", "tui/test_live.py", "tui/test_log_buffer.py",
    "tui/test_loss_chart.py", "tui/test_names.py", "tui/test_node_timeline.py", "tui/test_panels_and_logs.py",
    "tui/test_pods_table.py", "tui/test_serve_access.py", "tui/test_serve_http.py", "tui/test_timeline.py",
    "tui/test_untrusted_text.py",
    "tui/test_job_history.py", "tui/test_ranks_in_a_pod.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--in-process", action="store_true",
                     help="only the tests that start no real process (IN_PROCESS): make check")
    parser.addoption("--cpu-time", action="store_true",
                     help="measure each test's CPU seconds, its processes included, and print the costliest "
                          "groups (tests/cpu_time.py)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--cpu-time"):
        from tests.cpu_time import CpuTime

        config.pluginmanager.register(CpuTime(lambda nodeid: xdist_group(TESTS.parent / nodeid.split("::")[0])),
                                      "cpu-time")


def in_process(path: Path) -> bool:
    relative = path.resolve().relative_to(TESTS)
    return relative.parts[0] in IN_PROCESS or relative.as_posix() in IN_PROCESS


def xdist_group(path: Path) -> str:
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] in SESSION_SHARED:
        return relative.parts[0]
    return relative.as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--in-process"):
        kept = [item for item in items if in_process(item.path)]
        config.hook.pytest_deselected(items=[item for item in items if not in_process(item.path)])
        items[:] = kept
    groups = {item: xdist_group(item.path) for item in items}
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    first = {group: place for place, group in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: first.get(groups[item], len(first)))  # stable: the rest keep their order
