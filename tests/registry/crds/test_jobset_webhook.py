"""JobSet v0.12.0's webhook (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go), each rule both
ways: Default (create), ValidateCreate, ValidateUpdate; the denial is a 422 Invalid behind
`admission webhook "vjobset.kb.io" denied the request`."""

from __future__ import annotations

import copy

import pytest

from backend.local.registry.upstream import jobset as jobset_rules
from tests.registry.crds.conftest import jobset

PREFIX = 'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "js" is invalid: '


def _refused(cluster, obj, old=None) -> str:
    refused = cluster.refused(obj, old)
    assert refused.code == 422 and refused.reason == "Invalid" and refused.message.startswith(PREFIX)
    return refused.message[len(PREFIX):]


def _job(rjob):
    return rjob["template"]["spec"]


def test_defaults(cluster):
    """Default: success and startup policies, Indexed jobs, pods OnFailure where empty, DNS
    hostnames, rule names, claim retention."""
    js = jobset(failurePolicy={"rules": [{"action": "FailJobSet"}]},
                volumeClaimPolicies=[{"templates": [{"metadata": {"name": "data"}, "spec": {}}]}])
    js["spec"]["replicatedJobs"].append({"name": "keeps", "template": {"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "volumeMounts": [
            {"name": "data", "mountPath": "/d"}]}]}}}}})
    cluster.admit(js)
    spec = js["spec"]
    assert spec["successPolicy"] == {"operator": "All"} and spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert [_job(r)["completionMode"] for r in spec["replicatedJobs"]] == ["Indexed", "Indexed"]
    assert [_job(r)["template"]["spec"]["restartPolicy"] for r in spec["replicatedJobs"]] == ["OnFailure", "Never"]
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert spec["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"
    assert spec["volumeClaimPolicies"][0]["retentionPolicy"] == {"whenDeleted": "Delete"}


def test_default_jobset_is_the_webhook_for_controllers():
    js = {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {}}}]}}
    jobset_rules.default_jobset(js)
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize("change, error", [
    (lambda s: s["replicatedJobs"][0].update(dependsOn=[{"name": "x", "status": "Ready"}]),
     "<nil>: Internal error: DependsOn can't be set for the first ReplicatedJob"),
    (lambda s: s["replicatedJobs"].append({"name": "b", "dependsOn": [{"name": "zz", "status": "Ready"}], "template": {
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}),
     "<nil>: Internal error: replicatedJob: b cannot depend on replicatedJob: zz"),
    (lambda s: s.update(network={"subdomain": "Bad_Sub"}),
     'spec.network.subdomain: Invalid value: "Bad_Sub": a lowercase RFC 1123 subdomain must consist of lower case '
     "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     r"'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    (lambda s: s.update(managedBy="jobset"),
     'spec.managedBy: Invalid value: "jobset": must be a domain-prefixed path (such as "acme.io/foo")'),
    (lambda s: s["replicatedJobs"][0].update(name="n" * 60),
     'spec.replicatedJobs[0].name: Invalid value: "js-' + "n" * 60 + '-0": JobSet name is too long, job names '
     "generated for this JobSet will exceed 63 characters"),
    (lambda s: s["replicatedJobs"][0].update(name="n" * 52),
     'spec.replicatedJobs[0].name: Invalid value: "js-' + "n" * 52 + '-0": JobSet name is too long, pod names '
     "generated for this JobSet will exceed 63 characters"),
    (lambda s: s["replicatedJobs"][0].update(groupName="Group"),
     'spec.replicatedJobs[0].groupName: Invalid value: "Group": a DNS-1035 label must consist of lower case '
     "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
     "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"),
    (lambda s: s.update(successPolicy={"operator": "Any", "targetReplicatedJobs": ["zz"]}),
     "<nil>: Internal error: invalid replicatedJob name 'zz' does not appear in .spec.ReplicatedJobs"),
    (lambda s: s.update(failurePolicy={"rules": [{"name": "1st", "action": "FailJobSet"}]}),
     "<nil>: Internal error: invalid failure policy rule name '1st', a failure policy rule name must start with an "
     "alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an "
     "alphanumeric character or '_'"),
    (lambda s: s.update(failurePolicy={"rules": [{"name": "a", "action": "FailJobSet"},
                                                 {"name": "a", "action": "FailJobSet"}]}),
     "<nil>: Internal error: rule names are not unique, rules with indices [0 1] all have the same name 'a'"),
    (lambda s: s.update(failurePolicy={"rules": [{"name": "a", "action": "FailJobSet", "onJobFailureReasons": [
        "OOMKilled"]}]}),
     "<nil>: Internal error: invalid job failure reason 'OOMKilled' in failure policy is not a recognized job failure "
     "reason"),
    (lambda s: s.update(failurePolicy={"rules": [{"name": "a", "action": "RestartJob"}]}),
     "<nil>: Internal error: RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
     "RestartJob feature gate is disabled"),
    (lambda s: s.update(coordinator={"replicatedJob": "zz"}),
     "<nil>: Internal error: coordinator replicatedJob zz does not exist"),
    (lambda s: s.update(volumeClaimPolicies=[{"templates": [{"metadata": {"name": "data"}, "spec": {}}]}]),
     'spec.replicatedJobs: Invalid value: [{"name":"node","groupName":"default","template":{"spec":{'),
])
def test_create_rules(cluster, change, error):
    js = jobset()
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 2
    cluster.admit(copy.deepcopy(js))
    change(js["spec"])
    assert error in _refused(cluster, js)  # with what else upstream reports of the same fault


def test_a_coordinator_on_an_indexed_job_is_admitted(cluster):
    cluster.admit(jobset(coordinator={"replicatedJob": "node", "jobIndex": 0, "podIndex": 1}))
    assert _refused(cluster, jobset(coordinator={"replicatedJob": "node", "podIndex": 5})) == \
        "<nil>: Internal error: coordinator pod index 5 is invalid for replicatedJob node job index 0"


def test_update_keeps_replicated_jobs_and_manager(cluster):
    old = jobset()
    cluster.admit(old)
    new = copy.deepcopy(old)
    _job(new["spec"]["replicatedJobs"][0])["parallelism"] = 3
    assert _refused(cluster, new, old).startswith('spec.replicatedJobs: Invalid value: [{"name":"node"')
    assert _refused(cluster, new, old).endswith(": field is immutable")
    relabelled = copy.deepcopy(old)
    _job(relabelled["spec"]["replicatedJobs"][0])["template"]["metadata"] = {"labels": {"queue": "a"}}
    assert "field is immutable" in _refused(cluster, copy.deepcopy(relabelled), old)
    relabelled["spec"]["suspend"] = True  # what Kueue may change on a suspended JobSet
    cluster.admit(relabelled, old)
