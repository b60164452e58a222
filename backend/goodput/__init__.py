"""Goodput: what share of a job's wall time became training progress it kept, and where the rest
went, as ml-goodput-measurement defines it (`model.py` says how). The cockpit, `kfcockpit goodput`
and `bench/goodput.py` all measure through `Goodput`."""

from backend.goodput.job import JobMeasure, measure_job
from backend.goodput.model import Goodput, goodput_of
from backend.goodput.report import BADPUT_TYPES, LABELS, PARTS, STAGE_LABELS, GoodputReport, RestartTimes

__all__ = ["BADPUT_TYPES", "LABELS", "PARTS", "STAGE_LABELS", "Goodput", "GoodputReport", "JobMeasure",
           "RestartTimes", "goodput_of", "measure_job"]
