"""Everything that is not drawing: models, the Cluster protocol and its two implementations,
the lesson engine, pipelines. Never imports `tui`. Heavy libraries (torch, ray, kfp, kubernetes)
are imported inside the functions that need them, so the UI process starts light."""
