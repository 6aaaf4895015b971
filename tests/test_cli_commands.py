"""The client commands of `windowstore`, run as a user runs them (subprocesses of the real CLI,
the server found through $WINDOWSTORE_TARGET) against a real server on 127.0.0.1: a stream created,
files of each format appended (from a path and from stdin), slid, queried in each output format,
a periodic query registered, read and stopped, the stream dropped; and the `sql` shell fed
statements on standard input."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from windowstore.server.cli_output import fmt_time
from windowstore.server.cli_sql import Completer
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

SAFETY_NET_S = 120


@pytest.fixture(scope="module")
def target():
    with ServerProcess() as srv:
        yield srv.target


def cli(target: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "windowstore.server.cli", *args], capture_output=True, text=True,
                         input=stdin, timeout=SAFETY_NET_S, env={**os.environ, "WINDOWSTORE_TARGET": target})
    return out


def ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, (out.stdout, out.stderr)
    return out.stdout


def test_a_stream_from_creation_to_drop_through_the_cli(target, tmp_path):
    created = json.loads(ok(cli(target, "create-stream", "pk", "--schema", "ts:int64,src:string,bytes:int64",
                                "--subwindows", "4", "--subwindow-ms", "1000", "--clock", "manual",
                                "--group-by", "src", "-o", "json")))
    assert created == [{"stream": "pk", "clock": "manual", "subwindows": 4, "subwindow": "1000 ms", "latest_slide": -1,
                        "window_start_ms": None, "window_end_ms": None, "window_rows": 0, "buffered_rows": 0,
                        "state": "running"}]
    # again: refused, unless --exist-ok
    again = cli(target, "create-stream", "pk", "--schema", "ts:int64", "--subwindows", "4", "--subwindow-ms", "10")
    assert again.returncode == 1 and again.stderr.startswith("error (ALREADY_EXISTS)")
    ok(cli(target, "create-stream", "pk", "--schema", "ts:int64,src:string,bytes:int64", "--subwindows", "4",
           "--subwindow-ms", "1000", "--clock", "manual", "--group-by", "src", "--exist-ok"))
    other = cli(target, "create-stream", "pk", "--schema", "ts:int64", "--subwindows", "4", "--subwindow-ms", "10",
                "--exist-ok")
    assert other.returncode == 1 and "exists with another definition" in other.stderr

    rows = [{"ts": i, "src": "ab"[i % 2], "bytes": 10 * i} for i in range(1, 8)]
    with open(tmp_path / "a.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["ts", "src", "bytes"])
        w.writeheader()
        w.writerows(rows[:3])
    pq.write_table(pa.Table.from_pylist(rows[3:5]), tmp_path / "b.parquet")
    jsonl = "".join(json.dumps(r) + "\n" for r in rows[5:])
    sent = [json.loads(ok(cli(target, "append", "pk", str(tmp_path / "a.csv"), "--batch-rows", "2", "-o", "json")))[0],
            json.loads(ok(cli(target, "append", "pk", str(tmp_path / "b.parquet"), "-o", "json")))[0],
            json.loads(ok(cli(target, "append", "pk", "-", "--format", "jsonl", "-o", "json", stdin=jsonl)))[0]]
    assert [(s["rows"], s["accepted"], s["late"], s["batches"]) for s in sent] == [(3, 3, 0, 2), (2, 2, 0, 1),
                                                                                  (2, 2, 0, 1)]
    assert json.loads(ok(cli(target, "slide", "pk", "-o", "json"))) == [{"stream": "pk", "slide": 0}]

    answer = json.loads(ok(cli(target, "query", "SELECT src, COUNT(*), SUM(bytes) FROM pk GROUP BY src ORDER BY 1",
                               "-o", "json")))
    assert answer["rows"] == [["a", 3, 120], ["b", 4, 160]] and answer["slide"] == 0
    as_csv = ok(cli(target, "query", "SELECT src, SUM(bytes) FROM pk GROUP BY src ORDER BY 1", "-o", "csv"))
    assert list(csv.reader(as_csv.splitlines())) == [["src", "sum(bytes)"], ["a", "120"], ["b", "160"]]
    table = ok(cli(target, "query", "SELECT COUNT(*) FROM pk", "--utc"))
    assert table.splitlines()[2].strip() == "7" and "(1 row; slide 0, window [" in table
    assert fmt_time(answer["window_start_ms"], utc=True) in table  # bounds as readable times

    listed = json.loads(ok(cli(target, "list-streams", "-o", "json")))
    assert [s["stream"] for s in listed] == ["pk"] and listed[0]["window_rows"] == 7
    described = ok(cli(target, "describe", "pk"))
    assert "event time" in described and "group by" in described

    qid = ok(cli(target, "register", "SELECT SUM(bytes) FROM pk [SLIDE 1 SUBWINDOWS]", "--key", "sum-pk", "-o", "json"))
    qid = json.loads(qid)[0]["query_id"]
    again = ok(cli(target, "register", "SELECT SUM(bytes) FROM pk [SLIDE 1 SUBWINDOWS]", "--key", "sum-pk", "-o", "json"))
    assert json.loads(again)[0]["query_id"] == qid  # the same key: the query it registered
    assert [q["query_id"] for q in json.loads(ok(cli(target, "list-queries", "-o", "json")))] == [qid]
    ok(cli(target, "append", "pk", "-", "--format", "jsonl", stdin=json.dumps({"ts": 9, "src": "a", "bytes": 1})))
    ok(cli(target, "slide", "pk"))
    kept = [json.loads(line) for line in ok(cli(target, "answers", qid, "-o", "json")).splitlines()]
    assert kept and kept[-1]["slide"] == 1 and kept[-1]["rows"] == [[281]]
    ok(cli(target, "unregister", qid))
    assert json.loads(ok(cli(target, "list-queries", "-o", "json"))) == []

    ok(cli(target, "drop-stream", "pk"))
    gone = cli(target, "drop-stream", "pk")
    assert gone.returncode == 1 and gone.stderr.startswith("error (NOT_FOUND)")
    ok(cli(target, "drop-stream", "pk", "--missing-ok"))


def test_an_idempotent_append_of_the_same_file_adds_nothing_twice(target, tmp_path):
    ok(cli(target, "create-stream", "idem", "--schema", "ts:int64,v:int64", "--subwindows", "2", "--subwindow-ms",
           "10", "--clock", "manual"))
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"ts": i, "v": i}) + "\n" for i in range(5)))
    first = json.loads(ok(cli(target, "append", "idem", str(path), "--writer-id", "loader", "-o", "json")))[0]
    second = json.loads(ok(cli(target, "append", "idem", str(path), "--writer-id", "loader", "-o", "json")))[0]
    assert (first["accepted"], first["duplicate_batches"]) == (5, 0)
    assert (second["duplicate_batches"], second["next_batch_id"]) == (1, 1)
    ok(cli(target, "slide", "idem"))
    assert json.loads(ok(cli(target, "query", "SELECT COUNT(*) FROM idem", "-o", "json")))["rows"] == [[5]]


def test_a_file_missing_a_column_is_refused_with_its_name(target, tmp_path):
    ok(cli(target, "create-stream", "miss", "--schema", "ts:int64,v:int64", "--subwindows", "2", "--subwindow-ms", "10"))
    path = tmp_path / "rows.csv"
    path.write_text("ts\n1\n")
    out = cli(target, "append", "miss", str(path))
    assert out.returncode == 1 and "no column 'v'" in out.stderr


def test_the_sql_shell_runs_the_statements_it_is_given(target):
    ok(cli(target, "create-stream", "sh", "--schema", "ts:int64,v:int64", "--subwindows", "2", "--subwindow-ms", "10",
           "--clock", "manual"))
    ok(cli(target, "append", "sh", "-", "--format", "jsonl", stdin='{"ts": 1, "v": 5}\n{"ts": 2, "v": 6}\n'))
    ok(cli(target, "slide", "sh"))
    script = "SELECT COUNT(*),\n  SUM(v) FROM sh;\n\\o csv\nSELECT MAX(v) FROM sh;\n\\watch 0 2\n\\d\n"
    out = cli(target, "sql", stdin=script)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "(1 row; slide 0" in text                          # the table of the first statement
    assert text.count("max(v)\n6\n") == 3                    # csv, then \watch ran it twice more
    assert "sh" in text and "manual" in text                 # \d listed the streams
    bad = cli(target, "sql", stdin="SELECT nope FROM sh;\n")
    assert bad.returncode == 1 and "error (INVALID_ARGUMENT)" in bad.stderr


def test_completion_offers_keywords_streams_and_columns():
    c = Completer(["packets", "src", "bytes"])
    assert c.candidates("pa") == ["packets"] and c.candidates("sel") == ["SELECT"]
    assert c.candidates("S")[:3] == ["SELECT", "SLIDE", "SUBWINDOWS"] and "src" in c.candidates("s")
    assert [c.complete("b", i) for i in range(3)] == ["BETWEEN", "bytes", None]


def test_explain_names_the_access_path_and_what_it_reads(target):
    ok(cli(target, "create-stream", "ex", "--schema", "ts:int64,src:string,bytes:int64", "--subwindows", "10",
           "--subwindow-ms", "1000", "--clock", "manual", "--group-by", "src"))
    for i in range(3):
        ok(cli(target, "append", "ex", "-", "--format", "jsonl", stdin=json.dumps({"ts": i, "src": "a", "bytes": i})))
        ok(cli(target, "slide", "ex"))
    probe = json.loads(ok(cli(target, "explain", "SELECT COUNT(*), SUM(bytes) FROM ex", "-o", "json")))
    assert probe["access"] == "probe" and probe["reads"] == 1 and probe["subwindows"] == 10
    assert [(a["function"], a["source"]) for a in probe["aggregates"]] == [("count", "synopses"), ("sum", "synopses")]
    scan = json.loads(ok(cli(target, "explain", "SELECT COUNT(*) FROM ex [RANGE 4 s] WHERE bytes > 1", "-o", "json")))
    assert scan["access"] == "window" and scan["reads"] == 4 and "WHERE needs the rows" in scan["how"]
    periodic = json.loads(ok(cli(target, "explain", "SELECT src, SUM(bytes) FROM ex [RANGE 5 s SLIDE 2 s] GROUP BY src",
                                 "-o", "json")))
    assert periodic["every_slides"] == 2 and periodic["group_by"] == ["src"] and "runs alone" in periodic["sharing"]
    # the access path explain names is the one the query then takes
    for text, plan in [("SELECT COUNT(*), SUM(bytes) FROM ex", probe),
                       ("SELECT COUNT(*) FROM ex [RANGE 4 s] WHERE bytes > 1", scan)]:
        assert json.loads(ok(cli(target, "query", text, "-o", "json")))["access"] == plan["access"]
    table = ok(cli(target, "explain", "SELECT MAX(bytes) FROM ex"))
    assert table.startswith("access path: probe on ex") and "label" in table
