"""Runs the real `sagitta serve` binary for the server tests.

`SagittaServer` starts `target/release/sagitta serve` on a port the OS picks (`--port 0`;
the port is read back from the server's "listening on" line, so no two tests can race for
one) and its gRPC API on a port free when it starts (`grpc_port`; `--grpc-port 0` in the
flags turns it off), waits until `GET /readyz` answers 200, and stops it with SIGTERM
(SIGKILL if it does not exit in time). `running_server` wraps that in a context manager
for fixtures.

A missing binary fails the test (it is never skipped): build it with
`cargo build --release -p sagitta-cli`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = REPO_ROOT / "target" / "release" / "sagitta"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

_LISTENING = re.compile(r"listening on (http://\S+?),")
_GRPC = re.compile(r"gRPC on \S+?:(\d+),")


def free_port(host: str) -> int:
    """A port no one listens on now (the gRPC port: 0 would turn gRPC off)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def binary_path() -> Path:
    """The server binary; fails the calling test with how to build it when it is missing."""
    if not BINARY.is_file() or not os.access(BINARY, os.X_OK):
        pytest.fail(
            f"the server binary {BINARY} is missing: build it with "
            "`cargo build --release -p sagitta-cli` (scripts/test.sh does, through "
            "`cargo test --workspace --release`)",
            pytrace=False,
        )
    return BINARY


class SagittaServer:
    """One `sagitta serve` process on a data directory; restartable on the same directory."""

    def __init__(
        self,
        data_dir: Path,
        *flags: str,
        host: str = "127.0.0.1",
        binary: Path | None = None,
        launcher: tuple[str, ...] = (),
    ) -> None:
        """`launcher` runs the binary (e.g. `mpirun -n 4`); `binary` replaces the default."""
        self.data_dir = Path(data_dir)
        self.flags = list(flags)
        self.host = host
        self.binary = binary
        self.launcher = list(launcher)
        self.process: subprocess.Popen | None = None
        self.url: str | None = None
        self.grpc_port: int | None = None
        self.starts = 0
        self._log_path: Path | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = READY_TIMEOUT_S) -> str:
        """Starts the server and waits until it is ready; returns its base URL."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("the server is already running")
        binary = self.binary or binary_path()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._log_path = (
            self.data_dir.parent / f"{self.data_dir.name}-stderr-{self.starts}.log"
        )
        command = [
            *self.launcher,
            str(binary),
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--host",
            self.host,
            "--port",
            "0",
            *(
                ()
                if "--grpc-port" in self.flags
                else ("--grpc-port", str(free_port(self.host)))
            ),
            *self.flags,
        ]
        # Only the process's own settings: SAGITTA_* from the environment would override
        # the defaults the tests rely on.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAGITTA_")}
        # The child keeps its own copy of the log's descriptor.
        with open(self._log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.data_dir.parent,
            )
        self.url = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._fail_start(
                    f"the server exited with status {self.process.returncode}"
                )
            if self.url is None:
                match = _LISTENING.search(self.output())
                if match:
                    self.url = match.group(1)
                    grpc = _GRPC.search(self.output())
                    self.grpc_port = int(grpc.group(1)) if grpc else None
            if self.url is not None:
                try:
                    response = httpx.get(f"{self.url}/readyz", timeout=2.0)
                    if response.status_code == 200:
                        return self.url
                except httpx.HTTPError:
                    pass
            time.sleep(0.02)
        self.kill()
        self._fail_start(f"the server was not ready within {timeout:.0f} s")
        raise AssertionError("unreachable")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (graceful: flushes), then SIGKILL after `timeout`; returns the exit status."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        return process.returncode

    def kill(self) -> None:
        """SIGKILL, as the OOM killer sends: no flush (the OS page cache survives it)."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)

    # -- diagnostics -----------------------------------------------------------------------

    def output(self) -> str:
        """What the server has printed (stdout and stderr) since its latest start."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(errors="replace")

    def _fail_start(self, reason: str) -> None:
        binary = self.binary or BINARY
        command = " ".join(
            [
                *self.launcher,
                str(binary),
                "serve",
                "--data-dir",
                str(self.data_dir),
                *self.flags,
            ]
        )
        pytest.fail(
            f"{reason}\ncommand: {command}\nserver output:\n{self.output() or '(nothing)'}",
            pytrace=False,
        )


@contextlib.contextmanager
def running_server(data_dir: Path, *flags: str) -> Iterator[SagittaServer]:
    """A started server on `data_dir`, stopped (SIGTERM, then SIGKILL) on exit."""
    server = SagittaServer(data_dir, *flags)
    server.start()
    try:
        yield server
    finally:
        server.stop()
