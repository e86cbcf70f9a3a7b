"""Throwaway PostgreSQL clusters for the test suite.

The PostgreSQL tests must run on a fresh machine without any set-up.  This module
finds the PostgreSQL server binaries, starts a private cluster in a temporary
directory on a free ``127.0.0.1`` port and tears it down again.  When the suite runs
as root (as CI does) the server is run as the unprivileged ``nobody`` user, because
``initdb`` and ``postgres`` refuse to run as root.

Public API:

* :func:`find_pg_bin` -- the directory holding ``initdb``, ``pg_ctl`` and ``postgres``.
* :class:`Cluster` -- start/stop a throwaway cluster (also a context manager);
  ``Cluster.url`` is a SQLAlchemy URL of its ``memdir_test`` database.
* :func:`create_database` -- (re)create an isolated database and return its URL.
* :func:`postgres_test_url` -- generator for a session-scoped pytest fixture that
  applies the suite's skip/fail rule (see its docstring).

No pytest import is needed to use :class:`Cluster`; pytest is imported lazily only by
:func:`postgres_test_url`.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL, make_url

__all__ = [
    "DATABASE_NAME",
    "ENV_URL",
    "Cluster",
    "ClusterError",
    "create_database",
    "find_pg_bin",
    "is_ci",
    "postgres_test_url",
]

#: Environment variable naming an existing server to use instead of a throwaway one.
ENV_URL = "MEMDIR_TEST_POSTGRES_URL"
#: Optional environment variable naming the directory of the server binaries.
ENV_BIN = "MEMDIR_TEST_PG_BIN"
#: Name of the database that :class:`Cluster` creates.
DATABASE_NAME = "memdir_test"

_SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
_UNPRIVILEGED_USER = "nobody"
_START_ATTEMPTS = 3
_START_TIMEOUT_S = 60
_LOG_TAIL_LINES = 40


class ClusterError(RuntimeError):
    """A throwaway cluster could not be created or started."""


def is_ci() -> bool:
    """Whether we run under CI (``CI=true``), where PostgreSQL tests must never skip."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


# --------------------------------------------------------------------------- binaries


def _has_server_programs(directory: Path) -> bool:
    return all(
        (directory / name).is_file() and os.access(directory / name, os.X_OK)
        for name in _SERVER_PROGRAMS
    )


def _version_key(bin_dir: str) -> tuple[int, ...]:
    # /usr/lib/postgresql/<version>/bin -> (15,) or (9, 6)
    version = Path(bin_dir).parent.name
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (-1,)


