"""The attempt ledger (`kfcockpit goodput JOB --attempts`): one row per attempt of a job's group,
its start, first step, end and why it ended, and the restarts used of the JobSet's budget.

Built after the fact from what the platform keeps: the pods still listed (the newest attempt's,
with their exit codes), the Events (every pod the Job controller created, where the scheduler put
it, which pods were deleted, evicted, or whose node was lost), and the workers' lines (the run
record on the volume) for each group's first step. Pure rules in `rows.py`; `read.py` reads
through the Cluster protocol only. Kept apart from backend/goodput, whose model it only feeds.
"""
