"""Run one Markdown page's blocks in order, as a reader working through it would: one Python interpreter
(``doc_worker.py``) and one shell environment and working folder per page, shared by its blocks.

The working folder is a fresh temporary project folder: ``.venv``, ``examples`` and ``benchmarks`` link to the
project's, ``../shared`` to the shared data, so commands written for the project root run there and whatever they
write (``mlflow.db``, ``mlartifacts/``, reports) stays in the temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from doc_blocks import Block
from warm_client import install_shims

from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply, SummarizationJudgeScript
from mlflow_genai_metrics.testing.answers_judge import answer_pass_of
from mlflow_genai_metrics.testing.summarization_judge import marked_sections, pass_of
from mlflow_genai_metrics.text import split_sentences

__all__ = ["GIVENS", "HOSTED_MODELS", "HostedEndpoint", "Outcome", "PageSession", "project_folder", "run_page"]

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().with_name("doc_worker.py")
SHARED = ROOT.parent / "shared"
HOSTED_MODELS = ("gpt-4o-mini", "gpt-4.1-mini", "gpt-4o")
BLOCK_TIMEOUT_S = 420
READY_TIMEOUT_S = 180

# What a block may use without defining it (its marker's ``given``): Python run in the page's interpreter first.
GIVENS = {
    "df": "from mlflow_genai_metrics.study import sample_summaries\ndf = sample_summaries()\n",
    "articles": "from mlflow_genai_metrics.study import sample_summaries\narticles = sample_summaries()['text'].tolist()\n",
    "summaries": "from mlflow_genai_metrics.study import sample_summaries\nsummaries = sample_summaries()['summary'].tolist()\n",
    "judge": "from mlflow_genai_metrics import Judge\njudge = Judge('gpt-4o-mini')\n",
    "data.csv": "from mlflow_genai_metrics.study import sample_summaries\nsample_summaries().to_csv('data.csv', index=False)\n",
    "run_a run_b run_c": (
        "import mlflow\nfrom mlflow_genai_metrics import Judge, judge_summaries\nfrom mlflow_genai_metrics.tracking import log_result\n"
        "from mlflow_genai_metrics.study import sample_summaries\n"
        "mlflow.set_tracking_uri('sqlite:///mlflow.db')\n"
        "_sample = sample_summaries()\n"
        "_judged = {}\n"
        "for _name, _summaries in {'run_a': _sample['summary'], 'run_b': _sample['reference'], 'run_c': _sample['text'].str.split('\\n').str[1]}.items():\n"
        "    with mlflow.start_run(run_name=_name) as _run:\n"
        "        log_result(judge_summaries(_sample['text'], _summaries, judge=Judge('gpt-4o-mini'), ids=_sample['id']), log_metrics=True)\n"
        "    _judged[_name] = _run.info.run_id\n"
        "run_a, run_b, run_c = _judged['run_a'], _judged['run_b'], _judged['run_c']\n"
    ),
}


class HostedEndpoint:
    """The scripted server as a paid endpoint: the deterministic judges for the judge's passes (an answer's own
    passes, then a summary's), and a candidate model for anything else (the article's first two sentences, after the
    instruction's blank line)."""

    def __init__(self) -> None:
        self.judge = SummarizationJudgeScript()
        self.answers = AnswersJudgeScript()

    def __call__(self, request):
        prompt = request.messages[0]["content"] if request.messages else ""
        if answer_pass_of(marked_sections(prompt)) in ("verify_passages", "relevance", "facts"):
            return self.answers(request)
        if pass_of(marked_sections(prompt)) != "unknown":
            return self.judge(request)
        article = request.last_user_message.split("\n\n", 1)[-1]
        return Reply(" ".join(split_sentences(article)[:2]))


@dataclass(frozen=True)
class Outcome:
    block: Block
    ok: bool
    output: str
    message: str = ""
    seconds: float = 0.0

    def report(self) -> str:
        tail = self.output[-4000:]
        return f"{self.block.name} ({self.block.language}) failed: {self.message}\n--- block ---\n{self.block.code}--- output (tail) ---\n{tail}"


