"""HTTP throughput and latency of a live `memdir serve`, beside a constant route on the same stack.

Starts `memdir serve` on a free 127.0.0.1 port (a fresh SQLite database by default; `--db URL`
for another, with `--token` when that database already has an admin), with
`MEMDIR_BENCH_ROUTES=1` so the server also answers `GET /v1/_bench/constant` — a route that goes
through the same uvicorn, FastAPI app and middleware but touches neither a token nor the
database: the floor of what the stack can do. Rate limits are off for the run.

For 1, 16 and 64 concurrent clients (tasks sharing one `httpx2.AsyncClient`, keep-alive), each
for `--duration` seconds after a short warm-up, it measures:

- `floor`: `GET /v1/_bench/constant` (run before and after the memdir workloads; their mean);
- `read`: `GET /v1/stores/default/files/{path}` of a random seeded file (raw content);
- `cas write`: `PUT` of a client's own file with `If-Match` of the sha256 it last wrote (every
  write is a full compare-and-swap commit with provenance and screening; no conflicts);
- `search`: `GET /v1/stores/default/search?q=...` of 2 random corpus words.

Throughput is requests completed in the measured window / its length; latencies are per
request, client side. httpx costs about a millisecond of CPU per request, which on a small
machine makes the client the bottleneck (every ratio then tends to 100%); `--client raw` runs
the same workloads through a minimal asyncio HTTP/1.1 client so the table measures the server.
Targets, at 16 clients: reads >= 50% and CAS writes >= 25% of the floor's throughput. The
exit status is 0 either way; the PASS/FAIL lines say.

    .venv/bin/python benchmarks/http_bench.py                    # ~1 min
    .venv/bin/python benchmarks/http_bench.py --client raw       # the server, not httpx
    .venv/bin/python benchmarks/http_bench.py --workers 2 --duration 5 --json http.json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

_HERE = Path(__file__).resolve().parent

sys.path.append(str(_HERE))
import httpx2  # noqa: E402
from _common import fmt, format_table, percentile, write_json  # noqa: E402

STORE = "/v1/stores/default"
TOKEN_LINE = re.compile(r"^\s+(mdr_\S+)\s*$")
TARGETS = {"read": 0.50, "cas write": 0.25}  # share of the floor's req/s at 16 clients
WORDS = (
    "deploy", "rollback", "migration", "schema", "index", "cache", "token", "policy", "review",
    "proposal", "search", "grep", "commit", "revision", "screening", "secret", "quarantine",
    "transcript", "session", "agent", "project", "convention", "failure", "retry", "timeout",
    "latency", "throughput", "backup", "restore", "archive", "export", "import",
)  # fmt: skip


class Client(Protocol):
    """What the workloads use of a client: httpx2.AsyncClient, or RawClient."""

    async def get(self, url: str, *, params: Any = None, headers: Any = None) -> Any: ...
    async def put(self, url: str, *, content: str, headers: Any = None) -> Any: ...


Op = Callable[[Client, int, int], Awaitable[bool]]


@dataclass
class RawResponse:
    status_code: int
    headers: dict[str, str]
    content: bytes


class RawClient:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams (`--client raw`).

    httpx spends a millisecond or more of CPU per request; on a small machine the client, not
    the server, then sets the pace and every ratio tends to 100%. This client costs a few
    dozen microseconds, so the table measures the server. One connection per concurrent
    request, reused; responses must carry Content-Length (memdir's do).
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(
        self, method: str, url: str, *, params: Any = None, content: str = "", headers: Any = None
    ) -> RawResponse:
        target = url + ("?" + urlencode(params) if params else "")
        body = content.encode("utf-8")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\n{self.fixed}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        found = {k.strip().lower(): v.strip() for k, v in fields.items()}
        data = await reader.readexactly(int(found.get("content-length", "0")))
        self.idle.append(conn)
        return RawResponse(int(lines[0].split()[1]), found, data)

    async def get(self, url: str, *, params: Any = None, headers: Any = None) -> RawResponse:
        return await self.request("GET", url, params=params, headers=headers)

    async def put(self, url: str, *, content: str, headers: Any = None) -> RawResponse:
        return await self.request("PUT", url, content=content, headers=headers)

    async def aclose(self) -> None:
        for _, writer in self.idle:
            writer.close()


@dataclass(frozen=True)
class Cell:
    """One workload at one concurrency."""

    op: str
    clients: int
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


# --- the server ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`memdir serve` in a subprocess, its stderr collected (for the first-start token)."""

    def __init__(self, db: str, workers: int, cwd: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "MEMDIR_RATE_LIMIT": "off", "MEMDIR_BENCH_ROUTES": "1"}
        env.pop("MEMDIR_TOKEN", None)
        command = [
            sys.executable, "-m", "memdir.cli", "--db", db, "serve",
            "--port", str(self.port), "--workers", str(workers),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stderr: list[str] = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("memdir serve exited:\n" + "".join(self.stderr))
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            time.sleep(0.1)
        raise SystemExit("memdir serve did not start:\n" + "".join(self.stderr))

    def token(self) -> str | None:
        found = [m.group(1) for line in self.stderr if (m := TOKEN_LINE.match(line))]
        return found[0] if found else None

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- workloads -----------------------------------------------------------------------------


def _document(rng: random.Random, index: int) -> str:
    lines = [f"# Note {index}", ""]
    for _ in range(12):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(12)) + ".")
    return "\n".join(lines) + "\n"


