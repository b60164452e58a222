"""Kubernetes resource quantities as the API writes them (apimachinery's resource.Quantity)."""

from __future__ import annotations

import pytest

from backend.quantity import quantity


@pytest.mark.parametrize("text, value", [("1", 1), ("500m", 0.5), ("2Gi", 2 * 2**30), ("1G", 1e9),
                                         ("1.5", 1.5), ("1e3", 1000), (None, 0), (2, 2),
                                         ("1500000n", 0.0015), ("250u", 0.00025)])  # metrics-server's CPU
def test_quantities(text, value):
    assert quantity(text) == value


def test_bad_quantity():
    with pytest.raises(ValueError):
        quantity("one cpu")
