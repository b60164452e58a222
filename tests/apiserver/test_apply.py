"""Server-side apply and managedFields (issue #32 item 7), as kube-apiserver's field manager keeps
them (k8s.io/apimachinery pkg/util/managedfields/internal: fieldmanager.go, structuredmerge.go,
conflict.go, capmanagers.go, over sigs.k8s.io/structured-merge-diff merge/update.go): every write
records who set which field; an apply that would change a field another manager owns is a 409
naming that manager and field, unless forced (`--force-conflicts`), which takes the field over;
a field an applier applied before and dropped now is removed; an apply names its field manager
(meta/v1/validation ValidatePatchOptions)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def _config(**data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data}


def _owners(obj: dict) -> dict[str, set[str]]:
    """manager/operation -> the data keys its entry owns."""
    return {f"{e['manager']}/{e['operation']}": {k[2:] for k in e["fieldsV1"].get("f:data", {}) if k != "."}
            for e in obj["metadata"].get("managedFields") or []}


async def _apply(api, manager: str | None, config: dict, force: bool = False):
    query = "&".join(q for q in (f"fieldManager={manager}" if manager else "", "force=true" if force else "") if q)
    return await api.call("PATCH", f"{CONFIGMAPS}/cm?{query}", json.dumps(config), content_type=APPLY)


async def test_apply_creates_and_records_its_manager(api):
    code, body, _ = await _apply(api, "alice", _config(a="1", b="2"))
    assert code == 201, body
    [entry] = body["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["fieldsType"]) == (
        "alice", "Apply", "v1", "FieldsV1")
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    code, body, _ = await _apply(api, "alice", _config(a="1", b="2"))
    assert code == 200 and body["metadata"]["resourceVersion"]


async def test_apply_names_its_field_manager(api):
    code, body, _ = await _apply(api, None, _config(a="1"))
    assert code == 422 and "fieldManager: Required value: is required for apply patch" in body["message"], body


async def test_another_managers_field_is_a_conflict_until_forced(api):
    await _apply(api, "alice", _config(a="1", b="2"))
    code, body, _ = await _apply(api, "bob", _config(a="9"))
    assert (code, body["reason"]) == (409, "Conflict"), body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                                          "field": ".data.a"}]
    code, body, _ = await _apply(api, "bob", _config(a="9"), force=True)
    assert code == 200 and body["data"] == {"a": "9", "b": "2"}, body
    assert _owners(body) == {"alice/Apply": {"b"}, "bob/Apply": {"a"}}
    code, body, _ = await _apply(api, "carol", _config(a="9"))  # the same value: shared, no conflict
    assert code == 200 and _owners(body)["carol/Apply"] == {"a"}


async def test_a_dropped_field_is_removed_unless_another_manager_owns_it(api):
    await _apply(api, "alice", _config(a="1", b="2", c="3"))
    await _apply(api, "bob", _config(c="3"))  # bob shares c
    code, body, _ = await _apply(api, "alice", _config(a="1"))
    assert code == 200 and body["data"] == {"a": "1", "c": "3"}, body


async def test_an_update_takes_the_fields_it_changes(api):
    await _apply(api, "alice", _config(a="1"))
    code, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm?fieldManager=kubectl-edit", {"data": {"a": "5"}},
                                   content_type=MERGE)
    assert code == 200 and _owners(body) == {"kubectl-edit/Update": {"a"}}, body
    code, body, _ = await _apply(api, "alice", _config(a="1"))
    assert code == 409 and 'conflict with "kubectl-edit" using v1: .data.a' in body["message"], body


async def test_a_write_without_a_field_manager_is_its_user_agents(api):
    code, body, _ = await api.call("POST", CONFIGMAPS, _config(a="1"), headers={"User-Agent": "kubectl/v1.33.0 (x)"})
    assert code == 201 and _owners(body) == {"kubectl/Update": {"a"}}, body


async def test_the_main_resource_owns_no_status(api):
    pods = "/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}}
    code, body, _ = await api.call("PATCH", f"{pods}/p?fieldManager=alice", json.dumps(pod), content_type=APPLY)
    assert code == 201, body
    [entry] = body["metadata"]["managedFields"]
    assert "f:status" not in entry["fieldsV1"]
    assert entry["fieldsV1"]["f:spec"]["f:containers"] == {
        'k:{"name":"c"}': {".": {}, "f:command": {}, "f:image": {}, "f:name": {}}}


async def test_a_custom_resource_merges_by_its_schemas_list_keys(api):
    """A CRD's x-kubernetes-list-type map (JobSet's replicatedJobs by name, inside Trainer's
    TrainingRuntime template; containers and env by name through their schema): another
    manager's item is kept, a conflict names the keyed path as structured-merge-diff prints it."""
    runtimes = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainingruntimes"
    runtime = yaml.safe_load((Path(__file__).resolve().parents[2] / "manifests" / "runtime.yaml").read_text())
    code, body, _ = await api.call("PATCH", f"{runtimes}/kfcockpit-torch?fieldManager=alice", json.dumps(runtime),
                                   content_type=APPLY)
    assert code == 201, body
    env = ["spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0,
           "env"]
    other = copy.deepcopy(runtime)
    node = other
    for step in env[:-1]:
        node = node[step]
    node["env"] = [{"name": "OMP_NUM_THREADS", "value": "2"}]
    other["spec"] = {"template": {"spec": {"replicatedJobs": other["spec"]["template"]["spec"]["replicatedJobs"]}}}
    code, body, _ = await api.call("PATCH", f"{runtimes}/kfcockpit-torch?fieldManager=bob", json.dumps(other),
                                   content_type=APPLY)
    assert code == 409, body
    assert ('.spec.template.spec.replicatedJobs[name="node"].template.spec.template.spec.containers[name="node"]'
            '.env[name="OMP_NUM_THREADS"].value') in body["message"], body["message"]
    code, body, _ = await api.call("PATCH", f"{runtimes}/kfcockpit-torch?fieldManager=bob&force=true",
                                   json.dumps(other), content_type=APPLY)
    assert code == 200, body
    node = body
    for step in env:
        node = node[step]
    assert node == [{"name": "OMP_NUM_THREADS", "value": "2"}, {"name": "PET_RDZV_CONF", "value": "timeout=60"}]
