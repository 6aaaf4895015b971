"""Histories H_a..H_f of thesis sections 7.3.1 and 7.4.2, in the thesis's notation, converted to
the history events of txn/history.py (versions follow from which slide last wrote each sub-window)."""
from __future__ import annotations

import re

N = 5
THESIS = {
    "H_a": "r_Q1[0] w_5[0] c_5 w_6[1] c_6 r_Q1[1] r_Q1[2] r_Q1[3] r_Q1[4] c_Q1",
    "H_b": "r_Q1[0] w_5[0] c_5 r_Q1[1] w_6[1] c_6 r_Q1[2] r_Q1[3] r_Q1[4] c_Q1",
    "H_c": "w_5[0] c_5 r_Q1[0] r_Q1[1] r_Q1[2] r_Q1[3] w_6[1] c_6 r_Q1[4] c_Q1",
    "H_d": "w_5[0] c_5 r_Q1[0] w_6[1] c_6 r_Q1[1] r_Q1[2] r_Q1[3] r_Q1[4] c_Q1",
    "H_e": "r_Q1[4] w_5[0] c_5 r_Q1[0] r_Q1[3] r_Q1[2] w_6[1] c_6 r_Q1[1] c_Q1",
    "H_f": "r_Q1[0] w_5[0] c_5 r_Q1[1] r_Q1[2] r_Q1[3] w_6[1] c_6 r_Q1[4] c_Q1",
}
_OP = re.compile(r"([rwc])_(Q?\d+)(?:\[(\d+)\])?")


def to_events(text: str, stream: str = "s") -> list[dict]:
    """T_0..T_4 fill the window first (the thesis omits them); then the history as written."""
    events: list[dict] = []
    held: dict[int, int] = {}

    def emit(op, txn, subwindow=None, version=None, window_len=None):
        events.append({"seq": len(events), "stream": stream, "op": op, "txn": txn, "subwindow": subwindow,
                       "version": version, "window_len": window_len, "t": len(events)})

    for j in range(N):
        emit("w", f"T{j}", j % N, j)
        emit("c", f"T{j}")
        held[j % N] = j
    begun = set()
    for op, txn, sub in _OP.findall(text):
        if op == "w":
            v = int(txn)
            held[int(sub)] = v
            emit("w", f"T{v}", int(sub), v)
        elif op == "c":
            emit("c", txn if txn.startswith("Q") else f"T{txn}")
        else:
            if txn not in begun:
                begun.add(txn)
                emit("b", txn, window_len=N)
            emit("r", txn, int(sub), held[int(sub)])
    return events


def ops(events: list[dict]) -> list[str]:
    """Back to the thesis notation, without the initial fill."""
    out = []
    for ev in events:
        if ev["op"] == "w" and ev["version"] >= N:
            out.append(f"w_{ev['version']}[{ev['subwindow']}]")
        elif ev["op"] == "c" and ev["txn"].startswith("T") and int(ev["txn"][1:]) >= N:
            out.append(f"c_{ev['txn'][1:]}")
        elif ev["op"] == "r":
            out.append(f"r_Q1[{ev['subwindow']}]")
        elif ev["op"] == "c" and not ev["txn"].startswith("T"):
            out.append("c_Q1")
    return out
