"""The Grafana dashboard (docs/grafana/windowstore.json) asks only for metrics a real server
exports: every metric name in its PromQL is in a scrape of a server that has done some work."""
from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from windowstore.clients import Client
from windowstore.server.process import ServerProcess
import pytest

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "windowstore.json"
_METRIC = re.compile(r"\b((?:windowstore|grpc_server)_[a-z_]+)")


def test_every_panel_queries_metrics_the_server_exports():
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(dash["panels"]) >= 10 and all(exprs)
    wanted = {m for e in exprs for m in _METRIC.findall(e)}
    with ServerProcess("--metrics-port", "0") as srv:
        url = re.search(r"metrics on (http://[^\s;)]+)", srv.banner).group(1)
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("g", {"ts": "int64", "v": "int64"}, subwindows=2, subwindow_ms=1000, clock="manual")
            ws.append("g", {"ts": [1], "v": [1]})
            ws.slide("g")
            ws.query("SELECT COUNT(*) FROM g")
        text = urllib.request.urlopen(url, timeout=30).read().decode()
    exported = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    missing = sorted(wanted - exported)
    assert not missing, f"the dashboard asks for metrics the server does not export: {missing}"
