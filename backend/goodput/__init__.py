"""Goodput: what share of a job's wall time became training progress it kept, and where the rest
went, as ml-goodput-measurement defines it (`model.py` says how). The cockpit, `kfcockpit goodput`
and the benches all measure through `Goodput`.

The package's face is the measurement alone, standard library only, so a script with torch and
nothing else (bench/gpu_check.py) can use it; a job measured through a cluster is `job.measure_job`.
"""

from backend.goodput.model import Goodput, goodput_of
from backend.goodput.report import BADPUT_TYPES, LABELS, PARTS, STAGE_LABELS, GoodputReport, RestartTimes

__all__ = ["BADPUT_TYPES", "LABELS", "PARTS", "STAGE_LABELS", "Goodput", "GoodputReport", "RestartTimes",
           "goodput_of"]
