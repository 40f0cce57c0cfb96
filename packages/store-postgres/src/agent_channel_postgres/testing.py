"""A throwaway PostgreSQL server for tests and benchmarks: :class:`TemporaryServer`.

It runs the PostgreSQL binaries found on the machine (``initdb``, ``postgres``) in a
temporary folder, listening on the loopback only (no Unix socket), on a free port, with a
random password; :meth:`TemporaryServer.stop` ends it and removes the folder. Run as root
(``initdb`` refuses root), the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

__all__ = ["START_SECONDS", "TemporaryServer", "find_binaries"]

START_SECONDS = 60.0
"""How long a server may take to accept connections before :meth:`~TemporaryServer.start` fails."""


def find_binaries() -> Path | None:
    """The folder of ``initdb`` and ``postgres``: ``$AGENT_CHANNEL_PG_BIN``, else Debian's
    newest ``/usr/lib/postgresql/*/bin``, else the ``PATH``'s; ``None`` if there is none."""
    given = os.environ.get("AGENT_CHANNEL_PG_BIN")
    if given:
        return Path(given) if (Path(given) / "initdb").is_file() else None
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryServer:
    """A PostgreSQL server of its own in a temporary folder; a context manager.

    ``fsync=False`` (tests) skips the server's flushes; leave it on to measure. ``folder``:
    where its temporary folder is made (the system's temporary directory by default).
    """

    def __init__(
        self, binaries: Path | None = None, *, fsync: bool = True, folder: Path | None = None
    ) -> None:
        found = binaries or find_binaries()
        if found is None:
            raise FileNotFoundError("no PostgreSQL binaries (initdb, postgres) on this machine")
        self.binaries = found
        self.fsync = fsync
        self.base = folder
        self.port = 0
        self.password = secrets.token_hex(16)
        self._folder: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._user = "postgres" if os.geteuid() == 0 else None  # initdb refuses root

    def url(self, dbname: str = "postgres") -> str:
        """The URL of database ``dbname`` on this server."""
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its URL."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def start(self) -> TemporaryServer:
        folder = Path(tempfile.mkdtemp(prefix="agent-channel-pg-", dir=self.base))
        self._folder = folder
        try:
            self._start(folder)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, folder: Path) -> None:
        data = folder / "data"
        pwfile = folder / "pw"
        pwfile.write_text(self.password + "\n")
        if self._user is not None:
            shutil.chown(folder, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        os.chmod(pwfile, 0o600)
        made = subprocess.run(
            [
                str(self.binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--pwfile",
                str(pwfile),
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            user=self._user,
            group=self._user,
            extra_groups=None if self._user is None else [],
        )
        if made.returncode != 0:  # e.g. a folder the postgres user cannot reach
            raise RuntimeError(f"initdb failed: {made.stderr.decode(errors='replace').strip()}")
        for _ in range(5):  # a port taken between the probe and the bind: another
            self.port = _free_port()
            self._proc = subprocess.Popen(
                [
                    str(self.binaries / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    f"fsync={'on' if self.fsync else 'off'}",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=32MB",
                ],
                stdout=subprocess.DEVNULL,
                stderr=open(folder / "log", "wb"),  # noqa: SIM115 - the child's, closed with it
                # in its caller's process group: a Ctrl-C there stops it too (a fast shutdown)
                user=self._user,
                group=self._user,
                extra_groups=None if self._user is None else [],
            )
            if self._ready():
                return
        raise RuntimeError(f"PostgreSQL did not start: {(folder / 'log').read_text()[-2000:]}")

    def _ready(self) -> bool:
        """Whether the server accepts a login before it exits or :data:`START_SECONDS` pass."""
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
            except psycopg.OperationalError:
                time.sleep(0.05)  # polling a server's start: no event to wait on
                continue
            return True
        return False

    def stop(self) -> None:
        """Stop the server (a fast shutdown) and remove its folder."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> TemporaryServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
