"""The refresh script reads each CRD at its pinned tag (never the work tree) and writes what the
catalog loads; the vendored files record where they came from."""

from __future__ import annotations

import json
import subprocess

import yaml

from backend.local.registry.crds import catalog, refresh
from backend.local.registry.crds.sources import SOURCES


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_refresh_reads_the_tag_not_the_work_tree(tmp_path):
    source = SOURCES["VolumeSnapshotClass"]
    repo = tmp_path / "snapshotter"
    repo.mkdir()
    _git(repo, "init", "-q")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "spec": {"group": "snapshot.storage.k8s.io", "scope": "Cluster",
                    "names": {"kind": "VolumeSnapshotClass", "plural": "volumesnapshotclasses"},
                    "versions": [{"name": "v1beta1", "served": False, "storage": False,
                                  "schema": {"openAPIV3Schema": {}}},
                                 {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "description": "at the tag"}}}]}}
    for other in SOURCES.values():  # the same repository's other CRDs
        if other.repo == source.repo:
            (repo / other.path).parent.mkdir(parents=True, exist_ok=True)
            (repo / other.path).write_text(yaml.safe_dump(crd))
    path = repo / source.path
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "crd")
    _git(repo, "tag", source.tag)
    path.write_text(path.read_text().replace("at the tag", "edited later"))
    out = tmp_path / "data"
    out.mkdir()
    written = {p.name: p for p in refresh.refresh({source.repo: repo}, out)}
    assert len(written) == 3  # external-snapshotter's three CRDs, nothing else
    doc = json.loads(written["volumesnapshotclasses.snapshot.storage.k8s.io.json"].read_text())
    assert doc["schema"] == {"type": "object", "description": "at the tag"} and doc["version"] == "v1"
    assert doc["subresources"] == ["status"] and doc["source"]["tag"] == source.tag


def test_every_vendored_crd_names_its_pinned_source():
    for kind, source in SOURCES.items():
        crd = catalog.crd(kind)
        assert crd.kind == kind and crd.source["repo"] == source.repo and crd.source["tag"] == source.tag
        assert len(crd.source["commit"]) == 40
