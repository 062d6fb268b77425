"""See runs the way a person does: the real MLflow UI on 127.0.0.1, rendered by headless Chromium.

    with MlflowUi("sqlite:///mgm-demo/mlflow.db") as ui:
        dom = render(ui.run_url(experiment_id, run_id), screenshot="run.png")
        dom = interact(ui.compare_url(experiment_id, run_ids), click=['[artifact-name="mgm_rows.json"]'])

``render`` loads a page and lets its scripts run; ``interact`` drives it over the DevTools protocol (clicks, then
waits for conditions). Chromium is Debian's ``chromium`` package (``/usr/bin/chromium``); it is started with
background networking off, so it only ever talks to the UI on loopback (and to its own DevTools port there).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["MlflowUi", "chromium_path", "interact", "render"]

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

    def trace_url(self, experiment_id: str, trace_id: str) -> str:
        """The experiment's Traces page with one trace's drawer open."""
        return f"{self.url}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}"

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
        if self._process is not None:
            _stop(self._process)
        self._log.close()


def render(url: str, *, screenshot: str | os.PathLike[str] | None = None, width: int = 1600, height: int = 1100,
           wait_ms: int = 15000, timeout_s: float = 120) -> str:
    """Load ``url`` in headless Chromium, let its scripts run for ``wait_ms`` (virtual time), and return the DOM;
    also save a PNG when ``screenshot`` is given."""
    browser = chromium_path()
    if browser is None:
        raise FileNotFoundError("Chromium is not installed: apt-get install chromium")
    with _profile() as profile:
        flags = [*_CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--virtual-time-budget={wait_ms}"]
        dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=timeout_s, check=True).stdout
        if screenshot is not None:
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([browser, *flags, f"--screenshot={Path(screenshot).resolve()}", url], capture_output=True, timeout=timeout_s, check=True)
    return dom


def interact(url: str, *, click: Sequence[str] = (), wait_for: Sequence[str] = (), scroll_to: str | None = None,
             screenshot: str | os.PathLike[str] | None = None, width: int = 1600, height: int = 1100, timeout_s: float = 60) -> str:
    """Load ``url`` in headless Chromium, driven over the DevTools protocol: click each CSS selector of ``click`` in
    turn (once it is on the page), wait until every JavaScript expression of ``wait_for`` is true, scroll the
    element ``scroll_to`` (a CSS selector) into view, and return the DOM (also a PNG when ``screenshot`` is given).
    A step that does not happen within ``timeout_s`` raises ``TimeoutError`` naming it."""
    browser = chromium_path()
    if browser is None:
        raise FileNotFoundError("Chromium is not installed: apt-get install chromium")
    with _profile() as profile:
        flags = [*_CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "--remote-debugging-port=0"]
        process = subprocess.Popen([browser, *flags, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(Path(profile), process, timeout_s)
            return asyncio.run(_drive(port, url, click, wait_for, scroll_to, screenshot, width, height, timeout_s))
        finally:
            _stop(process)


def _stop(process: subprocess.Popen, grace_s: float = 15) -> None:
    """Ask ``process`` to end; kill it if it is still running ``grace_s`` later."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def _profile(grace_s: float = 10.0) -> Iterator[str]:
    """A throwaway Chromium profile folder, removed only once no Chromium process uses it any more: the browser's
    helpers (renderer, GPU, crash handler) outlive its main process by a moment and keep writing to the profile,
    which made removing it fail with "Directory not empty"."""
    profile = tempfile.mkdtemp(prefix="mgm-chromium-")
    try:
        yield profile
    finally:
        started = time.monotonic()
        while (users := _processes_using(profile)) and (waited := time.monotonic() - started) < grace_s:
            for pid in users:
                try:
                    os.kill(pid, signal.SIGTERM if waited < grace_s / 2 else signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        shutil.rmtree(profile, ignore_errors=bool(_processes_using(profile)))


def _processes_using(profile: str) -> list[int]:
    """Processes whose command line names ``profile`` (every Chromium process carries ``--user-data-dir``)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if f"--user-data-dir={profile}".encode() in entry.read_bytes():  # helpers rewrite theirs as one string
                found.append(int(entry.parent.name))
        except OSError:
            continue
    return found


def _devtools_port(profile: Path, process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """Chromium writes the port it picked (``--remote-debugging-port=0``) to DevToolsActivePort in its profile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Chromium exited with {process.returncode} before its DevTools port opened")
        lines = (profile / "DevToolsActivePort").read_text().split() if (profile / "DevToolsActivePort").exists() else []
        if lines:
            return int(lines[0])
        time.sleep(0.1)
    raise TimeoutError("Chromium's DevTools port did not open")


async def _drive(port: int, url: str, click: Sequence[str], wait_for: Sequence[str], scroll_to: str | None, screenshot: Any,
                 width: int, height: int, timeout_s: float) -> str:
    import aiohttp  # an MLflow dependency, so always there beside it

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
            target = next(t for t in await response.json() if t["type"] == "page")
        async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket_:
            counter = iter(range(1, 1_000_000))

            async def call(method: str, **params: Any) -> dict[str, Any]:
                number = next(counter)
                await socket_.send_json({"id": number, "method": method, "params": params})
                while True:  # events arrive in between; the answer carries our id
                    message = await socket_.receive_json()
                    if message.get("id") == number:
                        if "error" in message:
                            raise RuntimeError(f"{method}: {message['error']}")
                        return message["result"]

            async def value(expression: str) -> Any:
                result = await call("Runtime.evaluate", expression=expression, returnByValue=True)
                return result["result"].get("value")

            async def until(expression: str, what: str) -> None:
                deadline = time.monotonic() + timeout_s
                while not await value(f"Boolean({expression})"):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{what} did not happen within {timeout_s:g}s on {url}")
                    await asyncio.sleep(0.25)

            await call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
            await call("Page.navigate", url=url)
            for selector in click:
                found = f"document.querySelector({json.dumps(selector)})"
                await until(found, f"{selector} appearing")
                await value(f"{found}.click()")
            for expression in wait_for:
                await until(expression, expression)
            if scroll_to is not None:
                await value(f"document.querySelector({json.dumps(scroll_to)})?.scrollIntoView()")
                await asyncio.sleep(0.5)  # let lazy parts of the page draw
            if screenshot is not None:
                shot = await call("Page.captureScreenshot", format="png")
                Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
            return await value("document.documentElement.outerHTML")
