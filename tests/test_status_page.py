"""The server's HTTP side against a real server on loopback: /metrics, /healthz, /readyz, 404 for
other paths, and the live status page, whose numbers are checked against `stats` and
`describe_stream` — through its JSON, and as a person sees it: loaded in headless Chromium (Debian's
chromium-headless-shell, which `make test` installs), its DOM read back and a screenshot taken.
`UPDATE_DOCS_SCREENSHOTS=1` copies the screenshot to docs/images/ for the documentation."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import wait_for

from windowstore.clients import Client
from windowstore.server.http import Endpoints, Health
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
CHROME = shutil.which("chromium-headless-shell") or shutil.which("chromium")
DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--http-port", "0", "--metrics-port", "0") as srv:
        srv.http = re.search(r"status page on (http://\S+/)", srv.banner).group(1)
        srv.metrics = re.search(r"metrics on (http://\S+)/metrics", srv.banner).group(1)
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("packets", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
            ws.create_stream("flows", SCHEMA, subwindows=10, subwindow_rows=2, clock="manual")
            q = ws.register("SELECT src, SUM(bytes) FROM packets [RANGE 2 s SLIDE 1 s] GROUP BY src ORDER BY 2 DESC")
            for i in range(3):
                ws.append("packets", {"ts": [i * 1000 + 1, i * 1000 + 2, i * 1000 + 3], "src": ["a", "b", "a"],
                                      "bytes": [100, 200, 300 + i]})
                ws.slide("packets")
            ws.append("flows", {"ts": [1, 2, 3, 4, 5], "src": ["x"] * 5, "bytes": [1] * 5})
            for _ in range(5):
                ws.query("SELECT COUNT(*) FROM packets")
            # the periodic query answers the newest slide: the page shows it
            wait_for(lambda: ws.read_answers(q.id)[1] >= 2, "the periodic query's answer of slide 2", timeout=60)
        srv.query_id = q.id
        yield srv


def test_health_endpoints_answer_and_other_paths_are_404(server):
    for base in (server.http, server.metrics + "/"):
        assert get(base + "healthz")[::2] == (200, "ok\n")
        assert get(base + "readyz")[::2] == (200, "ready\n")
        assert get(base + "nope")[0] == 404
        status, ctype, text = get(base + "metrics")
        assert status == 200 and ctype.startswith("text/plain") and 'windowstore_slides_total{stream="packets"} 3.0' in text
    # the status page is on --http-port only
    assert get(server.metrics + "/")[0] == 404 and get(server.metrics + "/api/status")[0] == 404
    assert get(server.http)[0] == 200


def test_the_status_json_says_what_stats_and_describe_say(server):
    with Client(server.target, timeout=30) as ws:
        stats = {s["stream"]: s for s in ws.stats()["streams"]}
        infos = {s["spec"]["name"]: s for s in ws.list_streams()}
        answers, newest, _ = ws.read_answers(server.query_id)
    status, ctype, body = get(server.http + "api/status")
    assert status == 200 and ctype == "application/json"
    page = json.loads(body)
    assert page["health"] == {"ready": True, "reason": "", "live": True}
    shown = {s["name"]: s for s in page["streams"]}
    assert set(shown) == set(stats) == {"packets", "flows"}
    for name, s in shown.items():
        for key in ("slides", "queries", "aborts", "late_rows", "accepted_rows"):
            assert s[key] == stats[name][key], (name, key)
        for key in ("latest_slide", "buffered_rows", "window_rows", "window_start_ms", "window_end_ms"):
            assert s[key] == infos[name][key], (name, key)
    assert shown["packets"]["sealed"] == 3 and shown["flows"]["sealed"] == 2 and shown["flows"]["buffered_rows"] == 1
    (q,) = page["queries"]
    assert q["id"] == server.query_id and q["latest"]["slide"] == 2
    assert newest == 2 and answers[-1].rows == [("a", 803), ("b", 400)]
    assert q["latest"]["columns"] == list(answers[-1].columns) and q["latest"]["rows"] == [["a", 803], ["b", 400]]


class _Cells(HTMLParser):
    """The text of every <td data-stream=... data-field=...> of the rendered page."""

    def __init__(self):
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self._at: tuple[str, str] | None = None
        self.loaded = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-loaded") == "1":
            self.loaded = True
        if tag == "td" and "data-stream" in a:
            self._at = (a["data-stream"], a["data-field"])
            self.cells[self._at] = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._at = None

    def handle_data(self, data):
        if self._at is not None:
            self.cells[self._at] += data


@pytest.mark.skipif(CHROME is None, reason="headless Chromium is not installed (make test installs it)")
def test_the_page_in_a_real_browser_shows_the_numbers_stats_gives(server, tmp_path):
    with Client(server.target, timeout=30) as ws:
        stats = {s["stream"]: s for s in ws.stats()["streams"]}
        infos = {s["spec"]["name"]: s for s in ws.list_streams()}
    flags = [CHROME, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1800,1000",
             "--virtual-time-budget=8000"]
    dom = subprocess.run([*flags, "--dump-dom", server.http], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Cells()
    page.feed(dom.stdout)
    assert page.loaded, "the page never rendered its data"
    for name in ("packets", "flows"):
        assert page.cells[(name, "slides")] == f"{stats[name]['slides']:,}"
        assert page.cells[(name, "window_rows")] == f"{infos[name]['window_rows']:,}"
        assert page.cells[(name, "latest_slide")] == f"{infos[name]['latest_slide']:,}"
        assert page.cells[(name, "queries")] == f"{stats[name]['queries']:,}"
        assert page.cells[(name, "state")] == "running"
    assert page.cells[("packets", "fill")].strip().endswith("3/4")
    shot = tmp_path / "status-page.png"
    run = subprocess.run([*flags, f"--screenshot={shot}", server.http], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.stat().st_size > 10_000, run.stderr[-2000:]
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_IMAGES / "status-page.png")


def test_readiness_says_why_it_is_not_ready():
    reasons = iter([(False, "stream 's' stopped: sealing its slide 3 failed")])
    e = Endpoints(None, Health(lambda: (True, ""), lambda: next(reasons)), status=False)
    port = e.serve("127.0.0.1", 0)
    try:
        status, _, text = get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503 and "sealing its slide 3 failed" in text
        assert get(f"http://127.0.0.1:{port}/metrics")[0] == 404  # no registry given: nothing to serve there
    finally:
        e.close()
