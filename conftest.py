"""The whole suite's hook (how pytest-xdist shares the tests among its workers) and the one
fixture every folder's tests share: a real PostgreSQL (``postgres_url``).

CI runs ``pytest -n 4 --dist loadgroup``. Each test file is a group of its own (its tests
share its module's servers), except the tests that start a local Ray cluster: those are one
group, so one worker starts the clusters, one after another as a serial run does, instead
of up to one per worker at once (each start costs seconds of CPU on a two-core machine).
A file's other tests stay in the file's group: the Ray group is the run's longest, and
carrying a whole file's local tests along made it longer still.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agent_channel_postgres.testing import TemporaryServer

RAY_FIXTURES = frozenset({"cluster", "address", "pool", "agent_host"})
"""Fixtures that start a cluster (``agent_host`` does for its ``[ray]`` parameter)."""


def _uses_ray(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("agent_host") == "local":
        return False  # the [local] half of a test run on both hosts starts no cluster
    return item.nodeid.startswith("packages/ray-runtime/") or bool(
        RAY_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ray = [item for item in items if _uses_ray(item)]
    rest = [item for item in items if not _uses_ray(item)]
    for item in ray:
        item.add_marker(pytest.mark.xdist_group("ray"))
        item.user_properties.append(("group", "ray"))  # for the summary below
    for item in rest:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    # xdist hands out groups in the order they first appear (--no-loadscope-reorder, in
    # pyproject.toml): the Ray group, the run's longest, first; then the files as collected,
    # the ACP suites (heavy) before the packages' unit tests (light), which fill the tail.
    items[:] = ray + rest


_busy: dict[str, float] = {}
"""Seconds each xdist worker spent in tests (setup, call, teardown), read on the controller."""
_ray_worker: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)  # set on the controller: the worker that ran it
    if node is None:
        return
    worker = str(node.gateway.id)
    _busy[worker] = _busy.get(worker, 0.0) + report.duration
    if ("group", "ray") in report.user_properties:
        _ray_worker.add(worker)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line: each worker's busy time, to see what bounds CI's time (the Ray group's
    worker, or all of them)."""
    if _busy:
        each = ", ".join(
            f"{w} {s:.0f} s{' (Ray group)' if w in _ray_worker else ''}"
            for w, s in sorted(_busy.items())
        )
        terminalreporter.write_line(f"time in tests per worker: {each}")


# -- a real PostgreSQL, for the PostgreSQL store's tests and the ACP tests that use it ---------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryServer]:
    """A throwaway PostgreSQL server on the loopback, one per test process (an xdist worker
    starts its own, so workers share nothing); stopped and removed at the end. Skipped where
    the binaries are missing, except under CI (``CI=true``), where that is a failure."""
    from agent_channel_postgres.testing import TemporaryServer, find_binaries

    if find_binaries() is None:
        reason = "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or PATH)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must run the PostgreSQL store's tests", pytrace=False)
        pytest.skip(reason)
    with TemporaryServer(fsync=False) as server:  # the tests kill clients, never the server
        yield server


@pytest.fixture
def postgres_url(postgres_server: TemporaryServer) -> str:
    """The URL of a new, empty database on :func:`postgres_server`, for one test."""
    return postgres_server.create_database(f"t{next(_DATABASES)}")


_DATABASES = itertools.count(1)
