"""`make loadtest`: a bounded headless locust run per policy against a server it starts, with
thresholds that fail the run, the history checked, and a report (markdown table + PNG plots).

    python loadtest/run.py --policy ttu --duration-s 20            # smoke
    python loadtest/run.py --duration-s 60 --out docs/loadtest      # all five policies
    python loadtest/run.py --policy ttu --secure                    # over mutual TLS with a token

Exit status 1 when a threshold is crossed or a ttu history is not latest-window serializable.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ["serial", "ws", "lws", "ttu", "ttu-rescan"]


def read_stats(csv_path: Path) -> dict[str, dict]:
    out = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            out[f"{row['Type']} {row['Name']}"] = row
    return out


def num(row: dict | None, key: str) -> float:
    if not row:
        return 0.0
    v = row.get(key, "")
    return float(v) if v not in ("", "N/A") else 0.0


def secure_setup(out: Path, env: dict) -> list[str]:
    """A throwaway CA, server and client certificates and a tokens file: the server's arguments for
    mutual TLS and tokens; the clients' settings go into `env` (see locustfile.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pki import make_pki
    from windowstore.server.security import token_hash

    pki = make_pki(out / "pki")
    token = "loadtest-" + os.urandom(8).hex()
    tokens = out / "pki" / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {token_hash(token): "loadtest"}, "grants": {"loadtest": {"*": ["admin"]}}}))
    env.update(WS_TLS_CA=pki["ca"], WS_TLS_CERT=pki["client"], WS_TLS_KEY=pki["client_key"], WS_TOKEN=token)
    return ["--tls-cert", pki["server"], "--tls-key", pki["server_key"], "--tls-client-ca", pki["ca"],
            "--tokens", str(tokens)]


def run_policy(policy: str, args, out: Path) -> dict:
    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess
    from windowstore.txn import check, read_jsonl

    history = out / f"{policy}-history.jsonl"
    env = {**os.environ, "WS_SUBWINDOWS": str(args.subwindows), "WS_SUBWINDOW_MS": str(args.subwindow_ms),
           "WS_PERIODIC": str(args.periodic), "WS_BATCH_ROWS": str(args.batch_rows), "PYTHONUNBUFFERED": "1"}
    server_args = ["--policy", policy, "--history", str(history), "--history-keep", "1000"]
    if args.secure:
        server_args += secure_setup(out, env)
    srv = ServerProcess(*server_args)
    try:
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtest" / "locustfile.py"), "--headless",
               "-u", str(args.users), "-r", str(args.spawn_rate), "-t", f"{int(args.duration_s)}s",
               "--host", srv.target, "--csv", str(out / policy), "--only-summary", "--stop-timeout", "5",
               "--exit-code-on-error", "0", "--loglevel", "WARNING"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.duration_s + 120)
        if proc.returncode != 0 or "Traceback" in proc.stderr:
            raise RuntimeError(f"locust failed ({proc.returncode}): {proc.stderr[-3000:]}")
        with Client(srv.target, ca=env.get("WS_TLS_CA"), cert=env.get("WS_TLS_CERT"), key=env.get("WS_TLS_KEY"),
                    token=env.get("WS_TOKEN")) as ws:
            server_stats = ws.stats("ls_packets")
    finally:
        code, _, err = srv.stop()
    with open(history) as f:
        report = check(read_jsonl(f))
    if not args.keep_history:
        history.unlink()  # the verdict goes into results.json; histories are tens of MB
    stats = read_stats(out / f"{policy}_stats.csv")
    agg = stats.get(" Aggregated", {})
    grpc_rows = [r for k, r in stats.items() if k.startswith("grpc ")]
    requests = sum(num(r, "Request Count") for r in grpc_rows)
    failures = sum(num(r, "Failure Count") for r in grpc_rows)
    queries = [r for k, r in stats.items() if k.startswith("grpc Query")]
    q_count = sum(num(r, "Request Count") for r in queries)
    s = server_stats["streams"][0]
    committed, aborts = int(s["queries"]), int(s["aborts"])
    result = {
        "policy": policy,
        "secure": bool(args.secure),
        "requests": int(requests),
        "error_ratio": failures / requests if requests else 1.0,
        "query_p50_ms": max((num(r, "50%") for r in queries), default=0.0),
        "query_p95_ms": max((num(r, "95%") for r in queries), default=0.0),
        "query_rps": sum(num(r, "Requests/s") for r in queries),
        "append_p95_ms": num(stats.get("grpc Append"), "95%"),
        "staleness_onetime_p50_ms": num(stats.get("staleness staleness one-time"), "50%"),
        "staleness_onetime_p95_ms": num(stats.get("staleness staleness one-time"), "95%"),
        "staleness_periodic_p50_ms": num(stats.get("staleness staleness periodic"), "50%"),
        "staleness_periodic_p95_ms": num(stats.get("staleness staleness periodic"), "95%"),
        "restarted_answers": int(sum(num(r, "Request Count") for k, r in stats.items() if k.startswith("restarts "))),
        "committed": committed,
        "aborts": aborts,
        "abort_pct": 100.0 * aborts / (committed + aborts) if committed + aborts else 0.0,
        "slide_delay_p99_ms": float(s["slide_delay_ms"]["p99"]),
        "history": report.summary(),
        "server_exit": code,
        "queries": int(q_count),
        "aggregated_requests": int(num(agg, "Request Count")),
    }
    if "Traceback" in err:
        result["server_errors"] = err[-2000:]
    return result


