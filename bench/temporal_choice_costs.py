"""Where the measured choice's time goes, from a run of `make coalesce-choice` (its saved files), and
the first round's rule replayed on the run's forced pairs.

1. By place in the choice's life, each execution of the measured plan over the forced plan of the
   same strategy at the same slide (paired; the A/A copy's over forced eager beside): steady
   executions far from any probe (`--far` executions of the same strategy before and after), those
   just before a probe (the ones the choice times to pair with it), and the first after a change of
   strategy (eager after lazy builds the sub-windows lazy did not; each meets the other's garbage).
2. The first round's sequential test replayed on each life's forced pairs (log eager / lazy of the
   forced plans at the same slide, in the order they ran), from either start: the pairs a round
   takes, how often it ends on the strategy the verdict calls the worse (and where that one is
   over the floor), and what it costs in executions of the life: per pair the dearer strategy's
   excess and the change of strategy's excess measured in part 1, plus the rest of the life on the
   worse strategy where it ends there. The replay has no copy of the plan and no alternation's own
   effect on the pairs: it compares the tests' statistics, not the grid's outcome.

    python -m bench.temporal_choice_costs --run docs/coalesce/choice
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from bench.temporal_experiment import AA, MEASURED, by_repeat, load, verdict
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.temporal import shift_interval


def _geo(logs: list[float]) -> str:
    if not logs:
        return "-"
    s = sorted(logs)
    return f"median {math.exp(s[len(s) // 2]):.4f}, mean {math.exp(sum(s) / len(s)):.4f} ({len(s)})"


def places(cells: list[dict], far: int) -> dict:
    """log(measured / forced of the same strategy) per execution, by place; the A/A beside."""
    out: dict = {k: [] for k in ("far eager", "far lazy", "before a probe eager", "before a probe lazy",
                                 "eager after lazy", "lazy after eager")}
    aa: dict = {k: [] for k in out}
    for c in cells:
        for rc in by_repeat(c):
            ran, t = rc["measured_ran"], rc["times"]
            n = len(ran)
            for j in range(1, n):
                st = ran[j]
                x = math.log(t[MEASURED][j] / max(t[st][j], 1e-9))
                a = math.log(t[AA][j] / max(t[EAGER][j], 1e-9))
                if st != ran[j - 1]:
                    key = f"{st} after {ran[j - 1]}"
                elif j >= far and j + far < n and all(r == st for r in ran[j - far:j + far + 1]):
                    key = f"far {st}"
                elif j >= far and all(r == st for r in ran[j - far:j + 1]) and st in ran[j + 1:j + far + 1] and \
                        any(r != st for r in ran[j + 1:j + far + 1]):
                    key = f"before a probe {st}"
                else:
                    continue
                out[key].append(x)
                aa[key].append(a)
    return {"measured": out, "aa": aa}


def sign_interval(logs: list[float], confidence: float) -> tuple[float, float | None, float | None]:
    """The median and the sign test's interval (MeasuredChoice's rule before round 25)."""
    r = sorted(logs)
    n = len(r)
    mid = r[n // 2] if n % 2 else (r[n // 2 - 1] + r[n // 2]) / 2
    tail, k, below = (1 - confidence) / 2, -1, 0.0
    while k + 1 < n and below + math.comb(n, k + 1) / 2 ** n <= tail:
        below += math.comb(n, k + 1) / 2 ** n
        k += 1
    return (mid, r[k], r[n - 1 - k]) if k >= 0 else (mid, None, None)


def first_round(pairs: list[float], interval, trials: int, max_trials: int, start: str, margin: float = 0.01,
                confidence: float = 0.9) -> tuple[int, str]:
    """(pairs taken, strategy it ends on): MeasuredChoice's first round on log(eager / lazy) pairs."""
    cut = math.log(1 - margin)
    other = LAZY if start == EAGER else EAGER
    for n in range(1, len(pairs) + 1):
        mid, low, high = interval(pairs[:n], confidence)
        if start == EAGER:  # toward the other: log(lazy / eager)
            mid, low, high = -mid, (None if high is None else -high), (None if low is None else -low)
        decided = None
        if n >= trials and low is not None and high is not None:
            decided = True if high < cut else False if low > cut else None
        if decided is None and n >= max_trials:
            decided = mid < cut
        if decided is not None:
            return n, other if decided else start
    return len(pairs), start


RULES = {"sign test, 5-24 pairs (before)": (sign_interval, 24), "signed rank, 5-24 pairs (round 25)": (shift_interval, 24),
         "signed rank, 5-16 pairs": (shift_interval, 16), "signed rank, 5-12 pairs": (shift_interval, 12),
         "sign test, 5-12 pairs": (sign_interval, 12)}


def replay(cells: list[dict], change: float) -> dict:
    """Each rule's first round on every life's forced pairs from both starts: pairs, wrong ends,
    wrong ends where the worse is over the floor, and its cost in executions per life (share)."""
    v = verdict(cells)
    out = {}
    for name, (interval, max_trials) in RULES.items():
        pairs = wrong = wrong_over = lives = 0
        cost = 0.0
        executions = 0
        for c, row in zip(cells, v["cells"]):
            gap = abs(row["eager_over_lazy"]["log"])
            for rc in by_repeat(c):
                logs = [math.log(x) for x in rc["ratios"]]
                for start in (EAGER, LAZY):
                    n, end = first_round(logs, interval, 5, max_trials, start)
                    lives += 1
                    pairs += n
                    executions += len(logs)
                    cost += n * (gap + change)
                    if end != row["better"]:
                        wrong += 1
                        wrong_over += gap > v["floor_log"]
                        cost += gap * max(len(logs) - 2 * n, 0)
        out[name] = {"pairs": pairs / lives, "wrong": wrong / lives, "wrong_over_floor": wrong_over,
                     "lives": lives, "cost": cost / executions}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=Path("docs/coalesce/choice"))
    ap.add_argument("--far", type=int, default=10)
    args = ap.parse_args()
    cells = load(args.run)["cells"]
    p = places(cells, args.far)
    print(f"the measured choice's executions over the forced plan of the same strategy at the same slide "
          f"(the A/A over forced eager at the same executions), {args.run}:")
    for key, logs in p["measured"].items():
        print(f"  {key:22s} {_geo(logs)}   A/A {_geo(p['aa'][key])}")
    e_l = math.exp(sum(p["measured"]["eager after lazy"]) / max(len(p["measured"]["eager after lazy"]), 1)) - 1
    l_e = math.exp(sum(p["measured"]["lazy after eager"]) / max(len(p["measured"]["lazy after eager"]), 1)) - 1
    change = (e_l + l_e) / 2  # a round's pair holds one change of strategy, each way in turn
    print(f"a round's change of strategy costs {change:.3f} of an execution per pair (eager after lazy {e_l:+.1%}, "
          f"lazy after eager {l_e:+.1%}, means)")
    for name, r in replay(cells, change).items():
        print(f"  {name:36s} pairs {r['pairs']:5.1f}, ends on the worse in {r['wrong']:.1%} of {r['lives']} lives "
              f"({r['wrong_over_floor']} where it is over the floor), cost {r['cost']:.2%} of the life's executions")


if __name__ == "__main__":
    main()
