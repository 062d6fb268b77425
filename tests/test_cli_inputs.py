"""Every input ``mgm`` takes that it cannot use is refused with exit code 2 and one line naming it (argparse's usage
and error line for a malformed argument), never a traceback and never exit code 1, which says "gate failed"."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY

from mlflow_genai_metrics.cli import build_parser
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.cli.common import port_number, positive_int, positive_number, share

# Every number a command takes that must be above 0 (--seed alone may be 0).
POSITIVE_OPTIONS = [
    ("evaluate", "--limit"), ("evaluate", "--max-calls"), ("evaluate", "--max-cost-usd"), ("evaluate", "--batch-poll-s"),
    ("evaluate", "--concurrency"), ("evaluate", "--judge-context"), ("demo", "--limit"), ("demo", "--max-tokens"),
    ("demo", "--concurrency"), ("serve", "--n-ctx"), ("serve", "--port"), ("serve", "--threads"), ("meta-eval", "--sample"),
    ("meta-eval", "--concurrency"), ("meta-eval", "--judge-context"), ("meta-eval", "--max-calls"),
    ("meta-eval", "--max-cost-usd"), ("monitor", "--max-traces"), ("monitor", "--concurrency"),
    ("monitor", "--judge-context"), ("monitor", "--max-calls"), ("monitor", "--max-cost-usd"),
    ("gate", "--concurrency"), ("gate", "--judge-context"), ("gate", "--max-calls"), ("gate", "--max-cost-usd"),
    *((command, "--stability") for command in ("evaluate", "meta-eval", "monitor")),  # the method's: not the gate's (signed), not align's
    ("align", "--per-request"), ("align", "--concurrency"), ("align", "--judge-context"), ("align", "--max-calls"), ("align", "--max-cost-usd"),
    ("label-sample", "--n"),
]
SHARE_OPTIONS = [*((command, "--order-check") for command in ("evaluate", "meta-eval", "monitor")), ("align", "--held-out")]
REQUIRED = {"evaluate": ["rows.csv"], "meta-eval": ["labelled.jsonl"], "gate": ["RUN", "--model-uri", "models:/m/1", "--name", "m", "--rule", "a>=1"],
            "label-sample": ["--run-id", "RUN"]}


def refused(argv: list[str], capsys) -> str:
    """The error line argparse printed for ``argv``, after checking it exits 2."""
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def one_line(argv: list[str], capsys) -> str:
    """``mgm argv``'s only line on stderr, after checking it exits 2."""
    assert mgm(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "x"])
@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_limit_must_be_a_whole_number_above_0(command, value, capsys):
    line = refused([command, *REQUIRED.get(command, []), "--limit", value], capsys)
    assert line == f"mgm {command}: error: argument --limit: must be a whole number above 0, not {value!r}"


@pytest.mark.parametrize(("command", "option"), POSITIVE_OPTIONS)
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_every_count_size_or_cap_refuses_0_negatives_and_nan(command, option, value, capsys):
    line = refused([command, *REQUIRED.get(command, []), option, value], capsys)
    assert line.startswith(f"mgm {command}: error: argument {option}: must be a ")


def test_the_list_of_positive_options_is_every_number_option_of_every_command():
    numbers = (int, float, positive_int, positive_number, port_number, share)
    found = {
        (name, action.option_strings[0])
        for name, command in build_parser()._subparsers._group_actions[0].choices.items()
        for action in command._actions
        if action.type in numbers and action.option_strings and action.dest != "seed"
    }
    assert found == set(POSITIVE_OPTIONS) | set(SHARE_OPTIONS)


@pytest.mark.parametrize(("command", "option"), SHARE_OPTIONS)
@pytest.mark.parametrize("value", ["-0.1", "1.5", "x"])
def test_a_share_must_be_a_number_from_0_to_1(command, option, value, capsys):
    line = refused([command, *REQUIRED.get(command, []), option, value], capsys)
    assert line.endswith(f"argument {option}: must be a number from 0 to 1, not {value!r}")
    parsed = build_parser().parse_args([command, *REQUIRED.get(command, []), option, "0"])
    assert getattr(parsed, option.removeprefix("--").replace("-", "_")) == 0.0


