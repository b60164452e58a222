"""The setup steps on the kube backend, against the API server in-process of tests/kube:
the verify reads the Trainer controller pod the way a learner's `kubectl get pods` would."""

from __future__ import annotations

import pytest

from backend.connect import connect
from backend.lesson.engine import Lesson
from backend.settings import Settings
from tests.kube.conftest import api, kubeconfig  # noqa: F401 (fixtures)
from tests.kube.objects import PODS
from tests.kube.test_preflight import controller_pod


@pytest.fixture
async def lesson(api, kubeconfig, tmp_path):  # noqa: F811
    settings = Settings(backend="kube", kubeconfig=kubeconfig, context="fake", namespace="default",
                        kfp_host=api.url, home=tmp_path / "home")
    cluster = connect(settings)
    yield Lesson(cluster, settings)
    await cluster.close()


async def test_setup_2_sees_the_trainer_controller_running(api, lesson):  # noqa: F811
    api.put(PODS, controller_pod(), namespace="kubeflow-system")
    evidence = await lesson.verify("setup-2")
    assert evidence.ok, evidence
    assert evidence.seen == ("Trainer controller: kubeflow-trainer-controller-manager-7d9f-x2x is "
                             "Running in kubeflow-system")


async def test_setup_2_without_a_controller_says_how_to_install_it(lesson):
    evidence = await lesson.verify("setup-2")
    assert not evidence.ok
    assert evidence.seen.startswith("Trainer controller: no Trainer controller pod in kubeflow-system — fix: ")


async def test_progress_on_kube_is_kept_apart_from_local(api, lesson):  # noqa: F811
    api.put(PODS, controller_pod(), namespace="kubeflow-system")
    await lesson.verify("setup-2")
    assert lesson.settings.workspace.name == "kube-fake-default"
    local = Lesson(None, lesson.settings.model_copy(update={"backend": "local"}))
    assert local.state("setup-2").status.value == "todo"
