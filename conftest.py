"""The whole suite's hook (how pytest-xdist shares the tests among its workers) and the one
fixture every folder's tests share: a real PostgreSQL (``postgres_url``).

CI runs ``pytest -n 4 --dist loadgroup``. Each test file is a group of its own (its tests
share its module's servers), except the tests that start a local Ray cluster: those are one
group, so one worker starts the clusters, one after another as a serial run does, instead
of up to one per worker at once (each start costs seconds of CPU on a two-core machine).
A file's other tests stay in the file's group (but for the files of :data:`RAY_FILES`):
the Ray group is the run's longest, and carrying a whole file's local tests along made it
longer still. The groups are this file's scheduler's (:func:`group_of`), not xdist's marks,
which pytest 9.2 no longer reads; the Ray group goes out first.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agent_channel_postgres.testing import TemporaryServer
    from xdist.workermanage import Producer

RAY_FIXTURES = frozenset({"cluster", "address", "pool", "agent_host"})
"""Fixtures that start a cluster (``agent_host`` does for its ``[ray]`` parameter)."""
RAY_FILES = ("packages/ray-runtime/", "tests/acp/attach/test_serve_ray.py")
"""Where every test starts a cluster; elsewhere, a test's ``ray`` parameter says so."""
OWN_CLUSTERS = tuple(
    f"packages/ray-runtime/tests/test_{name}.py"
    for name in ("node_death", "security", "cluster", "example")
)
"""Files whose tests start clusters of their own in other processes (heads, nodes, owners):
their group runs beside the one that shares this process's cluster."""
RAY_GROUPS = ("ray-nodes", "ray")


def _uses_ray(item: pytest.Item) -> bool:
    """Whether the test starts (or joins) a local Ray cluster, by its fixtures."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("agent_host") == "local":
        return False  # the [local] half of a test run on both hosts starts no cluster
    return item.nodeid.startswith("packages/ray-runtime/") or bool(
        RAY_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def group_of(nodeid: str) -> str:
    """A test's xdist group, from its id alone (all the controller sees): ``ray-nodes``
    for :data:`OWN_CLUSTERS`, ``ray`` for the other tests that start a cluster (they share
    one in their worker), else its file. Collection checks every test that
    :func:`_uses_ray` is in it, so a new Ray test outside :data:`RAY_FILES` without a
    ``ray`` parameter is a collection error, not a second cluster started beside the first."""
    file, _, rest = nodeid.partition("::")
    params = rest[rest.index("[") + 1 : -1] if rest.endswith("]") and "[" in rest else ""
    if file.startswith(OWN_CLUSTERS):
        return "ray-nodes"
    if file.startswith(RAY_FILES) or "ray" in params.split("-"):
        return "ray"
    return file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> object:
    """``--dist loadgroup`` by :func:`group_of`. xdist's own marks its groups by editing
    each test's id, which pytest 9.2's structured ids ignore (pytest-xdist#1386): every
    test became a group of its own, module servers started on every worker and Ray
    clusters on several at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ray: list[pytest.Item] = []
    rest: list[pytest.Item] = []
    for item in items:
        group = group_of(item.nodeid)
        in_group = group in RAY_GROUPS  # a Ray file's other tests ride along
        if _uses_ray(item) and not in_group:
            raise pytest.UsageError(
                f"{item.nodeid} starts a Ray cluster outside the Ray group: add its file to "
                "RAY_FILES in conftest.py, or give it a `ray` parameter"
            )
        (ray if in_group else rest).append(item)
        if in_group:
            item.user_properties.append(("group", group))  # for the summary below
    # xdist hands out groups in the order they first appear (--no-loadscope-reorder, in
    # pyproject.toml): the Ray group, the run's longest, first; then the files as collected,
    # the ACP suites (heavy) before the packages' unit tests (light), which fill the tail.
    # In the `ray` group the ACP modules (a cluster each, shut down after) go before the
    # Ray package's tests (one cluster for the session): a module reusing the session's
    # cluster sees what earlier tests left running on it, and the ACP tests count what runs.
    ray.sort(
        key=lambda item: (
            group_of(item.nodeid) != "ray-nodes",
            item.nodeid.startswith("packages/ray-runtime/"),
        )
    )
    items[:] = ray + rest


_busy: dict[str, float] = {}
"""Seconds each xdist worker spent in tests (setup, call, teardown), read on the controller."""
_ray_worker: dict[str, str] = {}
"""The Ray group each worker ran, if any."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)  # set on the controller: the worker that ran it
    if node is None:
        return
    worker = str(node.gateway.id)
    _busy[worker] = _busy.get(worker, 0.0) + report.duration
    for key, value in report.user_properties:
        if key == "group":
            _ray_worker[worker] = str(value)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line: each worker's busy time, to see what bounds CI's time (the Ray group's
    worker, or all of them)."""
    if _busy:
        each = ", ".join(
            f"{w} {s:.0f} s{f' ({_ray_worker[w]})' if w in _ray_worker else ''}"
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