def test_a_port_above_65535_is_refused(capsys):
    assert refused(["serve", "--port", "70000"], capsys) == "mgm serve: error: argument --port: must be a port number from 1 to 65535, not '70000'"


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A folder named like a table, a missing file, and files that are not what their names say."""
    monkeypatch.chdir(tmp_path)  # nothing a refused command would make lands in the checkout
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00garbage\x00")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "broken.parquet").write_text("not parquet")
    (tmp_path / "broken.jsonl").write_text('{"text": "one"}\n{"text": \n')
    return tmp_path


TABLE_PROBLEMS = {
    "folder.csv": "cannot read {path}: it is a folder, not a CSV file",
    "missing.csv": "cannot read {path}: No such file or directory",
    "binary.csv": "cannot read {path} as CSV: 'utf-8' codec can't decode byte 0xff",
    "broken.json": "cannot read {path} as JSON:",
    "broken.parquet": "cannot read {path} as PARQUET:",
    "broken.jsonl": "{path}, line 2: not valid JSON",
}


@pytest.mark.parametrize("name", sorted(TABLE_PROBLEMS))
@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_a_table_that_cannot_be_read_is_one_line_naming_the_file_and_the_problem(command, name, files, capsys):
    path = files / name
    argv = ["evaluate", str(path)] if command == "evaluate" else ["demo", "--data", str(path), "--store", str(files / "store")]
    assert one_line(argv, capsys).startswith(f"mgm {command}: " + TABLE_PROBLEMS[name].format(path=path))


@pytest.mark.parametrize("name", ["folder.csv", "missing.csv", "binary.csv", "broken.json"])
def test_a_labelled_set_that_cannot_be_read_is_one_line_naming_the_file(name, files, capsys):
    path = files / name
    line = one_line(["meta-eval", str(path), "--no-log", "--grounding-only"], capsys)
    assert line.startswith(f"mgm meta-eval: cannot read {path}")


@pytest.mark.parametrize(("labels", "named"), [
    (["yes", "no"], "2 are not: line 1 (id 0): label 'yes'; line 2 (id 1): label 'no'"),  # once a pandas traceback
    ([1, None, 7, -3], "3 are not: line 2 (id 1): label missing; line 3 (id 2): label 7.0; line 4 (id 3): label -3.0"),  # once counted
])
def test_a_labelled_set_whose_labels_are_not_shares_is_one_line_naming_them(files, capsys, labels, named):
    """A missing label once counted as "inconsistent", a 7 as "consistent", with no word; text labels raised pandas'
    own TypeError."""
    path = files / "labels.jsonl"
    path.write_text("".join(pd.DataFrame({"id": range(len(labels)), "source": "The cat sat on the mat.", "summary": "The cat sat.",
                                          "label": pd.Series(labels, dtype=object)}).to_json(orient="records", lines=True)))
    line = one_line(["meta-eval", str(path), "--no-log", "--grounding-only"], capsys)
    assert line == f"mgm meta-eval: {path}: a label is a number in [0, 1] (a share of supported sentences, or 0/1); {named}"


def test_an_unreadable_file_is_one_line_naming_it(files):
    """chmod 000 stops no reader that runs as root (CAP_DAC_OVERRIDE): there mgm runs with that capability dropped
    from its bounding set (util-linux setpriv), so the file is as unreadable to it as to any other user."""
    path = files / "locked.csv"
    path.write_text("text,summary\nThe council met.,It met.\n")
    path.chmod(0)
    command = [sys.executable, "-m", "mlflow_genai_metrics.cli", "evaluate", str(path)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root, where chmod 000 does not stop reading, and setpriv is missing to drop that power")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"mgm evaluate: cannot read {path}: Permission denied"])


def test_a_file_where_mgm_wants_a_folder_is_refused_before_any_work(files, capsys):
    pd.DataFrame({"text": ["The council met."], "summary": ["It met."]}).to_csv(files / "rows.csv", index=False)
    (files / "taken").write_text("a file")
    store = f"sqlite:///{files / 'mlflow.db'}"
    line = one_line(["evaluate", str(files / "rows.csv"), "--batch-dir", str(files / "taken"), "--tracking-uri", store], capsys)
    assert line == f"mgm evaluate: --batch-dir {files / 'taken'} is a file, not a folder: give a folder (it is made when missing)"
    assert one_line(["demo", "--store", str(files / "taken")], capsys).startswith(f"mgm demo: --store {files / 'taken'} is a file, not a folder")


@pytest.mark.parametrize("base_url", ["not a url", "ftp://127.0.0.1:9/v1", "http:///v1", "http://judge-user:pw-4f9a1c-hunter2@127.0.0.1:99999/v1"])
def test_a_judge_base_url_no_call_can_go_to_is_refused_before_any_call(base_url, files, monkeypatch, capsys):
    pd.DataFrame({"text": ["The council met."], "summary": ["It met."]}).to_csv(files / "rows.csv", index=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    argv = ["evaluate", str(files / "rows.csv"), "--judge-model", "m", "--judge-base-url", base_url, "--tracking-uri", f"sqlite:///{files / 'mlflow.db'}"]
    line = one_line(argv, capsys)
    assert line.startswith("mgm evaluate: the judge's base URL ") and "is not an http:// or https:// URL" in line
    assert "hunter2" not in line


def test_a_row_without_an_id_in_the_id_column_is_refused_like_a_repeated_one(files, capsys):
    """Never filed under its source's hash: ids pair rows across runs."""
    pd.DataFrame({"id": ["a", None, "c"], "text": ["The council met."] * 3, "summary": ["It met."] * 3}).to_csv(files / "rows.csv", index=False)
    argv = ["evaluate", str(files / "rows.csv"), "--id-col", "id", "--tracking-uri", f"sqlite:///{files / 'mlflow.db'}"]
    assert one_line(argv, capsys) == "mgm evaluate: no id in column 'id' on row(s) 1: give every row an id (ids pair rows across runs)"


