"""Refresh the vendored CRD schemas from checkouts of the upstream repositories.

    python -m backend.local.registry.crds.refresh kubeflow/trainer=DIR kubernetes-sigs/jobset=DIR \
        ray-project/kuberay=DIR kubernetes-csi/external-snapshotter=DIR

Each DIR is a git repository (a work tree or a bare mirror) holding the tag `sources.py` pins;
the file is read at that tag with `git show`, never from the work tree. Only the served storage
version's `openAPIV3Schema` is kept, whole (its descriptions are what `kubectl explain` shows),
with what discovery and the registry need (group, names, scope, subresources) and where it came
from (repository, tag, path, commit).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from backend.local.registry.crds.sources import SOURCES, Source

DATA = Path(__file__).with_name("data")


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True, text=True).stdout


def vendored(crd: dict[str, Any], source: Source, commit: str) -> dict[str, Any]:
    """The part of a CustomResourceDefinition the embedded cluster serves."""
    spec = crd["spec"]
    version = next(v for v in spec["versions"] if v.get("storage"))
    return {
        "source": {"repo": source.repo, "tag": source.tag, "path": source.path, "commit": commit},
        "group": spec["group"],
        "version": version["name"],
        "names": spec["names"],
        "scope": spec["scope"],
        "subresources": sorted((version.get("subresources") or {}).keys()),
        "schema": version["schema"]["openAPIV3Schema"],
    }


def refresh(checkouts: dict[str, Path], target: Path = DATA) -> list[Path]:
    written = []
    for source in SOURCES.values():
        checkout = checkouts.get(source.repo)
        if checkout is None:
            continue
        commit = _git(checkout, "rev-list", "-n", "1", source.tag).strip()
        crd = yaml.safe_load(_git(checkout, "show", f"{source.tag}:{source.path}"))
        path = target / source.data_name
        path.write_text(json.dumps(vendored(crd, source, commit), sort_keys=True, separators=(",", ":")) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    checkouts = {}
    for arg in argv:
        repo, sep, directory = arg.partition("=")
        if not sep or repo not in {s.repo for s in SOURCES.values()}:
            print(f"refresh: expected OWNER/NAME=DIR for one of {sorted({s.repo for s in SOURCES.values()})}, "
                  f"got {arg!r}", file=sys.stderr)
            return 2
        checkouts[repo] = Path(directory)
    for path in refresh(checkouts):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
