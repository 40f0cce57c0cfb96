"""Discovery (A1): where serving processes say where they listen, and who reads it.

Each ``agent-channel-acp serve`` process keeps one JSON record, ``<pid>.json``,
in a per-user runtime directory: ``$AGENT_CHANNEL_RUNTIME_DIR`` if set (tests,
unusual setups), else ``$XDG_RUNTIME_DIR/agent-channel``, else
``<tempdir>/agent-channel-<uid>``. The directory must be ours and closed to
everyone else (mode 0700): a directory another user made, or one the group or
the world can enter, is refused with :class:`RuntimeDirError` instead of used,
since a TCP record holds the token that lets a client in.

Records are written atomically (a 0600 temporary file renamed over the old
one), so a reader sees a whole record or the previous one. A record whose
process is gone (the pid is dead, or was reused by a process that started
later) is swept, with its unix socket, whenever a server starts or anyone
lists. No ``acp`` import here.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ._frames import Recorded, RecordFile, Transport, WsTransport


RUNTIME_ENV = "AGENT_CHANNEL_RUNTIME_DIR"
RECORD_VERSION = 1
TOKEN_KEY = "agent_channel.token"
"""The ``initialize`` ``_meta`` key a TCP client puts the discovery record's token under."""
_SUFFIX = ".json"


class RuntimeDirError(RuntimeError):
    """The runtime directory cannot be trusted (wrong owner or mode) or made."""


def runtime_dir(*, create: bool = True) -> Path:
    """The checked per-user runtime directory (made 0700 if missing and ``create``)."""
    env = os.environ.get(RUNTIME_ENV)
    if env:
        path = Path(env)
    elif xdg := os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(xdg) / "agent-channel"
    else:
        path = Path(tempfile.gettempdir()) / f"agent-channel-{os.getuid()}"
    if create:
        try:
            path.mkdir(mode=0o700, parents=bool(env))
        except FileExistsError:
            pass
        except OSError as e:
            why = e.strerror or e
            raise RuntimeDirError(f"cannot make the runtime directory {path}: {why}") from None
    elif not os.path.lexists(path):
        return path  # nothing serves yet: readers find no records
    check_private_dir(path)
    return path


def check_private_dir(path: Path) -> None:
    """Refuse ``path`` unless it is a real directory owned by us with no group/other access."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise RuntimeDirError(f"the runtime directory {path} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeDirError(f"the runtime directory {path} is not a directory")
    if st.st_uid != os.getuid():
        raise RuntimeDirError(
            f"the runtime directory {path} belongs to uid {st.st_uid}, not to us "
            f"(uid {os.getuid()}): refusing to use it"
        )
    if st.st_mode & 0o077:
        raise RuntimeDirError(
            f"the runtime directory {path} has mode {stat.S_IMODE(st.st_mode):04o}; "
            "it must be 0700 (chmod 700 it, or remove it)"
        )


def process_start(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, from /proc), or None where unknown.

    Stored in the record so a pid reused by a later process does not look alive.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(text.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


def alive(pid: int, started: int | None) -> bool:
    """Whether the process that wrote a record still runs."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; not ours to signal
    if started is None:
        return True
    now = process_start(pid)
    return now is None or now == started


@dataclass(slots=True)
class Record:
    """One serving process: where it listens and what it serves."""

    pid: int
    transport: Transport
    """``{"kind": "unix", "path": ...}`` or ``{"kind": "tcp", "host", "port", "token"}``."""
    started_at: float = field(default_factory=time.time)
    pid_start: int | None = None
    executions: list[Recorded] = field(default_factory=list["Recorded"])
    path: Path | None = None
    """Where the record lives (set when read or published)."""
    ws: WsTransport | None = None
    """The WebSocket listener beside ``transport`` (``serve --ws``), token included."""
    named: str | None = None
    """The server as the user named it (``--server URL``); None for a record read from the
    discovery directory, whose pid and start are the server's own."""

    def to_json(self) -> RecordFile:
        data: RecordFile = {
            "version": RECORD_VERSION,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "started_at": self.started_at,
            "transport": self.transport,
            "executions": self.executions,
        }
        if self.ws is not None:
            data["ws"] = self.ws
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object], path: Path | None = None) -> Record:
        """A record as read from its file, whose transport and listing are checked for their
        outer shape only: a process that wrote them is ours."""
        transport = data["transport"]
        if not isinstance(transport, dict):
            raise ValueError("bad transport")
        transport = cast("dict[str, object]", transport)
        if transport.get("kind") not in ("unix", "tcp", "ws"):
            raise ValueError("bad transport")
        ws = data.get("ws")
        if ws is not None and not (isinstance(ws, dict) and "url" in ws):
            raise ValueError("bad ws entry")
        executions: object = data.get("executions") or []
        if not isinstance(executions, list):
            raise ValueError("bad executions")
        pid_start = data.get("pid_start")
        return cls(
            pid=int(cast("int", data["pid"])),
            transport=cast("Transport", dict(transport)),
            started_at=float(cast("float", data.get("started_at") or 0.0)),
            pid_start=None if pid_start is None else int(cast("int", pid_start)),
            executions=[
                cast("Recorded", dict(cast("dict[str, object]", e)))
                for e in cast("list[object]", executions)
                if isinstance(e, dict)
            ],
            path=path,
            ws=cast("WsTransport", dict(cast("dict[str, object]", ws))) if ws else None,
        )

    def name(self) -> str:
        """The server for people, in an error: as the user named it, else by its pid."""
        return self.named or f"pid {self.pid} ({self.where()})"

    def where(self) -> str:
        """Where it listens, for people: a socket path or host:port."""
        t = self.transport
        if t["kind"] == "ws":
            return t["url"]
        return str(t["path"]) if t["kind"] == "unix" else f"{t['host']}:{t['port']}"