def test_a_row_whose_source_is_missing_or_has_no_letter_is_named(files, capsys):
    """The command's check of the ids before a run said "the source text must be `inputs` (a string) or
    `inputs['text']`; got ['id', 'text']" for an empty cell, naming no row, where the library names it."""
    pd.DataFrame({"id": ["a", "b", "c", "d"], "text": ["The council met.", None, "\u200b\u200b", "   "], "summary": ["It met."] * 4}
                 ).to_csv(files / "rows.csv", index=False)
    argv = ["evaluate", str(files / "rows.csv"), "--id-col", "id", "--grounding-only", "--tracking-uri", f"sqlite:///{files / 'mlflow.db'}"]
    assert mgm(argv) == 2
    err = capsys.readouterr().err
    assert "row 1 (id 'b'): the source text `inputs['text']` is missing, not text" in err
    assert "row 2 (id 'c'): " in err and "no letter or digit" in err and "row 3 (id 'd'): " in err
    assert not (files / "mlflow.db").exists()  # refused before a store is opened or a run started


def test_comparing_an_interrupted_run_says_it_was_interrupted(files, capsys, mlflow_uri_restored):
    """An mgm evaluate stopped with Ctrl-C ends FAILED before its results: "not evaluated with mlflow_genai_metrics"
    said otherwise."""
    store = f"sqlite:///{files / 'mlflow.db'}"
    client = mlflow.MlflowClient(store)
    experiment = client.create_experiment("cli", artifact_location=(files / "artifacts").as_uri())
    runs = [client.create_run(experiment).info.run_id for _ in range(2)]
    client.set_terminated(runs[0], "FAILED")
    capsys.readouterr()  # MLflow's own lines, making the store
    line = one_line(["compare", *runs, "--tracking-uri", store], capsys)
    assert line == (f"mgm compare: run {runs[0]} is FAILED and has no results: it ended (or is) before they were logged; "
                    "evaluate again (the judge's cache keeps what was answered)")