class Workloads:
    """The requests each workload sends; writers each own one file and track its sha256."""

    def __init__(self, files: int, max_clients: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.paths = [f"projects/bench/notes/n{i:05d}.md" for i in range(files)]
        self.writer_paths = [f"projects/bench/writers/w{i:03d}.md" for i in range(max_clients)]
        self.writer_sha: dict[int, str] = {}

    async def seed(self, client: httpx2.AsyncClient) -> None:
        """Create the read corpus and the writers' files, 500 files per commit."""
        docs = [("/" + p, _document(self.rng, i)) for i, p in enumerate(self.paths)]
        docs += [("/" + p, "counter 0\n") for p in self.writer_paths]
        for start in range(0, len(docs), 500):
            ops = [{"op": "create", "path": p, "content": c} for p, c in docs[start : start + 500]]
            response = await client.post(f"{STORE}/commits", json={"operations": ops})
            if response.status_code != 201:
                raise SystemExit(f"seeding failed: {response.status_code} {response.text[:500]}")
            for result in response.json()["results"]:
                if result["path"].startswith("/projects/bench/writers/"):
                    index = self.writer_paths.index(result["path"][1:])
                    self.writer_sha[index] = result["sha256"]

    async def floor(self, client: Client, worker: int, i: int) -> bool:
        return (await client.get("/v1/_bench/constant")).status_code == 200

    async def read(self, client: Client, worker: int, i: int) -> bool:
        path = self.paths[self.rng.randrange(len(self.paths))]
        return (await client.get(f"{STORE}/files/{path}")).status_code == 200

    async def cas_write(self, client: Client, worker: int, i: int) -> bool:
        path = self.writer_paths[worker]
        headers = {"If-Match": f'"{self.writer_sha[worker]}"', "X-Memdir-Reason": "benchmark"}
        content = f"counter {i + 1}\n" + "padding line of the benchmark file\n" * 20
        response = await client.put(f"{STORE}/files/{path}", content=content, headers=headers)
        if response.status_code != 200:
            return False
        self.writer_sha[worker] = response.headers["etag"].strip('"')
        return True

    async def search(self, client: Client, worker: int, i: int) -> bool:
        q = " ".join(self.rng.sample(WORDS, 2))
        return (await client.get(f"{STORE}/search", params={"q": q})).status_code == 200


async def measure(
    client: Client, op: Op, name: str, clients: int, duration: float, warmup: float
) -> Cell:
    """Run ``op`` from ``clients`` concurrent tasks; keep what completes in the timed window."""
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + duration
    latencies: list[float] = []
    errors = 0

    async def worker(index: int) -> None:
        nonlocal errors
        i = 0
        while loop.time() < end:
            began = time.perf_counter()
            ok = await op(client, index, i)
            elapsed = time.perf_counter() - began
            i += 1
            if start <= loop.time() <= end:
                latencies.append(elapsed)
                errors += not ok

    await asyncio.gather(*(worker(w) for w in range(clients)))
    return Cell(
        op=name,
        clients=clients,
        requests=len(latencies),
        errors=errors,
        rps=len(latencies) / duration,
        p50_ms=percentile(latencies, 50) * 1000,
        p95_ms=percentile(latencies, 95) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
    )


async def run(url: str, token: str, args: argparse.Namespace) -> list[Cell]:
    limits = httpx2.Limits(max_connections=256, max_keepalive_connections=256)
    headers = {"Authorization": f"Bearer {token}"}
    work = Workloads(args.files, max(args.clients), args.seed)
    async with httpx2.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=60
    ) as client:
        await work.seed(client)
        measured_by: Client = client if args.client == "httpx" else RawClient(url, headers)
        cells: list[Cell] = []
        for clients in args.clients:
            plan: list[tuple[str, Op]] = [
                ("floor", work.floor),
                ("read", work.read),
                ("cas write", work.cas_write),
                ("search", work.search),
                ("floor", work.floor),
            ]
            measured = [
                await measure(measured_by, op, name, clients, args.duration, args.warmup)
                for name, op in plan
            ]
            cells.extend([_mean_floor(measured[0], measured[-1]), *measured[1:-1]])
            print(f"  measured {clients} client(s)", file=sys.stderr, flush=True)
        if isinstance(measured_by, RawClient):
            await measured_by.aclose()
    return cells


