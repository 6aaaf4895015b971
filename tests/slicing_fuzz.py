"""Fuzzing windows that cut sub-windows (store/slicing.py): thousands of random shapes (sub-window
length, RANGE, SLIDE, allowed lateness, out-of-order and late rows, WHERE, GROUP BY, access path),
each checked against seed 003's Definition 10 evaluated in Python and against DuckDB over the
accepted rows with the bounds each answer reports (the cases of tests/test_slicing.py); and as many
cumulative windows (store/cumulative.py: RANGE UNBOUNDED with or without SLIDE, CUMULATE STEP s
SIZE p, the cases of tests/test_cumulative.py), checked the same way; and as many ungrouped
COUNT/SUM/MIN/MAX shapes whose parts of sub-windows are read from the aggregate store
(slicing.RunStore, check_store_case).

    python tests/slicing_fuzz.py --cases 5000 --seed 1
    python tests/slicing_fuzz.py --case 123 --seed 1      # re-run one case
    python tests/slicing_fuzz.py --shapes cumulative      # only one kind
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback

from test_cumulative import check_cumulative_case
from test_slicing import check_case, check_store_case

KINDS = {"slicing": check_case, "cumulative": check_cumulative_case, "store": check_store_case}


def case_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--case", type=int, help="run only this case index, with its traceback")
    ap.add_argument("--shapes", choices=[*KINDS, "all"], default="all", help="which kinds of window to fuzz")
    args = ap.parse_args(argv)
    indexes = [args.case] if args.case is not None else range(args.cases)
    bad = 0
    for kind, check in KINDS.items():
        if args.shapes not in (kind, "all"):
            continue
        failed, t0 = [], time.monotonic()
        for i in indexes:
            try:
                check(case_seed(args.seed, i))
            except Exception:  # noqa: BLE001  (a fuzzer reports every failure, then exits non-zero)
                failed.append(i)
                if args.case is not None or len(failed) <= 3:
                    traceback.print_exc()
        print(f"{kind} fuzz: {len(indexes)} cases, seed {args.seed}, {len(failed)} failed"
              f"{' (case indexes ' + ', '.join(map(str, failed[:20])) + ')' if failed else ''}, "
              f"{time.monotonic() - t0:.1f} s")
        bad += len(failed)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
