"""Execution variables and routes: state that what is built on a channel keeps per execution.

trio keeps per-run state in ``RunVar``\\ s rather than new fields on its runner; an
execution here does the same. Children, questions, a store's sections and an adapter each
keep what they need per execution in an :class:`ExecutionVar` of their own, so the
channel never grows a slot for them. A :class:`Route` is the one mechanism that decides
who answers an execution's requests of a kind (approvals, questions): the last routed
wins and its release restores the one before.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import Lock
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar, cast

if TYPE_CHECKING:
    from ._abc import Approver, Resolver
    from ._channel import AgentChannel

T = TypeVar("T")


class ExecutionVar(Generic[T]):
    """A value per execution (per channel), like a context variable scoped to one execution.

    Read and set it from the execution's loop; a value set on the inert channel outside
    any execution does not stick. Kept until the channel itself is dropped.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, channel: AgentChannel, default: T) -> T:
        """The execution's value, or ``default`` when none was set."""
        return cast("T", channel._vars.get(self, default))  # pyright: ignore[reportPrivateUsage]

    def set(self, channel: AgentChannel, value: T) -> None:
        channel._vars[self] = value  # pyright: ignore[reportPrivateUsage]

    def delete(self, channel: AgentChannel) -> None:
        """Forget the execution's value (nothing if it has none)."""
        channel._vars.pop(self, None)  # pyright: ignore[reportPrivateUsage]

    def __repr__(self) -> str:
        return f"<ExecutionVar {self.name}>"


class Route(Generic[T]):
    """Who answers one kind of request of an execution (see the module). Safe from any thread."""

    __slots__ = ("call",)

    def __init__(self, call: str) -> None:
        self.call = call
        """The public call that routes it, for error messages (``route_approvals()``)."""

    def add(self, channel: AgentChannel, value: T) -> Callable[[], None]:
        """Route ``value`` onto ``channel`` until the returned release is called (once is
        enough; again does nothing)."""
        if not callable(value):
            raise TypeError(f"{self.call} takes an async callable, not {value!r:.60}")
        routes: dict[object, tuple[T, ...]] = channel._vars  # pyright: ignore[reportPrivateUsage, reportAssignmentType]
        lock = channel._lock  # pyright: ignore[reportPrivateUsage]
        with lock:
            routes[self] = (*routes.get(self, ()), value)
        return _Release(self, routes, lock, value)

    def current(self, channel: AgentChannel) -> T | None:
        """The last one routed and not released, if any."""
        routed = cast("tuple[T, ...]", channel._vars.get(self, ()))  # pyright: ignore[reportPrivateUsage]
        return routed[-1] if routed else None

    def __repr__(self) -> str:
        return f"<Route {self.call}>"


class _Release(Generic[T]):
    """Takes one routed value back (the last one routed, if it is there more than once)."""

    __slots__ = ("_lock", "_route", "_routes", "_value")

    def __init__(
        self, route: Route[T], routes: dict[object, tuple[T, ...]], lock: Lock, value: T
    ) -> None:
        self._route, self._lock, self._value = route, lock, value
        self._routes: dict[object, tuple[T, ...]] | None = routes  # None once released

    def __call__(self) -> None:
        with self._lock:
            routes = self._routes
            if routes is None:
                return  # released already
            routed = routes.get(self._route, ())
            value = self._value
            if routed and routed[-1] is value:  # the common case: the latest goes first
                routes[self._route] = routed[:-1]
            elif value in routed:
                i = len(routed) - 1 - routed[::-1].index(value)
                routes[self._route] = routed[:i] + routed[i + 1 :]
            self._routes = None


class Link(NamedTuple):
    """An execution's place below another: what a request climbs by (``lowlevel.link``)."""

    parent: AgentChannel
    id: str
    """The execution's id among its parent's (a child's id)."""
    name: str


APPROVALS: Route[Approver] = Route("route_approvals()")
"""Who answers the execution's approvals (``AgentRef.route_approvals``); over the opener's."""
QUESTIONS: Route[Resolver] = Route("route_questions()")
"""Who answers the questions of a top-level execution and its children
(``AgentRef.route_questions``)."""
SECTIONS: ExecutionVar[dict[str, Callable[[], str]]] = ExecutionVar("sections")
