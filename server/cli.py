"""The `windowstore` command: serve | query | register | subscribe | stats | check-history |
simulate | demo."""
from __future__ import annotations

import argparse
import json
import sys


def _check_history(args) -> int:
    from windowstore.txn import check, read_jsonl

    try:
        with open(args.file, encoding="utf-8") as f:
            report = check(read_jsonl(f))
    except (OSError, ValueError) as e:
        print(f"check-history: {e}", file=sys.stderr)
        return 2
    bad = report.violations(args.expect) if args.expect else []
    out = {"summary": report.summary(), "errors": report.errors[:20],
           "violations": [{"stream": v.stream, "txn": v.txn, "level": v.level, "versions": v.versions,
                           "latest_at_commit": v.latest_at_commit, "window_len": v.window_len} for v in bad[:20]]}
    print(json.dumps(out, indent=1))
    return 1 if bad or report.errors else 0


def _simulate(args) -> int:
    from windowstore.txn.simulator import calibrate, run_many

    if args.calibrate:
        print(json.dumps(calibrate()))
        return 0
    out = run_many(args.policy or ["serial", "ws", "lws", "ttu", "ttu-rescan"], history_dir=args.history_dir,
                   subwindows=args.subwindows, subwindow_ms=args.subwindow_ms, periodic=args.periodic,
                   onetime_rate=args.onetime_rate, duration_s=args.duration_s, seed=args.seed,
                   rows_per_ms=args.rows_per_ms, row_cost_us=args.row_cost_us,
                   read_fixed_us=args.read_fixed_us, seal_row_us=args.seal_row_us)
    if args.json:
        print(json.dumps(out))
    else:
        cols = ["policy", "committed", "abort_pct", "staleness_ms_mean", "onetime_response_ms_mean",
                "inter_exec_ms_mean", "throughput_qps", "max_slide_delay_ms"]
        print("  ".join(f"{c:>24}" for c in cols))
        for r in out["results"]:
            print("  ".join(f"{str(r[c]):>24}" for c in cols))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="windowstore", description="A transactional sliding-window store.")
    sub = ap.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("check-history", help="classify every committed query of a history as LWS, WS only or torn")
    ch.add_argument("file", help="a history: JSON lines as recorded with --history")
    ch.add_argument("--expect", choices=["lws", "ws"], help="exit 1 if any committed query is below this level")
    ch.set_defaults(func=_check_history)

    from windowstore.txn.simulator import DEFAULT_READ_FIXED_US, DEFAULT_ROW_COST_US, DEFAULT_SEAL_ROW_US
    sim = sub.add_parser("simulate", help="run the schedulers in virtual time on the thesis's workload (section 7.5)",
                         description="Runs the real scheduler and store in virtual time with a cost model on the "
                                     "workload of thesis section 7.5.1 and prints, per policy, aborts, staleness, "
                                     "response and inter-execution times, throughput and slide delay.")
    sim.add_argument("--policy", action="append", choices=["serial", "ws", "lws", "ttu", "ttu-rescan"],
                     help="a policy to run (repeatable; default: all five)")
    sim.add_argument("--subwindows", type=int, default=20, help="n, sub-windows per window (default 20)")
    sim.add_argument("--subwindow-ms", type=int, default=1000, help="t, sub-window length in ms (default 1000)")
    sim.add_argument("--periodic", type=int, default=40, help="periodic queries, re-executed continually (default 40)")
    sim.add_argument("--onetime-rate", type=float, default=0.0, help="one-time queries per second, Poisson (default 0)")
    sim.add_argument("--duration-s", type=float, default=None, help="virtual seconds to run (default: one window length)")
    sim.add_argument("--seed", type=int, default=0, help="random seed; same seed, same output (default 0)")
    sim.add_argument("--history-dir", help="write each policy's history to DIR/<policy>.jsonl")
    sim.add_argument("--json", action="store_true", help="print {\"results\": [...]} as JSON")
    sim.add_argument("--rows-per-ms", type=float, default=1.0, help="mean packets per ms (default 1, as the thesis)")
    sim.add_argument("--row-cost-us", type=float, default=DEFAULT_ROW_COST_US,
                     help=f"virtual cost of scanning one row, us (default {DEFAULT_ROW_COST_US}, calibrated here)")
    sim.add_argument("--read-fixed-us", type=float, default=DEFAULT_READ_FIXED_US,
                     help=f"fixed virtual cost of one sub-window read, us (default {DEFAULT_READ_FIXED_US})")
    sim.add_argument("--seal-row-us", type=float, default=DEFAULT_SEAL_ROW_US,
                     help=f"virtual cost of sealing one row in a slide, us (default {DEFAULT_SEAL_ROW_US})")
    sim.add_argument("--calibrate", action="store_true", help="measure this machine's costs and print them")
    sim.set_defaults(func=_simulate)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
