"""Transcript import throughput: memdir against a raw baseline, in the same run.

Usage::

    python benchmarks/transcripts.py [--sessions N] [--seed S] [--db URL] [--json OUT]

Generates ``--sessions`` (default 10,000) agent sessions shaped like τ-bench's airline
trajectories (``../shared/data/transcripts/tau-bench-airline``): a result file
``[{task_id, trial, reward, info, traj}]`` whose conversations have about 27 messages and
20 KB each — the shared ~6 KB policy as the system prompt (the real one when the shared data
is present), user and assistant turns, one tool call per tool-using turn, JSON tool results
(reservations, users, flights) with fresh names, ids and amounts in every session, and ~6% of
tool results starting with ``Error: ``. The text varies per session, so nothing but the system
prompt repeats (a cache of screened strings gains only what real fleets would gain).

Measured, each on a fresh database:

- **raw baseline**: read the same file element by element (``json.loads`` per element) and
  insert one row per message (role, content, tool calls as JSON, tool call id) with
  ``executemany``, one transaction per session — stdlib ``sqlite3``, WAL,
  ``synchronous=NORMAL``, as memdir's SQLite;
- **memdir import**: ``MemoryService.import_transcripts`` — detection, streaming parse,
  normalisation, secret redaction with the guard's detectors, each session atomic in its own
  savepoint, up to 100 sessions per writer transaction;
- **memdir, no secret screening**: the same with ``Redactor.disabled()``, to show what the
  guard's secret detectors cost (not an option real imports have).

Events/s counts normalised events stored (memdir) or message rows (baseline); MB/s is the
file size over the wall time. Target: memdir import >= 10,000 events/s. On a shared machine
wall time follows the load; events per CPU second, and the ratio to the raw baseline measured
in the same run, are the steadier figures.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import string
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, format_table, write_json

import memdir
from memdir import OWNER
from memdir.transcripts import Source
from memdir.transcripts.redact import Redactor

ROOT = Path(__file__).resolve().parent.parent
POLICY = (
    ROOT.parent / "shared" / "data" / "transcripts" / "tau-bench-airline" / "airline_wiki_policy.md"
)
TARGET_EVENTS_PER_S = 10_000
STORE = "bench"

FIRST = [
    "mia",
    "noah",
    "ava",
    "liam",
    "emma",
    "olivia",
    "lucas",
    "amelia",
    "ethan",
    "sofia",
    "yusuf",
    "chen",
    "raj",
    "fatima",
    "ivan",
    "lena",
    "omar",
    "aiko",
    "mateo",
    "zoe",
]
LAST = [
    "li",
    "garcia",
    "smith",
    "khan",
    "muller",
    "rossi",
    "kim",
    "silva",
    "nguyen",
    "brown",
    "patel",
    "cohen",
    "sato",
    "lopez",
    "novak",
    "jensen",
    "ali",
    "dubois",
    "moreau",
    "wang",
]
AIRPORTS = ["JFK", "SEA", "LAX", "ORD", "ATL", "DFW", "DEN", "SFO", "BOS", "MIA", "PHX", "IAH"]
_PHRASES = """
I would like to change my flight reservation please the booking for next week can you check
whether there is an earlier option with the same cabin class and tell me the price difference
my user id is and my reservation number is also I want to add one checked bag and use the gift
card on file if possible thanks sure let me look that up for you I found the reservation here
are the details the flight is available the total cost would be do you want me to proceed yes
please confirm cancel instead refund travel insurance economy business basic
"""
WORDS = _PHRASES.split()
TOOLS = ["get_user_details", "get_reservation_details", "search_direct_flight",
         "search_onestop_flight", "update_reservation_flights", "update_reservation_baggages",
         "book_reservation", "cancel_reservation", "calculate", "think"]  # fmt: skip
ERRORS = ["Error: reservation not found", "Error: user not found",
          "Error: flight not available", "Error: gift card balance is not enough",
          "Error: the reservation cannot be cancelled"]  # fmt: skip


class Generator:
    """Deterministic τ-bench-shaped sessions (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        if POLICY.is_file():
            self.policy = POLICY.read_text(encoding="utf-8")
        else:
            self.policy = "# Airline Agent Policy\n\n" + self.sentence(900)

    def sentence(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words)) + "."

    def ident(self, length: int = 6) -> str:
        return "".join(
            self.rng.choice(string.ascii_uppercase + string.digits) for _ in range(length)
        )

    def user_id(self) -> str:
        return f"{self.rng.choice(FIRST)}_{self.rng.choice(LAST)}_{self.rng.randint(1000, 9999)}"

    def reservation(self, user: str) -> dict[str, Any]:
        rng = self.rng
        flights = [
            {"origin": rng.choice(AIRPORTS), "destination": rng.choice(AIRPORTS),
             "flight_number": f"HAT{rng.randint(1, 300):03d}",
             "date": f"2024-05-{rng.randint(1, 30):02d}", "price": rng.randint(50, 2000)}
            for _ in range(rng.randint(1, 3))
        ]  # fmt: skip
        passengers = [
            {"first_name": rng.choice(FIRST).title(), "last_name": rng.choice(LAST).title(),
             "dob": f"19{rng.randint(40, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
            for _ in range(rng.randint(1, 4))
        ]  # fmt: skip
        return {
            "reservation_id": self.ident(), "user_id": user, "origin": flights[0]["origin"],
            "destination": flights[-1]["destination"],
            "flight_type": rng.choice(["one_way", "round_trip"]),
            "cabin": rng.choice(["basic_economy", "economy", "business"]), "flights": flights,
            "passengers": passengers,
            "payment_history": [{"payment_id": f"credit_card_{rng.randint(10**6, 10**7)}",
                                 "amount": rng.randint(100, 5000)}],
            "created_at": f"2024-05-{rng.randint(1, 14):02d}T{rng.randint(0, 23):02d}:12:01",
            "total_baggages": rng.randint(0, 4), "nonfree_baggages": rng.randint(0, 2),
            "insurance": rng.choice(["yes", "no"]),
        }  # fmt: skip

    def user_details(self, user: str) -> dict[str, Any]:
        rng = self.rng
        first, last, _ = user.split("_")
        methods = {
            f"{kind}_{rng.randint(10**6, 10**7)}": {"source": kind, "id": f"{kind}_{n}",
                                                     "last_four": f"{rng.randint(0, 9999):04d}"}
            for n, kind in enumerate(rng.choice(["credit_card", "gift_card", "certificate"])
                                     for _ in range(rng.randint(2, 5)))
        }  # fmt: skip
        return {
            "name": {"first_name": first.title(), "last_name": last.title()},
            "address": {"address1": f"{rng.randint(1, 999)} {rng.choice(LAST).title()} Street",
                        "city": rng.choice(["Seattle", "Austin", "Denver", "Boston"]),
                        "country": "USA", "zip": f"{rng.randint(10000, 99999)}"},
            "email": f"{user}@example.com",
            "dob": f"19{rng.randint(40, 99)}-01-{rng.randint(1, 28):02d}",
            "payment_methods": methods, "saved_passengers": [
                {"first_name": rng.choice(FIRST).title(), "last_name": rng.choice(LAST).title(),
                 "dob": f"19{rng.randint(40, 99)}-02-{rng.randint(1, 28):02d}"}],
            "membership": rng.choice(["regular", "silver", "gold"]),
            "reservations": [self.ident() for _ in range(rng.randint(2, 8))],
        }  # fmt: skip

    def tool_result(self, user: str, name: str) -> str:
        if self.rng.random() < 0.06:
            return self.rng.choice(ERRORS)
        if name == "get_user_details":
            return json.dumps(self.user_details(user))
        if name in ("search_direct_flight", "search_onestop_flight"):
            return json.dumps(
                [self.reservation(user)["flights"] for _ in range(self.rng.randint(1, 4))]
            )
        return json.dumps(self.reservation(user))

    def session(self, task_id: int, trial: int) -> dict[str, Any]:
        rng = self.rng
        user = self.user_id()
        traj: list[dict[str, Any]] = [
            {"role": "system", "content": self.policy},
            {"role": "user", "content": f"Hi, {self.sentence(rng.randint(10, 30))} {user}"},
        ]
        target = rng.randint(20, 34)
        while len(traj) < target:
            if rng.random() < 0.45:  # a tool-using turn: the call, then its result
                call_id = "call_" + "".join(rng.choice(string.ascii_letters) for _ in range(24))
                name = rng.choice(TOOLS)
                arguments = {"user_id": user, "reservation_id": self.ident()}
                traj.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}]})  # fmt: skip
                traj.append({"role": "tool", "tool_call_id": call_id, "name": name,
                             "content": self.tool_result(user, name)})  # fmt: skip
            else:
                traj.append({"role": "assistant", "content": self.sentence(rng.randint(30, 160))})
                traj.append({"role": "user", "content": self.sentence(rng.randint(8, 60))})
        reward = float(rng.random() < 0.42)
        info = {"task": {"user_id": user, "instruction": self.sentence(60)},
                "reward_info": {"reward": reward}}  # fmt: skip
        return {"task_id": task_id, "trial": trial, "reward": reward, "info": info, "traj": traj}


