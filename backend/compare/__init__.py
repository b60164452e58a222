"""Step 10's comparison: the same loop launched as a Kubeflow TrainJob and by Ray Train, measured.

    comparison = await run_comparison(settings)     # both runs, then saved in the workspace
    latest_comparison(settings)                     # the newest saved one (None if never run)
    comparison.rows() / comparison.as_note()        # the table, the note's text

Both sides run on the embedded cluster through the Cluster protocol (`connect(settings)`): a
TrainJob and a RayJob made from the lesson's manifests, on a volume of the comparison's own
(`cmp-<time>`). Each makes one run of the plan (same model, data and steps); the same observer
follows its merged logs, kills one worker pod at the same step (`kill_pod`) and measures launch to
first step, recovery, steps lost, final loss and wall time. The newest comparison's jobs and
volume stay on the cluster for a look (`kfcockpit logs cmp-...-ray`); older ones are deleted.
Importing this package loads neither torch nor ray.
"""

from __future__ import annotations

from backend.compare.figures import Comparison, ComparisonPlan, Measurement
from backend.compare.run import check_plan, run_comparison
from backend.compare.store import latest_comparison, save_comparison

__all__ = ["Comparison", "ComparisonPlan", "Measurement", "latest_comparison", "run_comparison",
           "save_comparison", "check_plan"]
