from tests.local.conftest import cluster, home  # noqa: F401  (fixtures)
