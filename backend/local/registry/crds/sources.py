"""Where each vendored CRD comes from: the upstream repository, the pinned tag and the file in it.

One line per kind the embedded cluster judges by its upstream CRD. `refresh.py` reads these
files out of a checkout of each repository and writes `data/<plural>.<group>.json`; `catalog.py`
loads them. Changing a pin here and running the refresh is how the cluster follows a new release.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    repo: str  # owner/name on GitHub
    tag: str
    path: str  # the CRD file at that tag

    @property
    def data_name(self) -> str:
        """`trainjobs.trainer.kubeflow.org.json`: the CRD's own name (upstream files are `<group>_<plural>.yaml`)."""
        group, plural = self.path.rsplit("/", 1)[-1].removesuffix(".yaml").split("_", 1)
        return f"{plural}.{group}.json"


TRAINER = ("kubeflow/trainer", "v2.3.0", "manifests/base/crds/trainer.kubeflow.org_{}.yaml")
JOBSET = ("kubernetes-sigs/jobset", "v0.12.0", "config/components/crd/bases/jobset.x-k8s.io_{}.yaml")
KUBERAY = ("ray-project/kuberay", "v1.7.0", "ray-operator/config/crd/bases/ray.io_{}.yaml")
SNAPSHOTTER = ("kubernetes-csi/external-snapshotter", "v8.6.0", "client/config/crd/snapshot.storage.k8s.io_{}.yaml")


def _source(origin: tuple[str, str, str], plural: str) -> Source:
    repo, tag, pattern = origin
    return Source(repo, tag, pattern.format(plural))


# kind → where its CRD is. RayJob's CRD embeds the whole RayClusterSpec, so RayCluster's is not needed.
SOURCES: dict[str, Source] = {
    "TrainJob": _source(TRAINER, "trainjobs"),
    "TrainingRuntime": _source(TRAINER, "trainingruntimes"),
    "ClusterTrainingRuntime": _source(TRAINER, "clustertrainingruntimes"),
    "JobSet": _source(JOBSET, "jobsets"),
    "RayJob": _source(KUBERAY, "rayjobs"),
    "VolumeSnapshot": _source(SNAPSHOTTER, "volumesnapshots"),
    "VolumeSnapshotContent": _source(SNAPSHOTTER, "volumesnapshotcontents"),
    "VolumeSnapshotClass": _source(SNAPSHOTTER, "volumesnapshotclasses"),
}