def _mean_floor(a: Cell, b: Cell) -> Cell:
    """The floor measured before and after the memdir workloads, averaged."""

    def mean(x: float, y: float) -> float:
        return (x + y) / 2

    return Cell(
        "floor", a.clients, a.requests + b.requests, a.errors + b.errors, mean(a.rps, b.rps),
        mean(a.p50_ms, b.p50_ms), mean(a.p95_ms, b.p95_ms), mean(a.p99_ms, b.p99_ms),
    )  # fmt: skip


# --- report --------------------------------------------------------------------------------


def report(cells: Sequence[Cell]) -> tuple[str, bool]:
    floors = {c.clients: c.rps for c in cells if c.op == "floor"}
    rows = [
        [
            c.op, str(c.clients), fmt(c.rps, 0), fmt(c.p50_ms), fmt(c.p95_ms), fmt(c.p99_ms),
            str(c.errors), f"{c.rps / floors[c.clients]:.0%}" if floors.get(c.clients) else "-",
        ]
        for c in cells
    ]  # fmt: skip
    headers = ["endpoint", "clients", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors", "of floor"]
    lines = [format_table(headers, rows), ""]
    all_pass = True
    for op, share in TARGETS.items():
        cell = next((c for c in cells if c.op == op and c.clients == 16), None)
        floor = floors.get(16)
        if cell is None or not floor:
            lines.append(f"SKIP: {op} at 16 clients was not measured")
            continue
        ok = cell.rps >= share * floor and cell.errors == 0
        all_pass &= ok
        lines.append(
            f"{'PASS' if ok else 'FAIL'}: {op} {cell.rps:,.0f} req/s at 16 clients is "
            f"{cell.rps / floor:.0%} of the floor's {floor:,.0f} (target >= {share:.0%})"
            + (f"; {cell.errors} errors" if cell.errors else "")
        )
    return "\n".join(lines), all_pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--token", help="an admin token, for a database that has admins")
    parser.add_argument("--workers", type=int, default=1, help="memdir serve --workers")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5, help="untimed seconds first")
    parser.add_argument("--files", type=int, default=500, help="files in the read corpus")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--client",
        choices=["httpx", "raw"],
        default="httpx",
        help="httpx2.AsyncClient (default), or a minimal asyncio client that measures the "
        "server rather than the client library",
    )
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="memdir-http-bench-"))
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    server = Server(args.db or f"sqlite:///{workdir / 'memdir.db'}", args.workers, workdir)
    try:
        server.wait_ready()
        token = args.token or server.token()
        if token is None:
            raise SystemExit("the database already has an admin: pass --token")
        print(f"memdir serve at {server.url} ({args.workers} worker(s)), client {args.client}",
              file=sys.stderr)  # fmt: skip
        try:
            import uvloop

            cells = uvloop.run(run(server.url, token, args))
        except ImportError:
            cells = asyncio.run(run(server.url, token, args))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    text, all_pass = report(cells)
    print(text)
    print(f"overall: {'PASS' if all_pass else 'FAIL'}")
    if args.json:
        write_json(args.json, {"args": vars(args), "cells": [asdict(c) for c in cells]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
