"""Context assembly: the memory a principal starts a session with, cut to a token budget.

Pure: the service (:mod:`memdir.context`) gathers the rows the principal may read and this
module orders, renders and cuts them. The same items, budget and time give byte-identical
output (every sort has the path as its last key; no clock, no randomness in here).

What goes in, in order:

1. **Core memory in full**: files whose frontmatter says ``core: true`` (their body, the
   frontmatter left out; its meaning is shown as marks). A core file too long for what is
   left of the budget is listed by path and size instead, and one too long for that is cut.
2. **Skills**: files named ``SKILL.md`` whose frontmatter has ``name`` and ``description``
   (Agent Skills), one line each.
3. **An index**: one line per other file, ``path — summary`` (``description``, else the first
   heading) and marks: ``skill``, ``review due``, ``unverified`` (the current version was an
   agent's inference), ``verify: HINT`` (how to check the fact; memdir never runs it),
   ``expired`` (only with ``include_expired``).

Within each part, files are ordered by scope — task, agent, user, project, org, then other
paths — and within a scope by relevance to the query when one is given (search rank), else by
recent use (the later of the last change and the last recorded read), newest first; then path.

**Budget.** Tokens are estimated offline by :func:`estimate_tokens`; the rendered output's
estimate never exceeds the budget. Everything left out is counted in a closing line that says
how to get it.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.core.errors import InvalidInput

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_BUDGET",
    "SCOPE_ORDER",
    "Assembled",
    "Item",
    "assemble",
    "assemble_ordered",
    "estimate_tokens",
    "part_of",
    "scope_of",
]

DEFAULT_BUDGET: Final = 2000
MAX_BUDGET: Final = 1_000_000
#: Scope kinds in the order context lists them (``other``: paths outside the five roots).
SCOPE_ORDER: Final = ("task", "agent", "user", "project", "org", "other")
_SCOPE_RANK: Final = {kind: index for index, kind in enumerate(SCOPE_ORDER)}
_ROOTS: Final = {"tasks": "task", "agents": "agent", "users": "user", "projects": "project"}

# The estimator's pieces: a letter run with the one space before it, a digit run, a
# whitespace run, one other ASCII character, one non-ASCII character.
_PIECE: Final = re.compile(r" ?[A-Za-z]+| ?[0-9]+|\s+|[\x00-\x7f]|[^\x00-\x7f]")


def estimate_tokens(text: str) -> int:
    """An offline, deliberately generous estimate of the tokens ``text`` takes for an LLM.

    A run of letters (with the one space before it) counts ceil(n / 4), a run of digits
    ceil(n / 3), a run of whitespace 1, any other ASCII character 1, a non-ASCII character
    ceil(its UTF-8 bytes / 2). BPE tokenizers of current models merge more than that (an
    English word is usually one token), so the estimate is above the real count for prose and
    code alike; the budget is kept by this estimate. The estimate of a concatenation is at
    most the sum of the parts' estimates (runs only merge), which the cutting relies on.
    """
    total = 0
    for piece in _PIECE.findall(text):
        first = piece[0]
        if first.isspace() and (len(piece) == 1 or piece.isspace()):
            total += 1
        elif piece.lstrip(" ")[:1].isdigit():
            total += math.ceil(len(piece.lstrip(" ")) / 3)
        elif piece.lstrip(" ")[:1].isascii() and piece.lstrip(" ")[:1].isalpha():
            total += math.ceil(len(piece.lstrip(" ")) / 4)
        elif first.isascii():
            total += 1
        else:
            total += math.ceil(len(piece.encode("utf-8")) / 2)
    return total


def scope_of(path: str) -> tuple[str, str]:
    """(scope kind, scope name) of a path: ``/projects/acme/x.md`` → ``("project", "acme")``;
    ``/org/...`` → ``("org", "")``; anything else ``("other", "")``."""
    parts = path.split("/", 3)
    root = parts[1] if len(parts) > 1 else ""
    if root == "org":
        return "org", ""
    kind = _ROOTS.get(root)
    if kind is not None and len(parts) > 3:
        return kind, parts[2]
    return "other", ""


@dataclass(frozen=True, slots=True)
class Item:
    """One readable file as context sees it (gathered by the service, never by this module).

    ``scope`` must be ``scope_of(path)``. ``body``: the content without frontmatter, for core
    files only. ``used_at``: the later of
    the last change and the last recorded read. ``rank``: search position for the query (1 is
    best), None when the file did not match or there was no query.
    """

    path: str
    summary: str | None
    used_at: dt.datetime
    core: bool = False
    skill_name: str | None = None
    review_due: dt.datetime | None = None
    verify: str | None = None
    unverified: bool = False
    expired: dt.datetime | None = None
    rank: int | None = None
    body: str | None = None
    #: :func:`scope_of` the path (computed once by whoever builds the item)
    scope: tuple[str, str] = ("other", "")

    def order_key(self) -> tuple[Any, ...]:
        kind, name = self.scope
        rank = self.rank if self.rank is not None else math.inf
        return (_SCOPE_RANK[kind], name, rank, -self.used_at.timestamp(), self.path)

    def marks(self) -> list[str]:
        out = []
        if self.skill_name is not None:
            out.append("skill")
        if self.core:
            out.append("core")
        if self.review_due is not None:
            out.append(f"review due since {self.review_due.date().isoformat()}")
        if self.unverified:
            out.append("unverified")
        if self.expired is not None:
            out.append(f"expired {self.expired.date().isoformat()}")
        if self.verify is not None:
            out.append(f"verify: {_one_line(self.verify)}")
        return out


@dataclass(frozen=True)
class Assembled:
    """The assembled context: ``markdown`` (what an agent reads) and its parts as data."""

    markdown: str
    tokens: int
    budget: int
    core: tuple[Item, ...]
    skills: tuple[Item, ...]
    index: tuple[Item, ...]
    #: core files listed by path only (their body did not fit)
    core_listed: tuple[Item, ...]
    #: readable files left out for the budget, in all and by scope kind
    omitted: int
    omitted_by_scope: dict[str, int]
    readable: int
    closing: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``--format json``): the same selection as the markdown."""

        def one(item: Item, *, body: bool = False) -> dict[str, Any]:
            kind, name = item.scope
            out: dict[str, Any] = {
                "path": item.path,
                "scope": kind,
                "scope_name": name,
                "summary": item.summary,
                "marks": item.marks(),
            }
            if item.skill_name is not None:
                out["skill"] = item.skill_name
            if body:
                out["content"] = item.body
                out["tokens"] = estimate_tokens(item.body or "")
            return out

        return {
            "tokens": self.tokens,
            "budget": self.budget,
            "readable_files": self.readable,
            "core": [one(i, body=True) for i in self.core],
            "core_listed": [one(i) for i in self.core_listed],
            "skills": [one(i) for i in self.skills],
            "index": [one(i) for i in self.index],
            "omitted": {"files": self.omitted, "by_scope": dict(self.omitted_by_scope)},
            "closing": self.closing,
            "markdown": self.markdown,
            **self.extra,
        }


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _scope_heading(kind: str, name: str) -> str:
    if kind in ("org", "other"):
        return f"### {kind}"
    return f"### {kind} {name}"


