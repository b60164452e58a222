"""`install.sh kuberay` puts the operator where the script waits for it: manifests/install/kuberay
rendered offline by kubectl's built-in kustomize over KubeRay v1.7.0's own config/default (vendored
in data/, the remote base swapped for it). Upstream's base alone lands everything in `default`;
the overlay moves every namespaced object, and the bindings' subjects, to ray-system and creates
that namespace."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = str(Path(sys.executable).parent / "kubectl")
OVERLAY = REPO / "manifests" / "install" / "kuberay"
VENDORED = Path(__file__).with_name("data") / "kuberay-v1.7.0" / "config"
REMOTE = "https://github.com/ray-project/kuberay/ray-operator/config/default?ref=v1.7.0"


def _render(directory: Path) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _base(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    shutil.copytree(VENDORED, config)
    (config / "crd").mkdir()
    (config / "crd" / "kustomization.yaml").write_text("resources: []\n")  # CRDs: cluster-scoped, left out
    return config / "default"


def test_the_overlay_names_the_vendored_base():
    text = (OVERLAY / "kustomization.yaml").read_text()
    assert REMOTE in text and re.search(r"^namespace: ray-system$", text, re.M)
    assert "namespace: default" in (VENDORED / "default" / "kustomization.yaml").read_text()


def test_upstream_base_alone_lands_in_default(tmp_path):
    namespaces = {o["metadata"].get("namespace") for o in _render(_base(tmp_path)) if o["kind"] not in
                  ("ClusterRole", "ClusterRoleBinding")}
    assert namespaces == {"default"}


def test_install_renders_the_operator_into_ray_system(tmp_path):
    _base(tmp_path)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    for path in OVERLAY.iterdir():
        shutil.copy(path, overlay / path.name)
    kustomization = overlay / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace(REMOTE, "../config/default"))  # kustomize: relative
    objects = _render(overlay)
    kinds = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert ("Namespace", "ray-system") in kinds
    namespaced = [o for o in objects if o["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")]
    assert namespaced and {o["metadata"]["namespace"] for o in namespaced} == {"ray-system"}
    subjects = [s for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding") for s in o["subjects"]]
    assert subjects and {s["namespace"] for s in subjects} == {"ray-system"}
    deployment = kinds[("Deployment", "kuberay-operator")]  # what install.sh waits for, in ray-system
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "quay.io/kuberay/operator:v1.7.0"
    script = (REPO / "manifests" / "install" / "install.sh").read_text()
    assert "-n ray-system wait --for=condition=Available --timeout=300s deployment/kuberay-operator" in script
