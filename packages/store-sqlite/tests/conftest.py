import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def eager_thread_switches() -> Iterator[None]:
    """Switch threads every 10 µs instead of every 5 ms, so race windows are really hit.

    With the default interval a producer thread rarely runs in the microseconds between
    the consumer's drain and its next scope; with this one the 0.1.0 channel lost ~9% of
    the stops in the races hammer.
    """
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
