"""Bad input through the CLI: one line on stderr, exit 2, nothing started, nothing lost. (What
kubectl does — apply, get, delete — is refused by the API server; tests/conformance/test_refusals.py.)"""

from __future__ import annotations

import json

import pytest

from backend.local.layout import Layout
from backend.local.embedded import Embedded
from tests.local.conftest import MANIFESTS, cli, kubectl


@pytest.fixture
def ready_home(home, cluster):
    """A state root with the lesson's runtime and volume applied, and a file on the volume."""
    for name in ("runtime.yaml", "volume.yaml"):
        applied = kubectl(home, "apply", "-f", str(MANIFESTS / name))
        assert applied.returncode == 0, applied.stderr
    bound = kubectl(home, "wait", "pvc/checkpoints", "--for=jsonpath={.status.phase}=Bound", "--timeout=60s")
    assert bound.returncode == 0, bound.stderr
    precious = Embedded(home).layout.claim_dir("default", "checkpoints") / "precious.txt"
    precious.write_text("keep me")
    return home


def _cases(tmp_path):
    return [
        (["checkpoints", "../../etc"], "is not a valid name"),  # checked before it goes into a URL
        (["checkpoints", "no-such-volume"], "PersistentVolumeClaim no-such-volume: not found"),
        (["snapshot", "create", "no-such-volume", "snap"], "PersistentVolumeClaim no-such-volume: not found"),
        (["snapshot", "create", "checkpoints", "../escape"], "is not a valid name"),
        (["logs", "no-such-job"], "TrainJob no-such-job: not found"),
        (["get", "pods"], "use kubectl get"),
        (["cluster", "up", "--cpus", "0"], "argument --cpus: '0' must be more than 0"),
        (["cluster", "up", "--max-pods", "0"], "'0' is not a whole number above 0"),
        (["cluster", "up", "--pod-max-pids", "0"], "'0' is not a whole number above 0"),
        (["cluster", "up", "--nodes", "0"], "--nodes 0: a cluster needs at least one node"),
        (["cluster", "up", "--gpus-per-node", "-1"], "--gpus-per-node -1: a node has 0 or more GPUs"),
        (["cluster", "up", "--gpus-per-node", "many"], "--gpus-per-node 'many': a number of GPUs, or auto"),
        (["cluster", "up", "--node-monitor-grace-period", "soon"],
         "--node-monitor-grace-period 'soon' is not a duration"),
        (["node", "fail", "no-such-node"], "node 'no-such-node' not found (the nodes: kfcockpit-worker, "
                                           "kfcockpit-worker2)"),
        (["node", "restore", "kfcockpit-worker"], "node kfcockpit-worker is running (it has not failed)"),
    ]


def test_bad_input_exits_2_with_one_line_and_starts_nothing(ready_home, tmp_path):
    for args, message in _cases(tmp_path):
        result = cli(ready_home, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("kfcockpit: ") and result.stderr.count("\n") == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr

    listed = kubectl(ready_home, "get", "trainjobs,pods", "-o", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"] == []
    assert (Layout(ready_home).claim_dir("default", "checkpoints") / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("args,message", [
    # apimachinery's regular expression is not for a person: what a quantity looks like is
    (["cluster", "up", "--memory", "8Q"], "argument --memory: '8Q' is not a resource quantity: a number and "
                                          "an optional suffix, e.g. 8Gi, 512Mi, 4 or 500m (see 'kfcockpit "
                                          "cluster up --help')"),
    # the bad option named, and the help of the command it was given to
    (["lesson", "--bogus"], "unrecognized arguments: --bogus (see 'kfcockpit lesson --help')"),
    (["lesson", "run", "3", "--bogus"], "unrecognized arguments: --bogus (see 'kfcockpit lesson run --help')"),
])
def test_a_mistyped_option_or_quantity_is_one_clear_line(tmp_path, args, message):
    result = cli(tmp_path / "home", *args)
    assert result.returncode == 2 and result.stderr == f"kfcockpit: {message}\n", result.stderr
    assert "[+-]" not in result.stderr
