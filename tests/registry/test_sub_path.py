"""A volumeMount's subPath stays inside its volume, refused at admission as upstream refuses it:
pkg/apis/core/validation validateVolumeMounts -> validateLocalDescendingPath (relative) and
validatePathNoBacksteps (no '..' element). Found admitted: `subPath: ../../..` (issue 44)."""

from __future__ import annotations

import pytest

from backend.local.registry.status import ApiError
from tests.controlplane import plane


def _pod(mount: dict) -> dict:
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"volumes": [{"name": "data", "emptyDir": {}}],
                     "containers": [{"name": "main", "image": "x", "command": ["true"],
                                     "volumeMounts": [{"name": "data", "mountPath": "/data", **mount}]}]}}


@pytest.mark.parametrize("mount, says", [
    ({"subPath": "../../.."},
     """spec.containers[0].volumeMounts[0].subPath: Invalid value: "../../..": must not contain '..'"""),
    ({"subPath": "a/../../b"}, "must not contain '..'"),
    ({"subPath": "/etc"}, 'subPath: Invalid value: "/etc": must be a relative path'),
    ({"subPathExpr": "$(POD)/.."}, "subPathExpr: Invalid value: \"$(POD)/..\": must not contain '..'"),
    ({"subPath": "a", "subPathExpr": "b"}, "subPathExpr and subPath are mutually exclusive"),
])
def test_a_sub_path_leaving_its_volume_is_refused(mount, says):
    client = plane()
    with pytest.raises(ApiError) as refused:
        client.create("Pod", _pod(mount))
    assert refused.value.code == 422 and says in refused.value.message


def test_a_job_template_with_such_a_sub_path_is_refused_too():
    client = plane()
    template = {k: v for k, v in _pod({"subPath": ".."}).items() if k != "metadata"}
    template["spec"]["restartPolicy"] = "Never"
    with pytest.raises(ApiError) as refused:
        client.create("Job", {"metadata": {"name": "j", "namespace": "default"}, "spec": {"template": template}})
    assert "spec.template.spec.containers[0].volumeMounts[0].subPath" in refused.value.message


@pytest.mark.parametrize("sub", ["run-1", "a/b", "..data", "a..b"])
def test_a_descending_sub_path_is_admitted(sub):
    assert plane().create("Pod", _pod({"subPath": sub}))["metadata"]["name"] == "p"
