"""Each kind's strategy (strategy.py): the table the generic registry looks a kind's rules up in,
its admission webhooks included (`Strategy.webhooks`). Adding a kind is one row here."""

from __future__ import annotations

import time
from typing import Callable

from backend.local.registry.kinds import Kinds
from backend.local.registry.strategies.batch import JobSetStrategy, JobStrategy
from backend.local.registry.strategies.core import (
    ConfigMapStrategy,
    EventStrategy,
    NamespaceStrategy,
    NodeStrategy,
    SecretStrategy,
)
from backend.local.registry.strategies.pods import TOLERATION_SECONDS, PodStrategy
from backend.local.registry.strategies.rayjobs import RayJobStrategy
from backend.local.registry.strategies.storage import ClaimStrategy, SnapshotContentStrategy, SnapshotStrategy
from backend.local.registry.strategies.trainer import RuntimeStrategy, TrainJobStrategy
from backend.local.registry.strategy import Strategy
from backend.local.registry.upstream import trainer


def strategies(kinds: Kinds, check_state_root: Callable[[], None] = lambda: None,
               clock: Callable[[], float] = time.time,
               toleration_seconds: tuple[int, int] = (TOLERATION_SECONDS, TOLERATION_SECONDS)) -> dict[str, Strategy]:
    """Kind name -> its strategy; the kinds not named follow the plain rules. `check_state_root`
    refuses (InvalidResource) a state root too long for what a RayJob's Ray needs;
    `toleration_seconds`: (not-ready, unreachable), the DefaultTolerationSeconds plugin's."""
    named = kinds.named
    return {
        "Namespace": NamespaceStrategy(),
        "ConfigMap": ConfigMapStrategy(),
        "Event": EventStrategy(),
        "Secret": SecretStrategy(),
        "Node": NodeStrategy(),
        "Pod": PodStrategy(clock, *toleration_seconds),
        "Job": JobStrategy(),
        "JobSet": JobSetStrategy(),
        "TrainJob": TrainJobStrategy(named("TrainJob")),
        "TrainingRuntime": RuntimeStrategy(named("TrainingRuntime"), trainer.validate_training_runtime),
        "ClusterTrainingRuntime": RuntimeStrategy(named("ClusterTrainingRuntime"),
                                                  trainer.validate_cluster_training_runtime),
        "RayJob": RayJobStrategy(named("RayJob"), check_state_root),
        "PersistentVolumeClaim": ClaimStrategy(named("PersistentVolumeClaim")),
        "VolumeSnapshot": SnapshotStrategy(named("VolumeSnapshot")),
        "VolumeSnapshotContent": SnapshotContentStrategy(),
    }
