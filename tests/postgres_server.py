"""A PostgreSQL server of a test's own (Debian's ``postgresql`` package; ``.ci/run``
installs it where missing): ``initdb`` into a new temporary directory, ``pg_ctl start`` on
a free port of 127.0.0.1 (trust authentication, its socket in that directory, fsync off),
stopped and its directory removed on every way out of the ``with`` block. PostgreSQL
refuses to run as root: as root it runs as the ``postgres`` user (``runuser``). Where no
server can be started (no binaries, no driver, no user to run it as) the test is skipped
with a one-line reason."""
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from typing import Iterator, List, Optional

import pytest

USER = "alf"  # the server's superuser (initdb -U)


def _bindir() -> Optional[str]:
    """The directory of ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest
    ``/usr/lib/postgresql/<version>/bin``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                  key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    return os.path.dirname(dirs[-1]) if dirs else None


def _as_server_user() -> List[str]:
    """The command prefix that runs the server's programs (as ``postgres`` when root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("PostgreSQL refuses to run as root and there is no 'postgres' user to "
                    "run it as")
    if shutil.which("runuser") is None:
        pytest.skip("PostgreSQL refuses to run as root and there is no runuser to run it as "
                    "the 'postgres' user")
    return ["runuser", "-u", "postgres", "--"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _failure(path: str) -> str:
    """The server log's first FATAL (or ERROR) message, else its last line."""
    try:
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "no server log"
    for level in ("FATAL:", "ERROR:"):
        for line in lines:
            if level in line:
                return line.split(level, 1)[1].strip()
    return lines[-1] if lines else "empty server log"


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server for the ``with`` block; yields its URL without a database name,
    ``postgresql://alf@127.0.0.1:<port>`` (see :func:`new_database`)."""
    pytest.importorskip("psycopg", reason="no psycopg, the PostgreSQL driver (the [test] "
                        "and [postgres] extras install it)")
    bindir = _bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server programs (initdb, pg_ctl): apt-get install postgresql")
    prefix = _as_server_user()
    root = tempfile.mkdtemp(prefix="alf-postgres-")
    data, log = os.path.join(root, "data"), os.path.join(root, "server.log")
    started = False
    try:
        if prefix:
            entry = pwd.getpwnam("postgres")
            os.chown(root, entry.pw_uid, entry.pw_gid)
        done = subprocess.run(prefix + [os.path.join(bindir, "initdb"), "-D", data, "-U", USER,
                                        "-A", "trust", "--no-sync", "-E", "UTF8",
                                        "--locale=C"], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"initdb failed: {(done.stderr or done.stdout).strip().splitlines()[-1]}")
        for _ in range(3):  # a free port may be taken before the server binds it
            port = _free_port()
            options = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                       "-c full_page_writes=off -c synchronous_commit=off")
            done = subprocess.run(prefix + [os.path.join(bindir, "pg_ctl"), "-D", data, "-l", log,
                                            "-w", "-t", "60", "-o", options, "start"],
                                  capture_output=True, text=True)
            started = done.returncode == 0
            if started:
                break
        if not started:
            pytest.skip(f"the PostgreSQL server did not start: {_failure(log)}")
        yield f"postgresql://{USER}@127.0.0.1:{port}"
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):  # started, or half-started
            subprocess.run(prefix + [os.path.join(bindir, "pg_ctl"), "-D", data, "-m",
                                     "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: str, name: str) -> str:
    """Create the empty database ``name`` on ``server``; its URL."""
    import psycopg
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"
