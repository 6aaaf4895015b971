"""`windowstore sql`: an interactive query shell over the SDK. Statements end with `;` and may span
lines; history is kept in ~/.windowstore_history; Tab completes keywords, stream names and column
names; backslash commands: \\d [stream], \\watch [seconds], \\register, \\answers, \\o, \\q, \\?.
With standard input not a terminal, it runs the statements it reads and exits (1 if any failed)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from . import cli_output as out
from .cli_client import client, describe, list_streams, with_errors

KEYWORDS = ["SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "DESC", "ASC", "AND", "OR", "NOT", "IN",
            "IS NULL", "IS NOT NULL", "BETWEEN", "JOIN", "ON", "WITHIN", "AS", "COUNT", "SUM", "AVG", "MIN", "MAX",
            "MEDIAN", "QUANTILE", "DISTINCT", "RANGE", "SLIDE", "ROWS", "SUBWINDOWS", "APPROXIMATE", "AS OF SLIDE"]
HELP = """statements end with ';' (SELECT ...: a one-time query)
\\d               list the streams           \\d NAME      describe a stream
\\watch [S [N]]   run the last query every S seconds (default 2), N times (default: until Ctrl-C)
\\register QUERY  register a periodic query  \\answers ID  its kept answers
\\o table|csv|json  output format            \\q           quit"""


class Completer:
    """Tab completion over keywords and the server's stream and column names."""

    def __init__(self, names: list[str]):
        self.words = sorted(set(KEYWORDS) | set(names))
        self.matches: list[str] = []

    def candidates(self, text: str) -> list[str]:
        low = text.lower()
        return [w for w in self.words if w.lower().startswith(low)]

    def complete(self, text: str, state: int) -> str | None:
        if state == 0:
            self.matches = self.candidates(text)
        return self.matches[state] if state < len(self.matches) else None


def _names(ws) -> list[str]:
    names = []
    for info in ws.list_streams():
        names.append(info["spec"]["name"])
        names += [c["name"] for c in info["spec"]["columns"]]
    return names


class Shell:
    def __init__(self, ws, args, interactive: bool):
        self.ws, self.args, self.interactive = ws, args, interactive
        self.output = args.output
        self.last: str | None = None
        self.failed = 0

    def run_statement(self, text: str) -> None:
        from windowstore.clients import WindowStoreError

        text = text.strip().rstrip(";").strip()
        if not text:
            return
        try:
            if text.startswith("\\"):
                self.command(text)
            else:
                self.last = text
                out.answer(self.ws.query(text), self.output, utc=self.args.utc)
        except WindowStoreError as e:
            self.failed += 1
            print(f"error ({e.code.name}): {e.message}", file=sys.stderr)

    def command(self, text: str) -> None:
        word, _, rest = text.partition(" ")
        rest = rest.strip()
        if word == "\\d":
            ns = argparse.Namespace(**{**vars(self.args), "name": rest, "output": self.output})
            if (describe if rest else list_streams)(ns):
                self.failed += 1
        elif word == "\\watch":
            self.watch(*[float(x) for x in rest.split()[:2]])
        elif word == "\\register":
            q = self.ws.register(rest)
            print(f"{q.id} (every {q.every_slides} slides)")
        elif word == "\\answers":
            got, _, _ = self.ws.read_answers(rest)
            for a in got:
                out.answer(a, self.output, utc=self.args.utc, header=f"-- answer {a.execution}, slide {a.slide}")
        elif word == "\\o":
            if rest not in out.OUTPUTS:
                print(f"\\o takes one of {', '.join(out.OUTPUTS)}", file=sys.stderr)
            else:
                self.output = rest
        elif word in ("\\?", "\\h", "\\help"):
            print(HELP)
        elif word == "\\q":
            raise EOFError
        else:
            print(f"unknown command {word} (\\? lists them)", file=sys.stderr)
            self.failed += 1

    def watch(self, every_s: float = 2.0, count: float = 0) -> None:
        if self.last is None:
            print("\\watch re-runs the last query: run one first", file=sys.stderr)
            return
        n = 0
        try:
            while True:
                print(f"-- {out.fmt_time(time.time() * 1000, self.args.utc)} (every {every_s:g} s)")
                out.answer(self.ws.query(self.last), self.output, utc=self.args.utc)
                n += 1
                if count and n >= count:
                    return
                time.sleep(every_s)  # the refresh period the user asked for
        except KeyboardInterrupt:
            print()


def _readline(names: list[str]):
    try:
        import readline
    except ImportError:  # no readline on this platform: plain input, no history or completion
        return None
    history = os.path.expanduser("~/.windowstore_history")
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(1000)
    completer = Completer(names)
    readline.set_completer(completer.complete)
    readline.set_completer_delims(" \t\n,()[];=<>")
    readline.parse_and_bind("tab: complete")
    return lambda: readline.write_history_file(history)


@with_errors
def sql(args) -> int:
    interactive = sys.stdin.isatty()
    with client(args) as ws:
        shell = Shell(ws, args, interactive)
        if not interactive:
            buf = ""
            for line in sys.stdin:
                if line.lstrip().startswith("\\"):
                    shell.run_statement(line)
                    continue
                buf += line
                while ";" in buf:
                    stmt, buf = buf.split(";", 1)
                    shell.run_statement(stmt)
            shell.run_statement(buf)
            return 1 if shell.failed else 0
        save = _readline(_names(ws))
        print(f"windowstore sql on {ws.target if hasattr(ws, 'target') else args.target}: "
              "statements end with ';', \\? for help, \\q to quit")
        buf = ""
        try:
            while True:
                try:
                    line = input("windowstore> " if not buf else "         ...> ")
                except KeyboardInterrupt:
                    print()
                    buf = ""
                    continue
                if not buf and line.lstrip().startswith("\\"):
                    shell.run_statement(line)
                    continue
                buf += line + "\n"
                while ";" in buf:
                    stmt, buf = buf.split(";", 1)
                    shell.run_statement(stmt)
                if not buf.strip():
                    buf = ""
        except EOFError:
            print()
        finally:
            if save is not None:
                save()
    return 0


def add_command(sub, client_args) -> None:
    p = sub.add_parser("sql", help="an interactive query shell (history, completion, \\watch)",
                       description=__doc__.split("\n\n")[0])
    client_args(p)
    p.set_defaults(func=sql)
