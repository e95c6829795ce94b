"""The hypothesis settings of the generated-graph properties: reproducible, no deadline."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def seeded(max_examples: int) -> settings:
    """``max_examples`` cases, the same on every run and machine (derandomized, no example
    database), without deadlines or the health checks that large generated graphs trip."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