def find_pg_bin() -> Path | None:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None.

    Looks at ``$MEMDIR_TEST_PG_BIN`` first, then every directory on ``PATH`` (the first
    one holding all three programs wins), then ``/usr/lib/postgresql/*/bin`` (Debian's
    layout), picking the highest version.
    """
    override = os.environ.get(ENV_BIN)
    if override:
        return Path(override) if _has_server_programs(Path(override)) else None
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if entry and _has_server_programs(Path(entry)):
            return Path(entry)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        if _has_server_programs(Path(candidate)):
            return Path(candidate)
    return None


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _traversable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether every directory from ``/`` down to ``path`` can be entered by uid/gid."""
    path = path.resolve()
    for directory in [path, *path.parents]:
        st = directory.stat()
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _log_tail(logfile: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = logfile.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(server log is empty)"


def _psycopg_conninfo(url: str | URL) -> str:
    """Turn a SQLAlchemy URL (``postgresql+psycopg://...``) into a libpq URI."""
    parsed = make_url(url) if isinstance(url, str) else url
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def _sqlalchemy_url(url: str) -> URL:
    """Parse ``url``; a bare ``postgresql://`` URL is given the psycopg 3 driver."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


# --------------------------------------------------------------------------- cluster


class Cluster:
    """A throwaway PostgreSQL cluster in a temporary directory.

    Usage::

        with Cluster() as cluster:
            engine = sqlalchemy.create_engine(cluster.url)

    or ``cluster = Cluster(); cluster.start(); ...; cluster.stop()``.  ``start()``
    runs ``initdb`` (trust auth, superuser ``postgres``, UTF8, locale ``C.UTF-8`` or
    ``--no-locale`` where that locale is missing), starts the server on a free
    127.0.0.1 port with durability switched off, creates the ``memdir_test``
    database and the ``pg_trgm`` extension in it.  ``stop()`` stops the server
    (``-m immediate``) and removes the directory; it is also registered with
    :mod:`atexit` so an interrupted run does not leave a server behind.

    When running as root, every server program runs as ``nobody`` and the
    temporary directory is owned by that user.
    """

    def __init__(self, pg_bin: Path | None = None) -> None:
        found = pg_bin if pg_bin is not None else find_pg_bin()
        if found is None:
            raise ClusterError(
                "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH "
                "or in /usr/lib/postgresql/*/bin; install Debian's 'postgresql' package"
            )
        self.pg_bin: Path = found
        self.base_dir: Path | None = None
        self.port: int | None = None
        self.locale: str | None = None
        self.startup_seconds: float | None = None
        self._uid: int | None = None
        self._gid: int | None = None
        self._options: str | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(_UNPRIVILEGED_USER)
            except KeyError as exc:
                raise ClusterError(
                    f"running as root but there is no {_UNPRIVILEGED_USER!r} user to run "
                    "PostgreSQL as (the server refuses to run as root)"
                ) from exc
            self._uid, self._gid = entry.pw_uid, entry.pw_gid

    # -- paths ------------------------------------------------------------------

    def _base(self) -> Path:
        if self.base_dir is None:
            raise ClusterError("cluster is not started")
        return self.base_dir

    @property
    def data_dir(self) -> Path:
        return self._base() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._base() / "sock"

    @property
    def logfile(self) -> Path:
        return self._base() / "server.log"

    @property
    def admin_url(self) -> str:
        """SQLAlchemy URL of the ``postgres`` maintenance database."""
        return self._url("postgres")

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``memdir_test`` database."""
        return self._url(DATABASE_NAME)

    def _url(self, database: str) -> str:
        if self.port is None:
            raise ClusterError("cluster is not started")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    # -- lifecycle ----------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Cluster:
        """Create and start the cluster; raises :class:`ClusterError` on failure."""
        if self.base_dir is not None:
            raise ClusterError("cluster already started")
        began = time.monotonic()
        self.base_dir = self._make_base_dir()
        atexit.register(self.stop)
        try:
            self._initdb()
            self._start_server()
            self._create_database()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server (immediate mode) and remove the temporary directory."""
        atexit.unregister(self.stop)
        base = self.base_dir
        if base is None:
            return
        try:
            if (self.data_dir / "postmaster.pid").exists():
                result = self._run(
                    [
                        self._prog("pg_ctl"),
                        "stop",
                        "-D",
                        str(self.data_dir),
                        "-m",
                        "immediate",
                        "-w",
                        "-t",
                        "30",
                    ],
                    check=False,
                )
                if result.returncode != 0:
                    self._kill_postmaster()
        finally:
            shutil.rmtree(base, ignore_errors=True)
            self.base_dir = None
            self.port = None

    # -- faults ---------------------------------------------------------------------

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the running server (``pg_ctl stop -m MODE``: smart, fast or immediate) and keep
        the data directory; :meth:`start_server` brings it back on the same port."""
        self._run(
            [
                self._prog("pg_ctl"),
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                mode,
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
            ]
        )

    def start_server(self) -> None:
        """Start the server stopped by :meth:`stop_server`, with the same options and port
        (after ``immediate``, PostgreSQL runs crash recovery first); waits until it accepts
        connections."""
        if self._options is None:
            raise ClusterError("cluster is not started")
        self._run(
            [
                self._prog("pg_ctl"),
                "-D",
                str(self.data_dir),
                "-o",
                self._options,
                "-l",
                str(self.logfile),
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
                "start",
            ]
        )

    # -- steps ----------------------------------------------------------------------

    def _prog(self, name: str) -> str:
        return str(self.pg_bin / name)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"  # English server messages; the cluster locale is set by initdb
        env["HOME"] = str(self._base())
        env.pop("LANGUAGE", None)
        return env

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a server program, as ``nobody`` when we are root."""
        drop_privileges = self._uid is not None
        result = subprocess.run(
            argv,
            cwd=self._base(),
            env=self._env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_S + 30,
            check=False,
            user=self._uid,
            group=self._gid,
            extra_groups=[] if drop_privileges else None,
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"{' '.join(argv)} failed with exit code {result.returncode}:\n"
                f"{result.stdout}{result.stderr}"
            )
        return result

    def _make_base_dir(self) -> Path:
        if self._uid is None or self._gid is None:
            return Path(tempfile.mkdtemp(prefix="memdir-pg-"))
        # The unprivileged user must be able to reach the directory: $TMPDIR may be
        # somewhere like /root/tmp that "nobody" cannot enter.
        candidates = [tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]
        for parent in candidates:
            parent_path = Path(parent)
            if parent_path.is_dir() and _traversable_by(parent_path, self._uid, self._gid):
                base = Path(tempfile.mkdtemp(prefix="memdir-pg-", dir=parent_path))
                os.chown(base, self._uid, self._gid)
                return base
        raise ClusterError(
            f"no temporary directory that user {_UNPRIVILEGED_USER!r} can enter "
            f"(tried {', '.join(candidates)})"
        )

    def _initdb(self) -> None:
        base_argv = [
            self._prog("initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]
        result = self._run([*base_argv, "--locale=C.UTF-8"], check=False)
        if result.returncode == 0:
            self.locale = "C.UTF-8"
            return
        output = result.stdout + result.stderr
        if "locale" not in output.lower():
            raise ClusterError(f"initdb failed with exit code {result.returncode}:\n{output}")
        # C.UTF-8 is missing (older glibc without the built-in locale): use plain C.
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self._run([*base_argv, "--no-locale"])
        self.locale = "C"

    def _start_server(self) -> None:
        self.socket_dir.mkdir(mode=0o700)
        if self._uid is not None and self._gid is not None:
            os.chown(self.socket_dir, self._uid, self._gid)
        last_error = ""
        for _attempt in range(_START_ATTEMPTS):
            port = _free_port()
            options = " ".join(
                [
                    f"-p {port}",
                    "-h 127.0.0.1",
                    f"-k {shlex.quote(str(self.socket_dir))}",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    "-c max_connections=200",
                ]
            )
            result = self._run(
                [
                    self._prog("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-o",
                    options,
                    "-l",
                    str(self.logfile),
                    "-w",
                    "-t",
                    str(_START_TIMEOUT_S),
                    "start",
                ],
                check=False,
            )
            if result.returncode == 0:
                self.port = port
                self._options = options
                return
            log = _log_tail(self.logfile)
            last_error = (
                f"pg_ctl start failed with exit code {result.returncode}:\n"
                f"{result.stdout}{result.stderr}\n--- tail of the server log ---\n{log}"
            )
            self._kill_postmaster()
            if "could not bind" not in log and "already in use" not in log:
                break  # not a port race: retrying will not help
        raise ClusterError(last_error)

    def _create_database(self) -> None:
        try:
            with psycopg.connect(_psycopg_conninfo(self.admin_url), autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))
            with psycopg.connect(_psycopg_conninfo(self.url), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except psycopg.Error as exc:
            hint = ""
            if "pg_trgm" in str(exc):
                hint = " (pg_trgm comes with PostgreSQL's contrib modules: install them)"
            raise ClusterError(
                f"setting up {DATABASE_NAME!r} failed: {exc}{hint}\n"
                f"--- server log ---\n{_log_tail(self.logfile)}"
            ) from exc

    def _kill_postmaster(self) -> None:
        """Last resort when ``pg_ctl stop`` fails: signal the postmaster by its pid."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.1)


# --------------------------------------------------------------------------- databases


def create_database(admin_url: str, name: str) -> str:
    """Create a fresh, empty database ``name`` and return its SQLAlchemy URL.

    ``admin_url`` is the URL of any database on the server that the user may connect
    to (e.g. :attr:`Cluster.url`), with a role allowed to create databases.  An
    existing database of that name is dropped first, terminating its connections.
    The returned URL uses the ``postgresql+psycopg`` driver.
    """
    admin = _sqlalchemy_url(admin_url)
    if admin.database == name:
        raise ValueError(f"cannot recreate {name!r}: it is the admin URL's own database")
    ident = sql.Identifier(name)
    with psycopg.connect(_psycopg_conninfo(admin), autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        except psycopg.errors.SyntaxError:  # server older than PostgreSQL 13
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(ident))
        create = sql.SQL("CREATE DATABASE {}").format(ident)
        if conn.info.server_version >= 150000:
            # FILE_COPY is ~3x faster than PG 15's default WAL_LOG for a small template.
            create = sql.SQL("{} STRATEGY FILE_COPY").format(create)
        conn.execute(create)
    return admin.set(database=name).render_as_string(hide_password=False)


# --------------------------------------------------------------------------- pytest


def postgres_test_url() -> Iterator[str]:
    """Body of a session-scoped pytest fixture yielding a PostgreSQL SQLAlchemy URL.

    * ``$MEMDIR_TEST_POSTGRES_URL`` set: yield it (``postgresql://`` is given the
      psycopg driver); nothing is started.
    * otherwise, server binaries found: start a :class:`Cluster`, yield its URL and
      stop it afterwards.  A cluster that fails to start FAILS the tests.
    * no binaries: skip, except under ``CI=true``, where the tests FAIL.

    Use as ``yield from postgres_test_url()`` inside a fixture.
    """
    import pytest

    env_url = os.environ.get(ENV_URL)
    if env_url:
        yield _sqlalchemy_url(env_url).render_as_string(hide_password=False)
        return
    pg_bin = find_pg_bin()
    if pg_bin is None:
        where = (
            f"in ${ENV_BIN}={os.environ[ENV_BIN]}"
            if os.environ.get(ENV_BIN)
            else "on PATH and in /usr/lib/postgresql/*/bin"
        )
        reason = (
            f"PostgreSQL server binaries (initdb, pg_ctl, postgres) not found {where}; "
            f"install Debian's 'postgresql' package or set {ENV_URL}"
        )
        if is_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    cluster = Cluster(pg_bin)
    try:
        cluster.start()
    except ClusterError as exc:
        pytest.fail(f"could not start a throwaway PostgreSQL cluster: {exc}", pytrace=False)
    try:
        yield cluster.url
    finally:
        cluster.stop()
