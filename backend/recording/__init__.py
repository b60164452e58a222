"""Record and replay a job as the cockpit watches it (DESIGN.md, "A job, as the cockpit knows it").

A recording is what the Cluster protocol's methods returned for one job, with their times: the
watches' items (jobs, pods, nodes, Events), the merged logs' batches, and the reads the cockpit
repeats (usage, checkpoints, metrics, run records). `format` writes and reads the file,
`recorder` records from any Cluster, `playhead` is the replay's clock (injectable: tests play a
recording without waiting), `replay` is the read-only Cluster that plays one back, so every view
works on it unchanged. Recorded at the protocol boundary, so a new protocol call is one more
stream or read to record, not a new format.
"""