def test_advice_names_the_command_s_flags_not_the_library_s_keywords(files, capsys, monkeypatch):
    pd.DataFrame({"id": ["a"], "text": ["The council met."], "summary": ["It met."]}).to_csv(files / "rows.csv", index=False)
    monkeypatch.setenv("MGM_JUDGE_MODEL", "some-judge")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    argv = ["evaluate", str(files / "rows.csv"), "--tracking-uri", f"sqlite:///{files / 'mlflow.db'}"]
    line = one_line(argv, capsys)
    assert line.endswith("set OPENAI_API_KEY. (A server on 127.0.0.1 needs none.)") and "api_key=" not in line, line
    line = one_line([*argv, "--max-cost-usd", "1", "--judge-base-url", "http://127.0.0.1:9/v1"], capsys)
    assert line.endswith("needs prices (USD per million tokens) to turn tokens into cost: pass --prices"), line
    monkeypatch.delenv("MGM_JUDGE_MODEL")
    assert "pass --judge-model or set MGM_JUDGE_MODEL" in one_line(argv, capsys)
    assert "or pass --judge-base-url" in one_line([*argv, "--judge-model", "m", "--judge-base-url", "ftp://x"], capsys)


def test_a_reader_that_stops_reading_gets_no_traceback(files, monkeypatch):
    """``mgm ... | head -1``: the reader left, and a BrokenPipeError traceback followed."""
    import io

    pd.DataFrame({"id": ["a"], "text": ["The council met on Monday."], "summary": ["It met."]}).to_csv(files / "rows.csv", index=False)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    stdout = io.TextIOWrapper(os.fdopen(write, "wb"), line_buffering=True)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert mgm(["evaluate", str(files / "rows.csv"), "--estimate", "--judge-model", "some-judge"]) == 141  # 128 + SIGPIPE
    stdout.write("x\n")  # the stream is whole again (/dev/null): the interpreter's last flush raises nothing
    stdout.flush()


def test_csv_ids_and_summaries_are_read_as_written(files, capsys):
    """Ids 001 and 1 were one id to pandas (refused as repeated); a summary "None" was an empty summary."""
    pd.DataFrame({"id": ["001", "1", "NA"], "text": ["The council met on Monday."] * 3, "summary": ["The council met.", "None", "It met."]}
                 ).to_csv(files / "rows.csv", index=False)
    argv = ["evaluate", str(files / "rows.csv"), "--id-col", "id", "--grounding-only", "--tracking-uri", f"sqlite:///{files / 'mlflow.db'}"]
    assert mgm(argv) == 0, capsys.readouterr().err
    run_id = capsys.readouterr().out.split("run ")[1].split()[0]
    from mlflow_genai_metrics.tracking.compare import load_table

    rows = load_table(run_id, "rows", mlflow.MlflowClient())
    assert sorted(rows["id"]) == ["001", "1", "NA"]
    assert "no sentence to check" not in rows.set_index("id").loc["1", "grounding_reasoning"]  # "None" is a summary, not an empty one


def test_a_labelled_set_whose_label_binary_is_not_0_or_1_is_one_line_naming_them(files, capsys):
    """label_binary 0.9 was cut to 0 ("inconsistent") without a word; 2 failed after every row was judged."""
    path = files / "labels.jsonl"
    rows = [{"id": i, "source": "The cat sat on the mat.", "summary": "The cat sat.", "label": 1.0, "label_binary": value}
            for i, value in enumerate([1, 0, True, 0.9, 2, None, "yes"])]
    path.write_text("".join(pd.DataFrame(rows).to_json(orient="records", lines=True)))
    line = one_line(["meta-eval", str(path), "--no-log", "--grounding-only"], capsys)
    assert line == (f"mgm meta-eval: {path}: label_binary is 0 or 1 (1: fully consistent); 4 are not: line 4 (id 3): label_binary "
                    "0.9; line 5 (id 4): label_binary 2; line 6 (id 5): label_binary missing; line 7 (id 6): label_binary 'yes'")