def generate(work: Path, sessions: int, chunk: int, seed: int) -> tuple[list[Path], int, int]:
    """Write the sessions as result files of ``chunk`` sessions (one element per line inside
    the array); returns the files, the message count and the total bytes."""
    gen = Generator(seed)
    files: list[Path] = []
    messages = 0
    for first in range(0, sessions, chunk):
        path = work / f"results-{len(files):04d}.json"
        count = min(chunk, sessions - first)
        with path.open("w", encoding="utf-8") as out:
            out.write("[\n")
            for offset in range(count):
                index = first + offset
                element = gen.session(index // 4, index % 4)
                messages += len(element["traj"])
                out.write(json.dumps(element) + (",\n" if offset < count - 1 else "\n"))
            out.write("]\n")
        files.append(path)
    return files, messages, sum(f.stat().st_size for f in files)


class Raw:
    """The baseline: ``json.loads`` per element, one row per message, a transaction each."""

    label = "raw baseline (json + sqlite3 inserts)"

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("CREATE TABLE events (session TEXT, seq INTEGER, role TEXT, "
                          "content TEXT, tool_calls TEXT, tool_call_id TEXT, "
                          "PRIMARY KEY (session, seq))")  # fmt: skip

    def run(self, path: Path) -> tuple[int, int]:
        sessions = rows = 0
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                line = line.strip().rstrip(",")
                if line in ("[", "]", ""):
                    continue
                element = json.loads(line)
                session = f"{element['task_id']}/{element['trial']}"
                params = [
                    (session, seq, m["role"], m.get("content"),
                     json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                     m.get("tool_call_id"))
                    for seq, m in enumerate(element["traj"])
                ]  # fmt: skip
                self.conn.execute("BEGIN")
                self.conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", params)
                self.conn.execute("COMMIT")
                sessions += 1
                rows += len(params)
        return sessions, rows

    def close(self) -> None:
        self.conn.close()


class Memdir:
    """``import_transcripts`` into a fresh store, with or without secret screening."""

    def __init__(self, label: str, url: str, screening: bool) -> None:
        self.label = label
        self.svc = memdir.open(url, create=True)
        self.store = f"{STORE}-{'full' if screening else 'plain'}"
        self.svc.create_store(OWNER, self.store, exist_ok=True)
        # One redactor for the whole run, as one import of all the files would have.
        self.redactor = Redactor() if screening else Redactor.disabled()
        self.tool_calls = self.tool_errors = self.redactions = 0

    def run(self, path: Path) -> tuple[int, int]:
        report = self.svc.import_transcripts(OWNER, self.store, [Source.from_path(path)],
                                             redactor=self.redactor)  # fmt: skip
        assert not report.failed and not report.skipped, (report.failed[:3], report.skipped[:3])
        self.tool_calls += report.tool_calls
        self.tool_errors += report.tool_errors
        self.redactions += report.redactions
        return report.new, report.events

    def close(self) -> None:
        if self.svc.db.url.get_backend_name() == "postgresql":
            self.svc.delete_store(OWNER, self.store)
        self.svc.db.close()


def measure(files: list[Path], runners: list[Any]) -> list[dict[str, float]]:
    """Run every chunk through every runner, rotating which goes first; sum wall and CPU time."""
    totals = [{"wall": 0.0, "cpu": 0.0, "sessions": 0, "events": 0} for _ in runners]
    for index, path in enumerate(files):
        order = list(range(len(runners)))
        order = order[index % len(order) :] + order[: index % len(order)]
        for which in order:
            wall, cpu = time.perf_counter(), time.process_time()
            sessions, events = runners[which].run(path)
            totals[which]["wall"] += time.perf_counter() - wall
            totals[which]["cpu"] += time.process_time() - cpu
            totals[which]["sessions"] += sessions
            totals[which]["events"] += events
        done = (index + 1) * 100 // len(files)
        print(f"\r{done}% of {len(files)} chunks", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--chunk", type=int, default=250, help="Sessions per file (and turn).")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", help="memdir database URL (default: SQLite files in a temp dir)")
    parser.add_argument("--json", dest="json_out", help="Also write the figures here.")
    args = parser.parse_args()
    # benchmarks/ must not shadow standard modules imported later (benchmarks/http_bench.py: http).
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != here]
    work = Path(tempfile.mkdtemp(prefix="memdir-bench-transcripts-"))
    runners: list[Any] = []
    try:
        print(f"generating {args.sessions:,} sessions ...", file=sys.stderr)
        files, messages, size = generate(work, args.sessions, args.chunk, args.seed)
        mb = size / 1e6
        print(f"{mb:,.1f} MB, {messages:,} messages ({messages / args.sessions:.1f} per "
              f"session, {size / args.sessions / 1000:.1f} KB each)", file=sys.stderr)  # fmt: skip
        runners = [
            Raw(work / "raw.db"),
            Memdir("memdir import", args.db or f"sqlite:///{work / 'full.db'}", True),
            Memdir("memdir, no secret screening", args.db or f"sqlite:///{work / 'plain.db'}",
                   False),
        ]  # fmt: skip
        totals = measure(files, runners)
    finally:
        for runner in runners:
            runner.close()
        shutil.rmtree(work, ignore_errors=True)
    raw_rate = totals[0]["events"] / totals[0]["wall"]
    table = []
    for runner, t in zip(runners, totals, strict=True):
        table.append([
            runner.label, fmt(t["wall"]), fmt(t["cpu"]), f"{int(t['sessions']):,}",
            f"{int(t['events']):,}", fmt(t["events"] / t["wall"]), fmt(t["events"] / t["cpu"]),
            fmt(mb / t["wall"]), fmt(t["events"] / t["wall"] / raw_rate),
        ])  # fmt: skip
    where = f"memdir on {args.db}" if args.db else "SQLite"
    print(f"\n{args.sessions:,} τ-bench-shaped sessions, {mb:,.1f} MB, {messages:,} messages "
          f"({where}; chunks of {args.chunk} interleaved)")  # fmt: skip
    headers = ["", "wall s", "CPU s", "sessions", "events", "events/s", "events/CPU s", "MB/s",
               "x raw"]  # fmt: skip
    print(format_table(headers, table))
    full = runners[1]
    print(f"memdir: {full.tool_calls:,} tool calls, {full.tool_errors:,} tool errors, "
          f"{full.redactions} redactions")  # fmt: skip
    rate = totals[1]["events"] / totals[1]["wall"]
    verdict = "PASS" if rate >= TARGET_EVENTS_PER_S else "FAIL"
    print(f"\n{verdict}: memdir import {rate:,.0f} events/s wall-clock "
          f"({totals[1]['events'] / totals[1]['cpu']:,.0f} per CPU second; target >= "
          f"{TARGET_EVENTS_PER_S:,} events/s)")  # fmt: skip
    if args.json_out:
        write_json(args.json_out, {
            "sessions": args.sessions, "megabytes": mb, "messages": messages,
            "rows": [{"label": r.label, **t} for r, t in zip(runners, totals, strict=True)],
            "verdict": verdict,
        })  # fmt: skip
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
