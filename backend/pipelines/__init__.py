"""The lesson's Kubeflow Pipelines v2 pipelines: components, platform settings, compile, runs.

What callers use (the lesson engine, the CLI, the TUI) lives in `runs` (run a pipeline, get a
`PipelineRunResult` with each task's outcome and log) and `compiled` (compile to a pinned file,
load and check one). Nothing here imports kfp at import time: `definition`, `components` and the
runners import it when called, so the cockpit starts without it.
"""
