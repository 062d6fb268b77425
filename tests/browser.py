"""See runs the way a person does: the real MLflow UI on 127.0.0.1, rendered by headless Chromium.

    with MlflowUi("sqlite:///mgm-demo/mlflow.db") as ui:
        dom = render(ui.run_url(experiment_id, run_id), screenshot="run.png")

Chromium is Debian's ``chromium`` package (``/usr/bin/chromium``); it is started with background networking off,
so it only ever talks to the UI on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

__all__ = ["MlflowUi", "chromium_path", "render"]

_CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MlflowUi:
    """``mlflow ui`` against a tracking store, on a free port of 127.0.0.1, stopped on exit."""

    def __init__(self, backend_store_uri: str, *, startup_timeout_s: float = 120):
        self.backend_store_uri = backend_store_uri
        self.startup_timeout_s = startup_timeout_s
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run_url(self, experiment_id: str, run_id: str, tab: str = "") -> str:
        return f"{self.url}/#/experiments/{experiment_id}/runs/{run_id}" + (f"/{tab}" if tab else "")

    def compare_url(self, experiment_id: str, run_ids: list[str]) -> str:
        query = urllib.parse.urlencode({"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])})
        return f"{self.url}/#/compare-runs?{query}"

    def __enter__(self) -> MlflowUi:
        command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", self.backend_store_uri,
                   "--host", "127.0.0.1", "--port", str(self.port)]
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._log.seek(0)
                raise RuntimeError(f"mlflow ui exited with {self._process.returncode}: {self._log.read()[-2000:].decode(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"mlflow ui did not answer on {self.url} within {self.startup_timeout_s:g}s")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._log.close()


def render(url: str, *, screenshot: str | os.PathLike[str] | None = None, width: int = 1600, height: int = 1100,
           wait_ms: int = 15000, timeout_s: float = 120) -> str:
    """Load ``url`` in headless Chromium, let its scripts run for ``wait_ms`` (virtual time), and return the DOM;
    also save a PNG when ``screenshot`` is given."""
    browser = chromium_path()
    if browser is None:
        raise FileNotFoundError("Chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="mgm-chromium-") as profile:
        flags = [*_CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--virtual-time-budget={wait_ms}"]
        dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=timeout_s, check=True).stdout
        if screenshot is not None:
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([browser, *flags, f"--screenshot={Path(screenshot).resolve()}", url], capture_output=True, timeout=timeout_s, check=True)
    return dom