def _index_line(item: Item) -> str:
    summary = f" — {_one_line(item.summary)}" if item.summary else ""
    marks = "".join(f" [{m}]" for m in item.marks())
    return f"- {item.path}{summary}{marks}"


def _skill_line(item: Item) -> str:
    summary = f" — {_one_line(item.summary)}" if item.summary else ""
    return f"- **{item.skill_name}**{summary} ({item.path})"


def _core_block(item: Item) -> str:
    kind, name = item.scope
    where = f"{kind} {name}".strip()
    head = f"### {item.path} ({where})"
    notes = [f"> {m}" for m in item.marks() if m != "core"]
    body = (item.body or "").strip("\n")
    return "\n".join([head, *notes, "", body, ""])


def _core_listed_line(item: Item) -> str:
    tokens = estimate_tokens(item.body or "")
    return f"- {item.path} (core, about {tokens} tokens: too long for this budget; read it whole)"


_HOW = (
    "read a file whole with `memdir read PATH` (the `view` tool over MCP), find more with "
    "`memdir search QUERY`, or ask for a larger --budget"
)


def _closing(counts: Counter[str], readable: int, expired_note: str) -> str:
    """The closing line: ``counts`` holds the files left out by scope kind."""
    left_out = sum(counts.values())
    if not left_out:
        every = "The 1 readable file is" if readable == 1 else f"All {readable} readable files are"
        return f"{every} listed above{expired_note}."
    parts = ", ".join(f"{counts[k]} {k}" for k in SCOPE_ORDER if counts[k])
    return (
        f"Left out for the budget: {left_out} of {readable} readable files ({parts}); "
        f"{_HOW}{expired_note}."
    )


def part_of(item: Item) -> int:
    """Which part an item goes in: 0 core, 1 skills, 2 the index (the assembly's first key)."""
    return 0 if item.core else 1 if item.skill_name is not None else 2


