"""See runs the way a person does: the real MLflow UI on 127.0.0.1, rendered by headless Chromium.

    with MlflowUi("sqlite:///mgm-demo/mlflow.db") as ui:
        dom = render(ui.run_url(experiment_id, run_id), screenshot="run.png")
        dom = interact(ui.compare_url(experiment_id, run_ids), click=['[artifact-name="mgm_rows.json"]'])
        with Browser() as browser:  # one Chromium for several pages
            dom = browser.visit(ui.run_url(experiment_id, run_id), wait_for=["document.body.innerText.includes('Metrics')"])

``render`` loads a page and lets its scripts run; ``interact`` (one page) and ``Browser.visit`` (one page after
another) drive it over the DevTools protocol (clicks, then waits for conditions). Chromium is Debian's ``chromium``
package (``/usr/bin/chromium``); it is started with background networking off, so it only ever talks to the UI on
loopback (and to its own DevTools port there).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
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
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Browser", "MlflowUi", "chromium_path", "interact", "render"]

# What to click: a CSS selector; (selector, text): the element of selector whose text is text (one option of a menu);
# (selector, text, inner): the element inner inside that one (the button of one card among cards alike).
Target = str | tuple[str, str] | tuple[str, str, str]

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

    def evaluation_runs_url(self, experiment_id: str) -> str:
        """The experiment's Evaluation runs page (MLflow lists there every run that outputs no model)."""
        return f"{self.url}/#/experiments/{experiment_id}/evaluation-runs"

    def trace_url(self, experiment_id: str, trace_id: str) -> str:
        """The experiment's Traces page with one trace's drawer open."""
        return f"{self.url}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}"

    def compare_url(self, experiment_id: str, run_ids: list[str]) -> str:
        query = urllib.parse.urlencode({"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])})
        return f"{self.url}/#/compare-runs?{query}"

    def __enter__(self) -> MlflowUi:
        # One worker process, not MLflow's default four: each imports the whole server (seconds of CPU apiece), and
        # one person's browser is all it serves. No job execution: MLflow would start six more Python processes (huey
        # consumers, a job runner) for server-side jobs that no page shown here uses.
        command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", self.backend_store_uri,
                   "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        environment = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment)
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


def interact(url: str, *, click: Sequence[Target] = (), wait_for: Sequence[str] = (), scroll_to: str | None = None,
             screenshot: str | os.PathLike[str] | None = None, width: int = 1600, height: int = 1100, timeout_s: float = 60) -> str:
    """Load ``url`` in a headless Chromium of its own and drive it (``Browser.visit``); return the DOM."""
    with Browser(width=width, height=height, timeout_s=timeout_s) as browser:
        return browser.visit(url, click=click, wait_for=wait_for, scroll_to=scroll_to, screenshot=screenshot)


class Browser:
    """One headless Chromium driven over the DevTools protocol, for several pages in turn: a test that checks a few
    pages starts the browser once (and its cache keeps the UI's scripts between pages).

        with Browser() as browser:
            dom = browser.visit(url, click=["button[aria-label^=Columns]", ("[role=option]", "Version")])
    """

    def __init__(self, *, width: int = 1600, height: int = 1100, timeout_s: float = 60):
        self.width, self.height, self.timeout_s = width, height, timeout_s
        self._stack = ExitStack()
        self._counter = itertools.count(1)

    def __enter__(self) -> Browser:
        browser = chromium_path()
        if browser is None:
            raise FileNotFoundError("Chromium is not installed: apt-get install chromium")
        with ExitStack() as stack:
            profile = stack.enter_context(_profile())
            flags = [*_CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={self.width},{self.height}", "--remote-debugging-port=0"]
            process = subprocess.Popen([browser, *flags, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            stack.callback(_stop, process)
            port = _devtools_port(Path(profile), process, self.timeout_s)
            self._runner = stack.enter_context(asyncio.Runner())
            self._runner.run(self._connect(port, stack))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _connect(self, port: int, stack: ExitStack) -> None:
        import aiohttp  # an MLflow dependency, so always there beside it

        session = aiohttp.ClientSession()
        stack.callback(lambda: self._runner.run(session.close()))
        async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
            target = next(t for t in await response.json() if t["type"] == "page")
        self._socket = await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        stack.callback(lambda: self._runner.run(self._socket.close()))
        await self._call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)

    def visit(self, url: str, *, click: Sequence[Target] = (), wait_for: Sequence[str] = (), scroll_to: str | None = None,
              screenshot: str | os.PathLike[str] | None = None) -> str:
        """Load ``url`` afresh (by way of a blank page, so nothing of the last page answers for this one), click each
        target of ``click`` in turn once it is on the page (a CSS selector, or a ``Target`` naming an element by its
        text, such as one option of a menu or the button of one card), wait until every JavaScript expression of
        ``wait_for`` is true, scroll the element ``scroll_to`` (a CSS selector) into view, and return the DOM (also
        a PNG when ``screenshot`` is given). A step that does not happen within ``timeout_s`` raises
        ``TimeoutError`` naming it."""
        return self._runner.run(self._visit(url, click, wait_for, scroll_to, screenshot))

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._counter)
        await self._socket.send_json({"id": number, "method": method, "params": params})
        while True:  # events arrive in between; the answer carries our id
            message = await self._socket.receive_json()
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def _value(self, expression: str) -> Any:
        result = await self._call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def _until(self, expression: str, what: str, url: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not await self._value(f"Boolean({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {self.timeout_s:g}s on {url}")
            await asyncio.sleep(0.25)

    async def _visit(self, url: str, click: Sequence[Target], wait_for: Sequence[str], scroll_to: str | None, screenshot: Any) -> str:
        await self._call("Page.navigate", url="about:blank")
        await self._until("location.href === 'about:blank' && document.readyState === 'complete'", "the blank page", url)
        await self._call("Page.navigate", url=url)
        for target in click:
            found = _element(target)
            await self._until(found, f"{target} appearing", url)
            await self._value(f"{found}.click()")
        for expression in wait_for:
            await self._until(expression, expression, url)
        if scroll_to is not None:
            await self._value(f"document.querySelector({json.dumps(scroll_to)})?.scrollIntoView()")
            await asyncio.sleep(0.5)  # let lazy parts of the page draw
        if screenshot is not None:
            shot = await self._call("Page.captureScreenshot", format="png")
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        return await self._value("document.documentElement.outerHTML")


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


def _element(target: Target) -> str:
    """A JavaScript expression for the element ``target`` names (null or undefined while there is none)."""
    if isinstance(target, str):
        return f"document.querySelector({json.dumps(target)})"
    selector, text, *inner = target
    found = f"[...document.querySelectorAll({json.dumps(selector)})].find(e => e.innerText.trim() === {json.dumps(text)})"
    return f"{found}?.querySelector({json.dumps(inner[0])})" if inner else found
