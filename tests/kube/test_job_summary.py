"""A TrainJob's summary from its object and its JobSet's (backend/kube/jobs.summarize): a JobSet of
the same name that another TrainJob owned (one deleted before, its JobSet not yet collected by
the garbage collector, which deletes dependents after their owner) is not this job's."""

from __future__ import annotations

from backend.kube.jobs import summarize
from backend.models import JobPhase
from tests.kube.objects import job_set, train_job


def owned(jobset: dict, uid: str) -> dict:
    jobset["metadata"].update(uid=f"jobset-of-{uid}", ownerReferences=[
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "j", "uid": uid,
         "controller": True}])
    return jobset


def test_the_jobset_the_trainjob_owns_is_its_group():
    job = train_job("j")
    job["metadata"]["uid"] = "new"
    summary = summarize(job, owned(job_set("j", ready=1), "new"))
    assert summary.uid == "new" and summary.group_uid == "jobset-of-new" and summary.phase == JobPhase.RUNNING


def test_a_jobset_of_the_job_deleted_before_is_not_its_group():
    job = train_job("j")
    job["metadata"]["uid"] = "new"
    summary = summarize(job, owned(job_set("j", restarts=2, ready=1), "old"))
    assert summary.group_uid == "" and summary.restart_attempt == 0 and summary.phase == JobPhase.CREATED