def assemble(
    items: Iterable[Item],
    *,
    budget: int = DEFAULT_BUDGET,
    title: str,
    hidden_expired: int = 0,
) -> Assembled:
    """Order, render and cut ``items`` (every readable file) to ``budget`` estimated tokens.

    ``title`` is the first line (who and where); ``hidden_expired`` counts expired files left
    out by default, mentioned in the closing line. Raises :class:`InvalidInput` when the budget
    cannot hold even the title and the closing line.
    """
    ordered = sorted(items, key=lambda i: (part_of(i), *i.order_key()))
    counts = Counter(i.scope[0] for i in ordered)
    return assemble_ordered(ordered, counts, budget=budget, title=title,
                            hidden_expired=hidden_expired)  # fmt: skip


def assemble_ordered(
    ordered: Iterable[Item],
    counts: Counter[str],
    *,
    budget: int = DEFAULT_BUDGET,
    title: str,
    hidden_expired: int = 0,
) -> Assembled:
    """:func:`assemble` over items already in the assembly's order — by :func:`part_of`, then
    :meth:`Item.order_key` — consumed lazily: items after the first that does not fit are
    never drawn, so a store-wide listing can stream from an ordered query. ``counts``: every
    readable file by scope kind (what the closing line reports, drawn or not)."""
    if not 1 <= budget <= MAX_BUDGET:
        raise InvalidInput(
            f"budget must be from 1 to {MAX_BUDGET} tokens, received {budget}", budget=budget
        )
    readable = sum(counts.values())
    expired_note = ""
    if hidden_expired:
        files = (
            "1 expired file is" if hidden_expired == 1 else f"{hidden_expired} expired files are"
        )
        expired_note = f"; {files} hidden (show them with --include-expired)"
    header = (
        f"# {title}\n\n"
        "Core memory in full, then skills, then an index of the other files by scope (task, "
        "agent, user, project, org).\n"
    )
    # The closing line can only get shorter than this worst case (fewer scopes, fewer digits).
    worst = _closing(counts, readable, expired_note) if readable else _closing(Counter(), 0, "")
    reserve = estimate_tokens(header) + estimate_tokens("\n" + worst + "\n")
    if reserve > budget:
        raise InvalidInput(
            f"a budget of {budget} tokens cannot hold even the context's title and closing "
            f"line ({reserve} tokens); give --budget {reserve} or more",
            budget=budget,
            needed=reserve,
        )
    left = budget - reserve
    chunks: list[str] = [header]
    core: list[Item] = []
    listed: list[Item] = []
    skills: list[Item] = []
    index: list[Item] = []
    open_section: list[str | None] = [None]
    open_scope: list[tuple[str, str] | None] = [None]

    def take(text: str) -> bool:
        nonlocal left
        cost = estimate_tokens(text)
        if cost > left:
            return False
        left -= cost
        chunks.append(text)
        return True

    def section(name: str, scope: tuple[str, str] | None, line: str) -> bool:
        """Add ``line`` with the section and scope headings it needs, or nothing."""
        heads = ""
        if open_section[0] != name:
            heads += f"\n## {name}\n"
        if scope is not None and (open_section[0] != name or open_scope[0] != scope):
            heads += _scope_heading(*scope) + "\n"
        if not take(heads + line):
            return False
        open_section[0], open_scope[0] = name, scope
        return True

    for item in ordered:
        part = part_of(item)
        if part == 0:
            if section("Core memory", None, "\n" + _core_block(item)):
                core.append(item)
            elif section("Core memory", None, _core_listed_line(item) + "\n"):
                listed.append(item)
            else:
                break
        elif part == 1:
            if not section("Skills", None, _skill_line(item) + "\n"):
                break
            skills.append(item)
        else:
            if not section("Index", item.scope, _index_line(item) + "\n"):
                break
            index.append(item)
    left_out = counts.copy()
    left_out.subtract(i.scope[0] for part in (core, listed, skills, index) for i in part)
    left_out = +left_out
    closing = _closing(left_out, readable, expired_note)
    chunks.append("\n" + closing + "\n")
    markdown = "".join(chunks)
    tokens = estimate_tokens(markdown)
    assert tokens <= budget, (tokens, budget)  # subadditivity of the estimate guarantees it
    return Assembled(
        markdown=markdown,
        tokens=tokens,
        budget=budget,
        core=tuple(core),
        skills=tuple(skills),
        index=tuple(index),
        core_listed=tuple(listed),
        omitted=sum(left_out.values()),
        omitted_by_scope=dict(sorted(left_out.items())),
        readable=readable,
        closing=closing,
    )
