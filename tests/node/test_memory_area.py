"""A node's memory (backend/local/node/memory_area.py): a hostPath under /dev/shm is the node's own
tmpfs directory, kept from one pod to the next on that node and gone when the node stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import InvalidResource
from backend.local.node import memory_area
from tests.controlplane import plane, until
from tests.node.test_kubelet import PY, _log, _phase, _pod, kubelet

pytestmark = pytest.mark.skipif(not memory_area.MACHINE_SHM.is_dir(), reason="this machine has no /dev/shm")

SHM_VOLUME = [{"name": "mem", "hostPath": {"path": "/dev/shm/kfcockpit", "type": "DirectoryOrCreate"}}]
MOUNT = {"volumeMounts": [{"name": "mem", "mountPath": "/node-memory"}]}


async def test_what_a_pod_leaves_in_the_nodes_memory_the_next_pod_there_finds_until_the_node_stops(tmp_path):
    client = plane()
    write = "import sys; open(sys.argv[1] + '/state', 'w').write('step 12')"
    read = "import sys; print(open(sys.argv[1] + '/state').read())"
    async with kubelet(tmp_path, client) as node:
        _pod(client, "survivor", [PY, "-c", write, "/node-memory"], volumes=SHM_VOLUME, container=MOUNT)
        await until(client, "Pod", "default", "survivor", _phase("Succeeded"))
        client.delete("Pod", "default", "survivor")
        _pod(client, "next", [PY, "-c", read, "/node-memory"], volumes=SHM_VOLUME, container=MOUNT)
        await until(client, "Pod", "default", "next", _phase("Succeeded"))
        assert await _log(node, "next") == "step 12\n"
        area = node.memory_area
        # In this machine's tmpfs, under the node's own directory.
        assert (area / "kfcockpit" / "state").read_text() == "step 12"
        assert area.is_relative_to(Path("/dev/shm")) and area.name == "node-1"
    assert not area.exists() and not area.parent.exists()


def test_only_paths_under_dev_shm_are_the_nodes_memory(tmp_path):
    assert memory_area.host_directory(tmp_path, "/var/lib/data") is None
    assert memory_area.host_directory(tmp_path, "/dev/shmem") is None
    assert memory_area.host_directory(tmp_path, "/dev/shm/a/b") == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()
    with pytest.raises(InvalidResource):
        memory_area.host_directory(tmp_path, "/dev/shm/../etc")


def test_a_pod_with_another_host_path_is_refused_at_create():
    from backend.local.registry.status import ApiError

    client = plane()
    with pytest.raises(ApiError, match="hostPath under /dev/shm"):
        _pod(client, "elsewhere", [PY, "-c", "pass"], volumes=[{"name": "v", "hostPath": {"path": "/var/lib/x"}}],
             container={"volumeMounts": [{"name": "v", "mountPath": "/x"}]})
