"""The embedded cluster for pipeline runs: a fresh state root per test and a controller (with every
process it started) always stopped at the end — the local cluster's own fixtures."""

from tests.local.conftest import cluster, home  # noqa: F401  (fixtures)
