"""`kfcockpit pipeline ...`: bad input is one line and exit 2; a run shows its tasks as they go."""

from __future__ import annotations

import socket

import pytest

from backend.pipelines.compiled import COMPILED_FILES, load_compiled
from tui.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse-level errors exit from inside
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _refused_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_file_that_is_not_a_compiled_pipeline_is_one_line(tmp_path, capsys):
    not_pipeline = tmp_path / "trainjob.yaml"
    not_pipeline.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, _, err = _run(capsys, "pipeline", "run", "--home", str(tmp_path), "-f", str(not_pipeline))
    assert code == 2
    assert "not a compiled KFP pipeline" in _one_line(err)

    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("key: [unclosed\n")
    code, _, err = _run(capsys, "pipeline", "show", "-f", str(garbage))
    assert code == 2 and "not valid YAML" in _one_line(err)

    code, _, err = _run(capsys, "pipeline", "run", "--home", str(tmp_path), "-f", str(tmp_path / "missing.yaml"))
    assert code == 2 and "no such file" in _one_line(err)


def test_an_unreachable_endpoint_is_one_line(tmp_path, capsys):
    host = f"http://127.0.0.1:{_refused_port()}"
    code, _, err = _run(capsys, "pipeline", "run", "--backend", "kube", "--home", str(tmp_path),
                        "--kfp-host", host)
    assert code == 2
    line = _one_line(err)
    assert host in line and "not reachable" in line and "port-forward" in line

    code, _, err = _run(capsys, "pipeline", "run", "--backend", "kube", "--kfp-host", "localhost:8080")
    assert code == 2 and "not an http(s) URL" in _one_line(err)


def test_the_cluster_file_on_the_embedded_cluster_points_to_the_local_one(tmp_path, capsys):
    code, _, err = _run(capsys, "pipeline", "run", "--home", str(tmp_path), "-f", str(COMPILED_FILES["kube"]))
    assert code == 2
    line = _one_line(err)
    assert "CreatePVC" in line and "pipeline-local.yaml" in line


@pytest.mark.parametrize("arg, problem", [("nope=1", "has no parameter 'nope'"),
                                          ("steps=many", "is not an integer"),
                                          ("steps", "is not KEY=VALUE")])
def test_bad_arguments_are_one_line(tmp_path, capsys, arg, problem):
    code, _, err = _run(capsys, "pipeline", "run", "--home", str(tmp_path), "--arg", arg)
    assert code == 2 and problem in _one_line(err)


def test_compile_then_run_shows_each_task_as_it_goes(tmp_path, capsys):
    path = tmp_path / "print.yaml"
    code, out, _ = _run(capsys, "pipeline", "compile", "--pipeline", "print", "--target", "local", "-O", str(path))
    assert code == 0 and f"wrote {path}" in out
    assert load_compiled(path).tasks == ["print-inputs"]

    code, out, err = _run(capsys, "pipeline", "run", "--home", str(tmp_path), "-f", str(path),
                          "--arg", "message=from the cli", "--arg", "workers=2")
    assert code == 0, err
    lines = out.splitlines()
    running = lines.index("task print-inputs running")
    printed = lines.index("  print-inputs | input message='from the cli'")
    finished = next(i for i, line in enumerate(lines) if line.startswith("task print-inputs Succeeded in "))
    assert running < printed < finished
    assert any(line.startswith("note: kfp.local ignores") for line in lines)
    assert any(line.startswith("pipeline kfcockpit-print-inputs Succeeded") for line in lines)