def verdict(r: dict, args) -> list[str]:
    problems = []
    if r["error_ratio"] > args.max_error_ratio:
        problems.append(f"error ratio {r['error_ratio']:.3%} > {args.max_error_ratio:.3%}")
    if args.timing_goals and r["query_p95_ms"] > args.max_p95_ms:
        problems.append(f"query p95 {r['query_p95_ms']:.0f} ms > {args.max_p95_ms:.0f} ms")
    stale = max(r["staleness_onetime_p95_ms"], r["staleness_periodic_p95_ms"])
    if args.timing_goals and stale > args.max_staleness_p95_ms:
        problems.append(f"staleness p95 {stale:.0f} ms > {args.max_staleness_p95_ms:.0f} ms")
    if r["queries"] == 0:
        problems.append("no query was answered")
    if r["history"]["errors"]:
        problems.append(f"history has {r['history']['errors']} inconsistencies")
    if r["policy"] in ("lws", "ttu", "ttu-rescan", "serial") and r["history"]["torn"] + r["history"]["ws_only"]:
        problems.append(f"history not LWS: {r['history']}")
    if r.get("server_errors") or r["server_exit"] != 0:
        problems.append("the server logged errors or exited badly")
    return problems


def plot(results: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["policy"] for r in results]
    x = range(len(names))
    files = []

    def bars(fname, title, ylabel, series):
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.8 / len(series)
        for i, (label, values) in enumerate(series):
            ax.bar([p + i * width for p in x], values, width, label=label)
        ax.set_xticks([p + width * (len(series) - 1) / 2 for p in x], names)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("policy")
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        files.append(fname)

    bars("staleness.png", "Answer staleness by policy (lower is fresher)", "staleness (ms)", [
        ("one-time p50", [r["staleness_onetime_p50_ms"] for r in results]),
        ("one-time p95", [r["staleness_onetime_p95_ms"] for r in results]),
        ("periodic p50", [r["staleness_periodic_p50_ms"] for r in results]),
        ("periodic p95", [r["staleness_periodic_p95_ms"] for r in results])])
    bars("response_time.png", "One-time query response time by policy (client side)", "response time (ms)", [
        ("p50", [r["query_p50_ms"] for r in results]), ("p95", [r["query_p95_ms"] for r in results])])
    bars("aborts.png", "Aborted query attempts by policy", "aborted attempts (% of attempts)", [
        ("abort %", [r["abort_pct"] for r in results])])
    return files


def write_report(results: list[dict], files: list[str], args, out: Path) -> None:
    lines = [f"# Load test ({args.users} users, {args.duration_s:g} s per policy, {args.subwindows} x {args.subwindow_ms} ms "
             f"sub-windows, {args.periodic} periodic queries)", "",
             "| policy | requests | error % | query p50 / p95 (ms) | queries/s | staleness one-time p50 / p95 (ms) | "
             "staleness periodic p50 / p95 (ms) | abort % | restarted answers | slide delay p99 (ms) | history |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        h = r["history"]
        lines.append(f"| {r['policy']} | {r['requests']} | {100 * r['error_ratio']:.2f} | {r['query_p50_ms']:.0f} / {r['query_p95_ms']:.0f} | "
                     f"{r['query_rps']:.0f} | {r['staleness_onetime_p50_ms']:.0f} / {r['staleness_onetime_p95_ms']:.0f} | "
                     f"{r['staleness_periodic_p50_ms']:.0f} / {r['staleness_periodic_p95_ms']:.0f} | {r['abort_pct']:.2f} | "
                     f"{r['restarted_answers']} | {r['slide_delay_p99_ms']:.1f} | {h['lws']} LWS, {h['ws_only']} WS only, {h['torn']} torn |")
    lines += [""] + [f"![{f}]({f})" for f in files] + [""]
    (out / "report.md").write_text("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", choices=POLICIES, help="repeatable (default: all five)")
    ap.add_argument("--duration-s", type=float, default=30.0)
    ap.add_argument("--users", type=int, default=24)
    ap.add_argument("--spawn-rate", type=float, default=24)
    ap.add_argument("--subwindows", type=int, default=20)
    ap.add_argument("--subwindow-ms", type=int, default=250)
    ap.add_argument("--periodic", type=int, default=8)
    ap.add_argument("--batch-rows", type=int, default=2000)
    ap.add_argument("--max-error-ratio", type=float, default=0.01)
    ap.add_argument("--max-p95-ms", type=float, default=1000.0)
    ap.add_argument("--max-staleness-p95-ms", type=float, default=2000.0)
    ap.add_argument("--no-timing-goals", dest="timing_goals", action="store_false",
                    help="judge errors and the history only, not the p95 goals (the tests: their timing depends on the machine's load)")
    ap.add_argument("--out", default=str(ROOT / "out" / "loadtest"))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--secure", action="store_true",
                    help="serve mutual TLS with bearer tokens (a throwaway CA and token) and load it that way")
    ap.add_argument("--keep-history", action="store_true", help="keep OUT/<policy>-history.jsonl")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, failed = [], False
    for policy in args.policy or POLICIES:
        r = run_policy(policy, args, out)
        problems = verdict(r, args)
        r["problems"] = problems
        results.append(r)
        status = "FAIL: " + "; ".join(problems) if problems else "ok"
        print(f"{policy:>10}: {r['queries']} queries, p95 {r['query_p95_ms']:.0f} ms, staleness p95 "
              f"{max(r['staleness_onetime_p95_ms'], r['staleness_periodic_p95_ms']):.0f} ms, aborts {r['abort_pct']:.2f}%, "
              f"history {r['history']} -> {status}", flush=True)
        failed |= bool(problems)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    files = [] if args.no_plots else plot(results, out)
    write_report(results, files, args, out)
    print(f"report: {out / 'report.md'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
