"""A throwaway PostgreSQL cluster for tests: initdb into a temporary folder, a server on a free loopback port with
its unix socket in that folder, stopped (and the folder removed) at the end.

No container and no mock: Debian's `postgresql` package's own binaries (`make pytest` installs the package when
`initdb` is missing). The server runs as the `postgres` system user when the tests run as root (initdb refuses
root, and CI runs as root). fsync stays on: the durability tests rely on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MISSING", "Cluster", "find_bindir", "running_cluster"]

MISSING = (
    "PostgreSQL's server binaries (initdb, pg_ctl) were not found: the store tests start a throwaway cluster of "
    "their own. Run `make test` (as root it installs Debian's package) or `apt-get install -y postgresql`."
)
USER = "hatp"


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl are: Debian's versioned folder (newest first), else PATH."""
    for initdb in sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parts, reverse=True):
        if (initdb.parent / "pg_ctl").exists():
            return initdb.parent
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One initdb'd cluster under a temporary folder. `url(db)` is a libpq URL for database `db`."""

    def __init__(self, bindir: Path, *, settings: str = "") -> None:
        self.bindir = bindir
        self.settings = settings  # extra server options, e.g. "-c fsync=off" for a test that must be refused
        self.root = Path(tempfile.mkdtemp(prefix="hatp-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.root, "postgres")
        self._databases = 0

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "-E", "UTF8", "--no-instructions")

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200 {self.settings}"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", *extra, action)

    def start(self) -> None:
        for _attempt in range(5):  # a port picked free may be taken before the server binds it
            self.port = _free_port()
            try:
                self._ctl("start")
                return
            except RuntimeError:
                if _attempt == 4:
                    raise

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m MODE` on the same port: fast rolls back open transactions and drops every
        connection; immediate is a crash (recovery from the WAL on start)."""
        self._ctl("restart", "-m", mode)

    def checkpoint(self) -> None:
        """Flush everything written so far (CHECKPOINT), as an operator does before a planned restart: a fast
        restart's outage is then the restart's, not its shutdown checkpoint writing and syncing every file the
        session dirtied (each database earlier tests created), which can take longer than a pool waits."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def start_again(self) -> None:
        """Start the stopped server on the port it had (its clients' URLs still name it); returns once it accepts
        connections."""
        self._ctl("start")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        self._databases += 1
        name = f"t{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(settings: str = "") -> Iterator[Cluster]:
    """Raises RuntimeError with `MISSING` when the binaries are not installed (never a silent skip)."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError(MISSING)
    cluster = Cluster(bindir, settings=settings)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()
