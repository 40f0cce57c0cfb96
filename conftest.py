"""The whole suite's one hook: how pytest-xdist shares the tests among its workers.

CI runs ``pytest -n 4 --dist loadgroup``. Each test file is a group of its own (its tests
share its module's servers), except the files that start a local Ray cluster: those are one
group, so one worker starts the clusters, one after another as a serial run does, instead
of up to one per worker at once (each start costs seconds of CPU on a two-core machine).
"""

from __future__ import annotations

import pytest

RAY_FIXTURES = frozenset({"cluster", "address", "pool", "agent_host"})
"""Fixtures that start a cluster (``agent_host`` does for its ``[ray]`` parameter)."""


def _uses_ray(item: pytest.Item) -> bool:
    return item.nodeid.startswith("packages/ray-runtime/") or bool(
        RAY_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    ray_files = {file_of(item) for item in items if _uses_ray(item)}
    for item in items:
        path = file_of(item)
        item.add_marker(pytest.mark.xdist_group("ray" if path in ray_files else path))