class TokenFileError(RuntimeError):
    """A token file cannot be read, or others could read it."""


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (``--token-file``), refused if the group or others can read it."""
    try:
        st = os.stat(path)
        text = Path(path).read_text().strip()
    except OSError as e:
        raise TokenFileError(f"cannot read the token file {path}: {e.strerror or e}") from None
    if st.st_mode & 0o077:
        raise TokenFileError(
            f"the token file {path} has mode {stat.S_IMODE(st.st_mode):04o}: others could "
            "read it (chmod 600 it)"
        )
    if not text:
        raise TokenFileError(f"the token file {path} is empty")
    return text


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, the file 0600 from its first byte."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


class Publication:
    """This process's record: written at start, rewritten when its executions change."""

    def __init__(
        self,
        directory: Path,
        transport: Transport,
        ws: WsTransport | None = None,
        started_at: float | None = None,
    ) -> None:
        pid = os.getpid()
        self.record = Record(pid, transport, pid_start=process_start(pid), ws=ws)
        if started_at is not None:  # the server's own start, which it tells its clients
            self.record.started_at = started_at
        self.record.path = directory / f"{pid}{_SUFFIX}"
        self._written: str | None = None

    def write(self, executions: list[Recorded] | None = None) -> bool:
        """Write the record if it changed; True if it was written."""
        if executions is not None:
            self.record.executions = executions
        text = json.dumps(self.record.to_json(), indent=1, sort_keys=True)
        if text == self._written:
            return False
        assert self.record.path is not None
        write_private(self.record.path, text)
        self._written = text
        return True

    def remove(self) -> None:
        if self.record.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.record.path.unlink()


def read_records(directory: Path) -> list[Record]:
    """Every record in ``directory`` (unreadable or malformed ones skipped), oldest first."""
    out: list[Record] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return out
    for name in names:
        if name.startswith(".") or not name.endswith(_SUFFIX):
            continue
        path = directory / name
        try:
            data = json.loads(path.read_text())
            out.append(Record.from_json(data, path))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    out.sort(key=lambda r: r.started_at)
    return out


def sweep(directory: Path) -> list[Record]:
    """Remove the records (and unix sockets) of dead processes; the live records."""
    live: list[Record] = []
    for record in read_records(directory):
        if alive(record.pid, record.pid_start):
            live.append(record)
            continue
        if record.transport["kind"] == "unix":
            _remove_socket(Path(str(record.transport["path"])))
        if record.path is not None:
            with contextlib.suppress(FileNotFoundError):
                record.path.unlink()
    return live


_remote: list[Record] = []  # ``--server URL``: the one server the clients of this process reach


def use_remote(record: Record | None) -> None:
    """Make :func:`live_records` answer ``record`` alone (``--server``), or the local ones again."""
    _remote[:] = [record] if record is not None else []


def live_records(directory: Path | None = None) -> list[Record]:
    """The records of serving processes that still run (dead ones swept on the way), or the
    ``--server`` one given to :func:`use_remote`."""
    if _remote:
        return list(_remote)
    return sweep(directory if directory is not None else runtime_dir(create=False))


def _remove_socket(path: Path) -> None:
    """Unlink ``path`` if it is a socket (never anything else)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()
