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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="windowstore", description="A transactional sliding-window store.")
    sub = ap.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("check-history", help="classify every committed query of a history as LWS, WS only or torn")
    ch.add_argument("file", help="a history: JSON lines as recorded with --history")
    ch.add_argument("--expect", choices=["lws", "ws"], help="exit 1 if any committed query is below this level")
    ch.set_defaults(func=_check_history)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