@pytest.fixture
def mlflow_uri_restored():
    yield
    mlflow.set_tracking_uri("")


@pytest.mark.parametrize("store", ["folder", "random bytes", "a damaged header"])
def test_a_tracking_store_that_is_not_a_database_is_one_line_naming_it(store, files, capsys, mlflow_uri_restored):
    path = files / "mlflow.db"
    if store == "folder":
        path.mkdir()
    else:
        path.write_bytes((b"SQLite format 3\x00" if store == "a damaged header" else b"") + os.urandom(4096))
    line = one_line(["compare", "run-a", "run-b", "--tracking-uri", f"sqlite:///{path}"], capsys)
    problem = "names a folder, not a SQLite database file" if store == "folder" else "cannot be used: file is not a database"
    assert line == f"mgm compare: the MLflow tracking store sqlite:///{path} {problem}"


@pytest.fixture
def labelled(tmp_path):
    path = tmp_path / "labelled.jsonl"
    rows = [{"id": str(i), "source": "The council approved the budget.", "summary": "The budget passed.", "label": i % 2,
             "split": "test"} for i in range(4)]
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    return path


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--by", "nope", "mgm meta-eval: --by 'nope': labelled.jsonl has no such column"),
        ("--split", "nope", "mgm meta-eval: labelled has no split 'nope'; its splits: test"),
        ("--plot", "confusion.csv", "mgm meta-eval: --plot {dir}/confusion.csv: not an image file matplotlib writes"),
        ("--plot", "missing/confusion.png", "mgm meta-eval: --plot {dir}/missing/confusion.png: the folder {dir}/missing does not exist"),
    ],
)
def test_a_meta_eval_option_naming_what_is_not_there_is_refused_before_any_row(option, value, message, labelled, capsys):
    value = str(labelled.parent / value) if option == "--plot" else value
    line = one_line(["meta-eval", str(labelled), "--no-log", "--grounding-only", option, value], capsys)
    assert line.startswith(message.format(dir=labelled.parent))


def test_mgm_compare_with_a_metric_no_run_has_says_so_in_one_line(files, capsys, mlflow_uri_restored):
    pd.DataFrame({"id": ["a", "b"], "text": ["The council met on Monday.", "Acme shares rose."], "summary": ["The council met.", "Shares rose."]}).to_csv(files / "rows.csv", index=False)
    store = f"sqlite:///{files / 'mlflow.db'}"
    runs = []
    for _ in range(2):
        assert mgm(["evaluate", str(files / "rows.csv"), "--id-col", "id", "--grounding-only", "--tracking-uri", store]) == 0
        runs.append(capsys.readouterr().out.split("run ")[1].split()[0])
    line = one_line(["compare", *runs, "--metric", "groundng", "--tracking-uri", store], capsys)
    assert line.startswith("mgm compare: no run compared has the metric(s) 'groundng' (closest: grounding") and len(line) < 200


def test_mgm_serve_on_an_address_that_is_not_this_machines_says_so_in_one_line(capsys):
    line = one_line(["serve", "--host", "256.1.1.1"], capsys)
    assert line.startswith("mgm serve: cannot serve on 256.1.1.1: ") and line.endswith("pick another --host")


def test_the_positive_types_accept_what_they_should():
    assert (positive_int("3"), positive_number("0.5"), port_number("8080")) == (3, 0.5, 8080)
    with pytest.raises(argparse.ArgumentTypeError):
        positive_number("inf")
