"""Where the shell-verb suite's agent runs: inside ``serve`` (``local``), or on a Ray cluster
that ``serve --ray`` joins (``ray``), so one test proves a verb on both.

:func:`agent_host` is the parametrised fixture; ``host.serving(rt, agent, *args)`` is
``serving(rt, "--agent", agent, *args)`` locally, and on Ray: ``--count`` executions of the
same factory launched on a pooled host actor, ``--input`` posted to each first (as ``serve``
does), then ``serve --ray`` with the remaining arguments. The test's executions are
cancelled from Ray's side when it ends (an outer cancellation), and the registry has listed
them ended before the next test starts, so each test sees its own executions alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_channel import UserMessage, agent_channel, load_spec
from conftest import GUARD
from serving import POLL, Serving, serving


@dataclass
class Host:
    kind: str
    address: str | None = None
    pool: Any = None

    @contextmanager
    def serving(self, rt: Path, agent: str, *args: str) -> Iterator[Serving]:
        if self.kind == "local":
            with serving(rt, "--agent", agent, *args) as served:
                yield served
            return
        with ExitStack() as stack:
            rest = stack.enter_context(self.launched(agent, *args))
            yield stack.enter_context(serving(rt, "--ray", str(self.address), *rest, **ray_env()))

    @contextmanager
    def launched(self, agent: str, *args: str, **environ: str) -> Iterator[list[str]]:
        """``--count`` executions of ``agent`` on the cluster, ``--input`` posted to each,
        ``environ`` set on the worker; yields the arguments left for ``serve --ray``."""
        import agent_channel_ray as acr

        task, count, rest = _take(list(args))
        factory = load_spec(agent)
        refs = [
            acr.launch(
                run_agent, factory, task, environ, host=self.pool, title=_title(i, count), live=True
            )
            for i in range(count)
        ]
        try:
            yield rest
        finally:
            _cancel(refs)


async def run_agent(
    factory: Callable[[str | None], Callable[[], Any]],
    task: str | None,
    environ: dict[str, str] | None = None,
) -> Any:
    """What ``serve --agent`` runs, on a Ray worker (launched live, as ``serve`` runs its
    own): the factory's body, the task posted first."""
    os.environ.update(environ or {})
    body = factory(None)
    if task:
        agent_channel().ref().post(UserMessage(task, source="task"))
    return await body()


def ray_env() -> dict[str, str]:
    """What ``serve --ray`` needs to join: no uv runtime env, and the cluster's token mode
    (a local cluster turns it on, with the token in ``~/.ray``, as it starts)."""
    joined = {k: v for k, v in os.environ.items() if k.startswith("RAY_AUTH")}
    return {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", **joined}


def _title(i: int, count: int) -> str:
    """Titled as ``serve`` titles its executions (``#N`` when there are several)."""
    return f"on ray #{i + 1}" if count > 1 else "on ray"


def _take(args: list[str]) -> tuple[str | None, int, list[str]]:
    """``--input`` and ``--count`` out of ``serve``'s arguments (Ray's side takes them)."""
    task: str | None = None
    count = 1
    if "--input" in args:
        i = args.index("--input")
        task = args[i + 1]
        del args[i : i + 2]
    if "--count" in args:
        i = args.index("--count")
        count = int(args[i + 1])
        del args[i : i + 2]
    return task, count, args


def _cancel(refs: list[Any]) -> None:
    import agent_channel_ray as acr
    import ray

    for ref in refs:
        ray.cancel(ref.run)
    ids = {ref.execution_id for ref in refs}
    deadline = time.monotonic() + GUARD
    while any(r.status == "running" for r in acr.executions() if r.execution_id in ids):
        assert time.monotonic() < deadline, "the test's executions did not end"
        time.sleep(POLL)  # polling the registry, an observable state


LOCAL = Host("local")
"""The default: the agent runs in ``serve``."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, Any]]:
    """A local cluster in this process (its GCS address) and one pooled host actor."""
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # or workers die at start under uv
    ray = pytest.importorskip("ray")
    acr = pytest.importorskip("agent_channel_ray")
    import agents
    import hosts

    ray.cloudpickle.register_pickle_by_value(agents)  # the workers cannot import the tests
    ray.cloudpickle.register_pickle_by_value(hosts)
    ours = not ray.is_initialized()  # a session's cluster (the Ray package's tests) is kept
    acr.start_cluster(num_cpus=2)
    try:
        yield ray.get_runtime_context().gcs_address, acr.ExecutionHost.remote()
    finally:
        if ours:
            ray.shutdown()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def agent_host(request: pytest.FixtureRequest) -> Host:
    """The suite's agent host: each test that takes it runs in ``serve`` and on Ray."""
    if request.param == "local":
        return LOCAL
    address, pool = request.getfixturevalue("cluster")
    return Host("ray", address, pool)
