"""memdir search quality on LoCoMo: evidence recall@1/5/10 against a plain FTS5 baseline.

Usage::

    python benchmarks/search_quality.py [--data PATH] [--db URL] [--json OUT]

Every dialogue turn of the ten LoCoMo conversations becomes one memory file,
``/locomo/<sample_id>/D<session>/<turn>.md`` holding ``"<speaker>: <text>"`` (``--with-date``
adds the session date line, ``--with-captions`` the image caption of turns that share a
photo), written through memdir in multi-op commits. Each question of categories 1-4 whose
evidence ids all exist in its conversation is searched in memdir scoped to that conversation's
prefix (limit 10); a question scores a hit at k if any evidence turn is in the top k.

The baseline, in the same run: one raw SQLite FTS5 table (``porter`` tokenizer) over the same
documents with an unindexed conversation column as the filter; the query is the OR of the
question's words that are not in the (NLTK) English stop word list below, ranked by
``bm25()``, LIMIT 10.

Target: memdir's overall recall@10 >= the baseline's.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Stats, fmt, format_table, write_json

import memdir
from memdir import OWNER, Provenance, Write

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo10.json")
KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BATCH = 500
STORE = "locomo"

#: NLTK's English stop word list (apostrophe forms reduced to their word parts).
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against between
    into through during before after above below to from up down in out on off over under again
    further then once here there when where why how all any both each few more most other some
    such no nor not only own same so than too very s t can will just don should now d ll m o re
    ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn
    weren won wouldn
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_WORD = re.compile(r"\w+")
_DIA = re.compile(r"^D(\d+):(\d+)$")
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str
    path: str
    content: str


@dataclass(frozen=True)
class Question:
    conv: str
    category: int
    text: str
    evidence: frozenset[str]


@dataclass
class Dataset:
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def turn_path(conv: str, dia_id: str) -> str:
    match = _DIA.match(dia_id)
    assert match is not None, dia_id
    return f"/locomo/{conv}/D{match.group(1)}/{match.group(2)}.md"


def load(path: Path, *, with_date: bool, with_captions: bool) -> Dataset:
    data = Dataset()
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = str(sample["sample_id"])
        conversation: dict[str, Any] = sample["conversation"]
        ids: set[str] = set()
        for key, turns in conversation.items():
            session = _SESSION.match(key)
            if session is None:
                continue
            date = conversation.get(f"{key}_date_time", "")
            for turn in turns:
                dia_id = turn["dia_id"]
                if not _DIA.match(dia_id) or dia_id in ids:
                    data.skipped["turns with a malformed or repeated dia_id"] += 1
                    continue
                ids.add(dia_id)
                content = f"{turn['speaker']}: {turn['text']}\n"
                if with_captions and turn.get("blip_caption"):
                    content += f"[shares a photo: {turn['blip_caption']}]\n"
                if with_date and date:
                    content = f"{date}\n\n{content}"
                data.turns.append(Turn(conv, dia_id, turn_path(conv, dia_id), content))
        for qa in sample["qa"]:
            category = int(qa["category"])
            if category not in CATEGORIES:
                data.skipped[f"category {category} (not scored)"] += 1
                continue
            evidence = qa.get("evidence")
            if (
                not isinstance(evidence, list)
                or not evidence
                or not all(isinstance(e, str) and e in ids for e in evidence)
            ):
                data.skipped[f"category {category}: malformed evidence"] += 1
                continue
            data.questions.append(Question(conv, category, qa["question"], frozenset(evidence)))
    return data


# --- the two searchers ----------------------------------------------------------------------


class MemdirSearch:
    def __init__(self, url: str) -> None:
        self.svc = memdir.open(url, create=True)
        self.svc.create_store(OWNER, STORE, exist_ok=True)

    def load(self, turns: Sequence[Turn]) -> None:
        provenance = Provenance(source_kind="import", reason="LoCoMo benchmark")
        for start in range(0, len(turns), BATCH):
            ops = [Write(t.path, t.content, if_absent=True) for t in turns[start : start + BATCH]]
            self.svc.commit(OWNER, STORE, ops, provenance)

    def search(self, question: Question) -> list[str]:
        hits = self.svc.search(
            OWNER, STORE, question.text, prefix=f"/locomo/{question.conv}/", limit=10
        )
        return [h.path for h in hits]

    def close(self, *, drop: bool) -> None:
        if drop:
            self.svc.delete_store(OWNER, STORE)
        self.svc.db.close()


def baseline_match(text: str) -> str | None:
    """OR of the question's quoted non-stop words (None when nothing is left)."""
    words = [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(text))]
    terms = [w for w in words if w not in STOP_WORDS]
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class BaselineSearch:
    """Plain FTS5: one table, a conversation filter column, bm25 ranking."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(conv UNINDEXED, path UNINDEXED, body, "
            "tokenize = 'porter')"
        )

    def load(self, turns: Sequence[Turn]) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO docs (conv, path, body) VALUES (?, ?, ?)",
                [(t.conv, t.path, t.content) for t in turns],
            )

    def search(self, question: Question) -> list[str]:
        match = baseline_match(question.text)
        if match is None:
            return []
        rows = self.conn.execute(
            "SELECT path FROM docs WHERE docs MATCH ? AND conv = ? ORDER BY bm25(docs) LIMIT 10",
            (match, question.conv),
        ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self.conn.close()


# --- scoring --------------------------------------------------------------------------------


@dataclass
class Scores:
    """Hit counts at each k, per category."""

    n: Counter[int] = field(default_factory=Counter)
    hits: dict[int, Counter[int]] = field(default_factory=lambda: {k: Counter() for k in KS})
    latencies: list[float] = field(default_factory=list)

    def add(self, question: Question, paths: Sequence[str], evidence_paths: set[str]) -> None:
        self.n[question.category] += 1
        for k in KS:
            if any(p in evidence_paths for p in paths[:k]):
                self.hits[k][question.category] += 1

    def recall(self, k: int, category: int | None = None) -> float:
        if category is None:
            total = sum(self.n.values())
            return sum(self.hits[k].values()) / total if total else float("nan")
        n = self.n[category]
        return self.hits[k][category] / n if n else float("nan")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            str(c): {
                "n": self.n[c],
                **{f"recall@{k}": self.recall(k, c) for k in KS},
            }
            for c in CATEGORIES
        }
        out["overall"] = {
            "n": sum(self.n.values()),
            **{f"recall@{k}": self.recall(k) for k in KS},
        }
        out["latency"] = Stats.of(self.latencies).to_dict()
        return out


def evaluate(
    questions: Sequence[Question], search: Callable[[Question], list[str]], scores: Scores
) -> None:
    for question in questions:
        start = time.perf_counter()
        paths = search(question)
        scores.latencies.append(time.perf_counter() - start)
        evidence = {turn_path(question.conv, e) for e in question.evidence}
        scores.add(question, paths, evidence)


def report(memdir_scores: Scores, base_scores: Scores) -> str:
    headers = ["category", "n", *(f"memdir R@{k}" for k in KS), *(f"base R@{k}" for k in KS)]
    rows: list[list[str]] = []
    for category, label in CATEGORIES.items():
        rows.append(
            [
                f"{category} {label}",
                str(memdir_scores.n[category]),
                *(fmt(memdir_scores.recall(k, category), 3) for k in KS),
                *(fmt(base_scores.recall(k, category), 3) for k in KS),
            ]
        )
    rows.append(
        [
            "overall",
            str(sum(memdir_scores.n.values())),
            *(fmt(memdir_scores.recall(k), 3) for k in KS),
            *(fmt(base_scores.recall(k), 3) for k in KS),
        ]
    )
    return format_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--db", help="memdir database URL (default: SQLite in a temp dir)")
    parser.add_argument("--with-date", action="store_true", help="prefix turns with the date")
    parser.add_argument("--with-captions", action="store_true", help="add image captions")
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    data = load(args.data, with_date=args.with_date, with_captions=args.with_captions)
    workdir = Path(tempfile.mkdtemp(prefix="memdir-locomo-"))
    try:
        url = args.db or f"sqlite:///{workdir / 'memdir.db'}"
        mem = MemdirSearch(url)
        base = BaselineSearch(workdir / "baseline.db")
        t0 = time.perf_counter()
        mem.load(data.turns)
        t1 = time.perf_counter()
        base.load(data.turns)
        t2 = time.perf_counter()
        mem_scores, base_scores = Scores(), Scores()
        evaluate(data.questions, mem.search, mem_scores)
        evaluate(data.questions, base.search, base_scores)
        mem.close(drop=args.db is not None)
        base.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    convs = len({t.conv for t in data.turns})
    print(f"LoCoMo: {convs} conversations, {len(data.turns)} turns written as memory files")
    print(
        f"load: memdir {t1 - t0:.1f}s ({len(data.turns) / (t1 - t0):,.0f} files/s, "
        f"{BATCH} per commit), baseline {t2 - t1:.2f}s"
    )
    used = Counter(q.category for q in data.questions)
    print(
        f"questions used: {len(data.questions)} "
        f"({', '.join(f'cat {c}: {used[c]}' for c in CATEGORIES)})"
    )
    print(
        f"questions skipped: {sum(data.skipped.values())} "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(data.skipped.items()))})"
    )
    print()
    print(report(mem_scores, base_scores))
    print()
    ms, bs = Stats.of(mem_scores.latencies), Stats.of(base_scores.latencies)
    print(
        f"search latency: memdir p50 {ms.p50_ms:.2f} ms / p95 {ms.p95_ms:.2f} ms; "
        f"baseline p50 {bs.p50_ms:.2f} ms / p95 {bs.p95_ms:.2f} ms"
    )
    mem_r10, base_r10 = mem_scores.recall(10), base_scores.recall(10)
    ok = mem_r10 >= base_r10
    print(
        f"{'PASS' if ok else 'FAIL'}: memdir overall recall@10 {mem_r10:.3f} "
        f"{'>=' if ok else '<'} baseline {base_r10:.3f}"
    )
    print(f"run time {elapsed:.1f}s")
    if args.json:
        write_json(
            args.json,
            {
                "turns": len(data.turns),
                "questions_used": dict(sorted(used.items())),
                "questions_skipped": dict(data.skipped),
                "options": {"with_date": args.with_date, "with_captions": args.with_captions},
                "memdir": mem_scores.to_dict(),
                "baseline": base_scores.to_dict(),
                "pass": ok,
                "run_s": elapsed,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
