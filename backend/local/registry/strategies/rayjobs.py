"""The RayJob strategy: KubeRay v1.7's ray.io/v1 RayJob as the embedded cluster can run it.

The models check its shape (backend/models/rayjob.py). What this cluster cannot run is refused at
once, in one line, rather than failing later: a clusterSelector (no long-lived RayCluster here),
an entrypoint that needs a shell (it runs without one), pod names over 63 characters, and a
state root too long for Ray's socket paths (`check_state_root`, the host's). Its spec changes
only in `suspend` while it runs.
"""

from __future__ import annotations

from typing import Callable

from backend.errors import InvalidResource
from backend.local import rayplan
from backend.local.registry import admission
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError
from backend.local.registry.strategy import Obj, Reader, Strategy


class RayJobStrategy(Strategy):
    def __init__(self, kind: Kind, check_state_root: Callable[[], None]):
        self.kind, self.check_state_root = kind, check_state_root

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        job = admission.check_model(self.kind, obj)
        try:
            rayplan.plan_rayjob(job)
            self.check_state_root()
        except InvalidResource as exc:
            raise ApiError(422, "Invalid", f'RayJob.ray.io "{job.metadata.name}" is invalid: {exc}') from None
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        if not (old.get("spec") or {}).get("suspend"):
            admission.immutable_spec(self.kind, obj, old)
        return self.validate(obj, reader)