def project_folder(folder: Path) -> Path:
    """A project folder under ``folder`` whose ``.venv``, ``examples`` and ``benchmarks`` are the project's, beside
    a ``shared`` link to the shared data; returns it. The ``.venv`` is the project's but for ``bin/mgm`` and
    ``bin/python``, which run in the suite's warm interpreter (``warm_client.py``)."""
    project = folder / "project"
    project.mkdir(parents=True)
    venv = Path(sys.prefix) if Path(sys.prefix) != Path(sys.base_prefix) else ROOT / ".venv"
    (project / ".venv").mkdir()
    for entry in venv.iterdir():
        if entry.name != "bin":
            os.symlink(entry, project / ".venv" / entry.name)
    install_shims(project / ".venv" / "bin", venv / "bin")
    for name in ("examples", "benchmarks"):
        os.symlink(ROOT / name, project / name)
    if SHARED.exists():
        os.symlink(SHARED, folder / "shared")
    return project


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PageSession:
    """One reader's session on one page: ``run(block)`` runs it and returns its ``Outcome``; ``close()`` stops the
    interpreter and every background command."""

    def __init__(self, folder: Path, *, hosted_url: str | None, api_key: str, cache_dir: Path, warm_socket: str,
                 mlflow_db: Path | None = None) -> None:
        self.folder = folder
        self.cwd = project_folder(folder)
        if mlflow_db is not None:  # an empty store, already migrated: what the page's first MLflow command makes of it
            shutil.copyfile(mlflow_db, self.cwd / "mlflow.db")
        self.hosted_url, self.api_key = hosted_url, api_key
        self.ports: dict[str, int] = {}
        while len(set(self.ports.values())) < 2:  # two distinct free ports: {port} and {port2}
            self.ports = {"port": _free_port(), "port2": _free_port()}
        dropped = ("MGM_JUDGE", "OPENAI_", "MLFLOW_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and not k.startswith("PYTEST")}
        # ``warm_socket``: the suite's warm interpreter (``warm_python``), which the page's commands run in.
        self.env.update(
            PATH=f"{self.cwd / '.venv' / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            MGM_TEST_WARM_SOCKET=warm_socket, MGM_TEST_REAL_BIN=str(Path(sys.executable).parent),
            MGM_CACHE_DIR=str(cache_dir), MPLBACKEND="Agg", PYTHONUNBUFFERED="1", TQDM_DISABLE="1",
            # A page's `mlflow ui` or `mlflow server` without the six processes (huey consumers, a job runner) that
            # serve MLflow's server-side jobs: no page uses them, and they cost seconds of CPU apiece.
            MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
        )
        self.given_done: set[str] = set()
        self.background: list[subprocess.Popen] = []
        self._worker: subprocess.Popen | None = None
        self._channel: socket.socket | None = None
        self._count = 0

    # -- one block --------------------------------------------------------------------------------

    def run(self, block: Block) -> Outcome:
        marker = block.marker
        code = block.code
        for old, new in marker.subs:
            if old not in code:
                return Outcome(block, False, "", f"sub {old!r}: not in the block (the marker no longer fits it)")
            code = code.replace(old, new.format(**self.ports, shared=self.folder / "shared"))
        if "scripted-openai" in marker.modes:
            self.env.update(OPENAI_BASE_URL=self.hosted_url, OPENAI_API_KEY=self.api_key)
        for given in marker.given:
            failed = self._give(block, given)
            if failed is not None:
                return failed
        if "background" in marker.modes:
            outcome = self._background(block, code)
        elif block.language == "python":
            outcome = self._python(block, code)
        else:
            outcome = self._shell(block, code)
        return self._check(outcome)

    def _check(self, outcome: Outcome) -> Outcome:
        if not outcome.ok:
            return outcome
        for pattern in outcome.block.marker.expect:
            if not re.search(pattern, outcome.output, re.MULTILINE):
                return Outcome(outcome.block, False, outcome.output, f"the output does not match {pattern!r}")
        for name, pattern in outcome.block.marker.capture:
            found = re.search(pattern, outcome.output, re.MULTILINE)
            if not found:
                return Outcome(outcome.block, False, outcome.output, f"nothing to capture as ${name}: no match for {pattern!r}")
            self.env[name] = found.group(1)
        return outcome

    def _give(self, block: Block, given: str) -> Outcome | None:
        key = next((k for k in GIVENS if given in k.split()), None)
        if key is None:
            return Outcome(block, False, "", f"given {given!r}: the docs test provides {sorted(GIVENS)}")
        if key not in self.given_done:
            answer, output = self._ask_worker(GIVENS[key], f"<given {key}>", 0)
            if not answer["ok"]:
                return Outcome(block, False, output, f"the given {key!r} failed:\n{answer['error']}")
            self.given_done.add(key)
        return None

    # -- Python -------------------------------------------------------------------------------------

    def _python(self, block: Block, code: str) -> Outcome:
        answer, output = self._ask_worker(code, str(block.page), block.line)
        expected = block.marker.raises
        if expected is not None:
            if answer["exception"] != expected:
                return Outcome(block, False, output, f"expected it to raise {expected}, got {answer['exception'] or 'no exception'}\n{answer['error']}")
            return Outcome(block, True, output)
        return Outcome(block, answer["ok"], output, answer["error"])

    def _ask_worker(self, code: str, filename: str, line: int) -> tuple[dict, str]:
        if self._worker is None:
            ours, theirs = socket.socketpair()
            with open(self.folder / "interpreter.log", "wb") as log:  # what it prints between blocks, and at exit
                self._worker = subprocess.Popen([sys.executable, str(WORKER), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                                cwd=self.cwd, env=self.env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
            theirs.close()
            self._channel = ours
            self._channel.settimeout(BLOCK_TIMEOUT_S)
        self._count += 1
        output_path = self.folder / f"output-{self._count}.txt"
        request = {"code": code, "filename": filename, "line": line, "env": self.env, "cwd": str(self.cwd), "output": str(output_path)}
        assert self._channel is not None
        self._channel.sendall((json.dumps(request) + "\n").encode())
        received = b""
        try:
            while not received.endswith(b"\n"):
                chunk = self._channel.recv(65536)
                if not chunk:
                    raise ConnectionError("the interpreter ended")
                received += chunk
            answer = json.loads(received)
        except (OSError, ConnectionError) as exc:
            log = (self.folder / "interpreter.log").read_text(errors="replace")[-3000:]
            answer = {"ok": False, "exception": type(exc).__name__, "error": f"no answer from the page's interpreter: {exc}\n{log}"}
        output = output_path.read_text(errors="replace") if output_path.exists() else ""
        return answer, output

    # -- shell ----------------------------------------------------------------------------------------

    def _shell(self, block: Block, code: str) -> Outcome:
        state = self.folder / "shell-state"
        # The block as written (-a: its assignments carry over, as in a terminal), then the environment and folder it
        # leaves, for the page's next shell block.
        script = f"set -aeo pipefail\ncd {shlex.quote(str(self.cwd))}\n{code}\n{{ env -0 > {shlex.quote(str(state))}; pwd > {shlex.quote(str(state))}.cwd; }}\n"
        try:
            done = subprocess.run(["bash", "-c", script], env=self.env, cwd=self.cwd, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return Outcome(block, False, (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or ""),
                           f"still running after {BLOCK_TIMEOUT_S} s")
        output = done.stdout + done.stderr
        if done.returncode != block.marker.exit:
            return Outcome(block, False, output, f"exit status {done.returncode}, expected {block.marker.exit}")
        if done.returncode == 0 and state.exists():
            self.env = dict(item.split("=", 1) for item in state.read_text().split("\0") if "=" in item)
            self.cwd = Path((state.parent / "shell-state.cwd").read_text().strip())
        state.unlink(missing_ok=True)  # it holds the environment, API key included: no file may keep it
        return Outcome(block, True, output)

    def _background(self, block: Block, code: str) -> Outcome:
        log = self.folder / f"background-{len(self.background)}.log"
        with open(log, "wb") as sink:
            process = subprocess.Popen(["bash", "-c", code], env=self.env, cwd=self.cwd, stdout=sink, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.background.append(process)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            output = log.read_text(errors="replace")
            if re.search(block.marker.ready or "", output, re.MULTILINE):
                return Outcome(block, True, output)
            if process.poll() is not None:
                return Outcome(block, False, output, f"ended with status {process.returncode} before it was ready")
            time.sleep(0.2)
        return Outcome(block, False, log.read_text(errors="replace"), f"not ready after {READY_TIMEOUT_S} s")

    # -- the end --------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        processes = [p for p in (self._worker, *self.background) if p is not None]
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def run_page(blocks: list[Block], folder: Path, **session_options) -> list[Outcome]:
    """Run ``blocks`` (one page's, in order) in one session until the first that fails; each ``Outcome`` carries
    the seconds it took."""
    session = PageSession(folder, **session_options)
    outcomes = []
    try:
        for block in blocks:
            started = time.perf_counter()
            outcome = session.run(block)
            outcomes.append(Outcome(outcome.block, outcome.ok, outcome.output, outcome.message, time.perf_counter() - started))
            if not outcome.ok:
                break
    finally:
        session.close()
    return outcomes
