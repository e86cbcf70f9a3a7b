"""The MCP tools: thin handlers that resolve paths, call the service and render the result.

Each handler takes the request's principal (``principal_for_request(ctx)``), maps its tool
paths onto store paths (:class:`~memdir.mcp.namespace.Namespace`), makes one service call (two
for a directory or the snippet of an edit) and returns text. Errors become ``isError`` results
with one actionable line: the reference memory tool's wording where it has one, else the
memdir error's message; :class:`~memdir.core.errors.Proposed` is not an error but a result
saying the change awaits review.

An error result carries, beside its line of text, ``_meta["memdir/error"]``: the error's
``type`` and details as in the REST envelope (``current_sha256``, ``lines``, ...), so a program
driving the tools can tell the error classes apart without reading the text. A
:class:`~memdir.mcp.render.Refusal` worded as the reference tool words it carries the memdir
error it stands for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from memdir.core import memory_tool
from memdir.core.context import DEFAULT_BUDGET
from memdir.core.errors import (
    SURFACE_WORDS,
    InvalidInput,
    MemdirError,
    NotFound,
    PathConflict,
    PreconditionFailed,
    Proposed,
    ScreeningRefused,
)
from memdir.core.model import (
    Delete,
    FileView,
    Operation,
    Principal,
    Rename,
    canonical_operation,
    operation_from_dict,
)
from memdir.mcp import render
from memdir.mcp.namespace import ALIAS, Namespace, Resolved
from memdir.mcp.render import Refusal
from memdir.service import MemoryService

__all__ = ["MAX_GREP_LINES", "Ctx", "MemoryTools", "PrincipalForRequest", "error_result"]

Ctx = Context[Any, Any]
PrincipalForRequest = Callable[[Ctx], Principal]

MAX_GREP_LINES = 200
#: Reads and compare-and-swap writes an edit tries before it gives up on a busy file.
_EDIT_ATTEMPTS = 5
_log = logging.getLogger(__name__)

# Argument types: the names and meaning of Claude's memory tool (memory_20250818).
ToolPath = Annotated[
    str,
    Field(
        description="Absolute memory path, e.g. /projects/acme/conventions.md (or /memories/...)."
    ),
]
IfMatch = Annotated[
    str | None,
    Field(
        description="Optional sha256 (from `view`): apply only if the file still has exactly "
        "this content; otherwise fail with its current sha256."
    ),
]


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def error_result(text: str, cause: MemdirError | None) -> CallToolResult:
    """An error result: the one line, and the error's type and details in ``_meta``."""
    result = _text(text, error=True)
    if cause is not None:
        described = {k: v for k, v in cause.to_dict().items() if k != "message"}
        result.meta = {"memdir/error": _jsonable(described)}
    return result


def _in_range(name: str, value: int, most: int) -> None:
    """Bounds checked here, not in the schema: the SDK's schema errors span several lines."""
    if not 1 <= value <= most:
        details: dict[str, Any] = {name: value}
        raise InvalidInput(f"{name} must be from 1 to {most}, received {value}", **details)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class MemoryTools:
    """The tool handlers over one service, one store and one namespace."""

    def __init__(
        self,
        service: MemoryService,
        principal_for_request: PrincipalForRequest,
        store: str,
        namespace: Namespace,
    ) -> None:
        self.service = service
        self.principal_for = principal_for_request
        self.store = store
        self.ns = namespace

    # --- the call frame: principal, errors ------------------------------------------------

    def _call(self, ctx: Ctx, path: str, action: Callable[[Principal], str]) -> CallToolResult:
        """Run ``action`` as the request's principal; ``path`` names the target in errors."""
        try:
            return _text(action(self.principal_for(ctx)))
        except Refusal as refusal:
            return error_result(refusal.text, refusal.cause)
        except Proposed as error:
            return _text(render.proposed(error.details["proposal"], error.details.get("reason")))
        except PreconditionFailed as error:
            expected = error.details.get("expected_sha256")
            current = error.details.get("current_sha256")
            return error_result(render.precondition_failed(path, expected, current), error)
        except ScreeningRefused as error:
            findings = error.details.get("findings") or []
            return error_result(render.screening_refused(error.message, findings), error)
        except MemdirError as error:
            _log.info("tool call on %s failed: %s", path, error.type)
            return self._error(error, path)

    def _error(self, error: MemdirError, path: str) -> CallToolResult:
        """``error`` in the tools' words: paths as the caller names them, next steps as tools.

        The store path an error names (its ``path`` detail) becomes the tool path — under
        ``/memories`` when the caller used the alias — so a non-default root never shows, and
        the hint names this server's tools, not memdir's commands.
        """
        store_path = error.details.get("path")
        shown: str | None = None
        if (
            isinstance(store_path, str)
            and store_path.startswith("/")
            and self.ns.inside(store_path)
        ):
            alias = self.ns.memories_alias and (path == ALIAS or path.startswith(ALIAS + "/"))
            shown = self.ns.display(store_path, alias)
        text = error.say(SURFACE_WORDS["mcp"], store="", shown=shown)
        result = error_result(text, error)
        if shown is not None and result.meta is not None:
            result.meta["memdir/error"]["path"] = shown
        return result

    def _resolve(self, path: str) -> Resolved:
        return self.ns.resolve(path)

    def _files_under(self, principal: Principal, directory: str) -> list[tuple[str, int]]:
        """(store path, size) of every readable file under ``directory``; [] if none."""
        try:
            entries = self.service.ls(principal, self.store, directory, depth=None)
        except NotFound as error:
            if error.details.get("path") == directory:
                return []
            raise
        return [(e.path, e.size) for e in entries if e.kind == "file" and e.path != directory]

    @staticmethod
    def _is_missing(error: NotFound, store_path: str) -> bool:
        """The error is about ``store_path`` itself (not, say, an unknown store)."""
        return error.details.get("path") == store_path

    def _kind(self, principal: Principal, target: Resolved) -> memory_tool.Kind:
        """What ``target`` names for ``principal``: a readable file, a directory (readable
        files beneath it, or the root), or nothing."""
        if self.ns.is_root(target):
            return "directory"
        try:
            self.service.read(principal, self.store, target.store_path)
        except NotFound as error:
            if not self._is_missing(error, target.store_path):
                raise
        else:
            return "file"
        return "directory" if self._files_under(principal, target.store_path) else None

    def _missing_file(self, principal: Principal, path: str, target: Resolved) -> Refusal:
        """An edit's target that is no file: a directory, or nothing (the reference's words)."""
        if self._kind(principal, target) == "directory":
            return Refusal(render.not_a_file(path))
        return Refusal(render.not_found(path))

    @staticmethod
    def _root_name(target: Resolved) -> str:
        """The root as the caller names it: ``/memories`` through the alias, else ``/``."""
        return ALIAS if target.alias else "/"

    def context_text(
        self,
        principal: Principal,
        *,
        project: str | None = None,
        task: str | None = None,
        query: str | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> str:
        """The principal's context (docs/context.md) as markdown."""
        assembled = self.service.context(
            principal, self.store, project=project, task=task, query=query, budget=budget
        )
        return assembled.markdown

    # --- the memory-tool commands ---------------------------------------------------------

    def view(
        self,
        ctx: Ctx,
        path: ToolPath,
        view_range: Annotated[
            list[int] | None,
            Field(
                description="Optional [start_line, end_line] (1-based, inclusive; end_line -1 "
                "means to the end of the file). Files only."
            ),
        ] = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            if view_range is not None and len(view_range) != 2:
                raise Refusal(
                    f"view_range must be [start_line, end_line], got {view_range}; use -1 as "
                    "end_line to read to the end"
                )
            target = self._resolve(path)
            if target.store_path != "/":
                try:
                    found = self.service.read(principal, self.store, target.store_path)
                except NotFound as error:
                    if not self._is_missing(error, target.store_path):
                        raise
                else:
                    return render.file_view(
                        path, found.content, found.sha256, found.version, view_range
                    )
            files = self._files_under(principal, target.store_path)
            if not files and not self.ns.is_root(target):
                raise Refusal(render.not_found(path))
            base = len(target.store_path.rstrip("/")) + 1
            listing = render.directory_view(path, [(p[base:], size) for p, size in files])
            if path == "/" and self.ns.root == "/":
                # The first view the instructions ask for: it starts with the context
                # (/memories keeps the reference tool's listing exactly).
                return self.context_text(principal) + "\n" + listing
            return listing

        return self._call(ctx, path, run)

    def create(
        self,
        ctx: Ctx,
        path: ToolPath,
        file_text: Annotated[str, Field(description="The whole content of the file.")],
        if_match: IfMatch = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            target = self._resolve(path)
            try:
                self.service.write(
                    principal, self.store, target.store_path, file_text,
                    if_match=if_match, if_absent=if_match is None,
                )  # fmt: skip
            except PreconditionFailed as error:
                if if_match is None:
                    raise Refusal(
                        render.already_exists(path, error.details.get("current_sha256")), error
                    ) from None
                raise
            return render.created(path) if if_match is None else render.overwritten(path)

        return self._call(ctx, path, run)

    def str_replace(
        self,
        ctx: Ctx,
        path: ToolPath,
        old_str: Annotated[
            str, Field(description="The exact text to replace; it must occur exactly once.")
        ],
        new_str: Annotated[str, Field(description="The text to put in its place.")],
        if_match: IfMatch = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            target = self._resolve(path)

            def plan(found: FileView) -> tuple[Operation, str]:
                content, line = memory_tool.plan_replace(path, found.content, old_str, new_str)
                operation = memory_tool.replace_operation(
                    target.store_path, old_str, new_str, content, found.sha256
                )
                return operation, render.replaced(content, line)

            return self._edit(principal, path, target, if_match, plan)

        return self._call(ctx, path, run)

    def insert(
        self,
        ctx: Ctx,
        path: ToolPath,
        insert_line: Annotated[
            int,
            Field(
                description="Insert after this line: 0 = at the top, the line count = at the end."
            ),
        ],
        insert_text: Annotated[str, Field(description="The text to insert as its own line(s).")],
        if_match: IfMatch = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            target = self._resolve(path)

            def plan(found: FileView) -> tuple[Operation, str]:
                content = memory_tool.plan_insert(path, found.content, insert_line, insert_text)
                operation = memory_tool.insert_operation(target.store_path, content, found.sha256)
                return operation, render.edited(path)

            return self._edit(principal, path, target, if_match, plan)

        return self._call(ctx, path, run)

    def _edit(
        self,
        principal: Principal,
        path: str,
        target: Resolved,
        if_match: str | None,
        plan: Callable[[FileView], tuple[Operation, str]],
    ) -> str:
        """An edit with the memory tool's rules: read the file, ``plan`` the change on what it
        says (:mod:`memdir.core.memory_tool`), apply it with compare-and-swap on that version.
        When another writer got in between, look again — unless the caller gave ``if_match``:
        then the file must still be that version, and a changed one is the answer."""
        if self.ns.is_root(target):
            raise Refusal(render.not_a_file(path))
        for _ in range(_EDIT_ATTEMPTS):
            try:
                found = self.service.read(principal, self.store, target.store_path)
            except NotFound as error:
                if self._is_missing(error, target.store_path):
                    raise self._missing_file(principal, path, target) from None
                raise
            if if_match is not None and if_match != found.sha256:
                raise PreconditionFailed(
                    f"{path} changed: expected sha256 {if_match} but it has {found.sha256}",
                    path=target.store_path,
                    expected_sha256=if_match,
                    current_sha256=found.sha256,
                )
            operation, answer = plan(found)
            try:
                self.service.commit(principal, self.store, [operation])
            except PreconditionFailed:
                if if_match is not None:
                    raise
                continue
            return answer
        raise Refusal(memory_tool.kept_changing(path))

    def delete(self, ctx: Ctx, path: ToolPath, if_match: IfMatch = None) -> CallToolResult:
        def run(principal: Principal) -> str:
            target = self._resolve(path)
            root = self._root_name(target)
            is_root = self.ns.is_root(target)
            refusal = memory_tool.delete_refusal(
                path, target="directory", is_root=is_root, root=root
            )
            if refusal is not None:
                raise Refusal(refusal)
            try:
                self.service.delete(principal, self.store, target.store_path, if_match=if_match)
                return render.deleted(path)
            except NotFound as error:
                if not self._is_missing(error, target.store_path):
                    raise
            files = self._files_under(principal, target.store_path)
            kind: memory_tool.Kind = "directory" if files else None
            refusal = memory_tool.delete_refusal(path, target=kind, is_root=False, root=root)
            if refusal is not None:
                raise Refusal(refusal)
            self._no_if_match_on_directory(path, if_match)
            self.service.commit(principal, self.store, [Delete(p) for p, _ in files])
            return render.deleted(path)

        return self._call(ctx, path, run)

    def rename(
        self,
        ctx: Ctx,
        old_path: Annotated[str, Field(description="The file or directory to move.")],
        new_path: Annotated[str, Field(description="Its new path; must not exist yet.")],
        if_match: IfMatch = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            source, target = self._resolve(old_path), self._resolve(new_path)
            moving_root = self.ns.is_root(source)
            onto_itself = source.store_path == target.store_path
            destination = None if moving_root or onto_itself else self._kind(principal, target)
            moving = None if moving_root or destination else self._kind(principal, source)
            refusal = memory_tool.rename_refusal(
                old_path,
                new_path,
                source=moving,
                destination=destination,
                source_is_root=moving_root,
                into_source=target.store_path.startswith(source.store_path.rstrip("/") + "/"),
                onto_itself=onto_itself,
                root=self._root_name(source),
            )
            if refusal is not None:
                raise Refusal(refusal)
            try:
                if moving == "file":
                    self.service.rename(
                        principal,
                        self.store,
                        source.store_path,
                        target.store_path,
                        if_match=if_match,
                    )
                else:
                    self._rename_directory(principal, old_path, source, target, if_match)
            except PathConflict as error:
                if self._kind(principal, target) is not None:  # written meanwhile
                    raise Refusal(render.destination_exists(new_path), error) from None
                raise  # memdir's own reason (a file where the destination needs a directory)
            return render.renamed(old_path, new_path)

        return self._call(ctx, old_path, run)

    def _rename_directory(
        self,
        principal: Principal,
        old_path: str,
        source: Resolved,
        target: Resolved,
        if_match: str | None,
    ) -> None:
        """Every file under ``source`` moved under ``target``, in one commit."""
        self._no_if_match_on_directory(old_path, if_match)
        files = self._files_under(principal, source.store_path)
        cut = len(source.store_path)
        moves: list[Operation] = [Rename(p, target.store_path + p[cut:]) for p, _ in files]
        self.service.commit(principal, self.store, moves)

    @staticmethod
    def _no_if_match_on_directory(path: str, if_match: str | None) -> None:
        if if_match is not None:
            raise Refusal(
                f"{path} is a directory; if_match applies to a file's content, so call again "
                "without it"
            )

    # --- memdir's additions ---------------------------------------------------------------

    def search(
        self,
        ctx: Ctx,
        query: Annotated[
            str,
            Field(description='Words to look for; "exact phrases" and prefix* work.'),
        ],
        prefix: Annotated[str, Field(description="Only files under this directory.")] = "/",
        limit: Annotated[int, Field(description="Most results to return (1-100).")] = 10,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            _in_range("limit", limit, 100)
            where = self._resolve(prefix)
            hits = self.service.search(
                principal, self.store, query, prefix=where.store_path, limit=limit
            )
            if not hits:
                return f"No memory matches {query!r} under {prefix}."
            lines = [f"{len(hits)} result{'s' if len(hits) != 1 else ''} for {query!r}:"]
            for hit in hits:
                shown = self.ns.display(hit.path, where.alias)
                lines.append(f"{hit.rank}. {shown} (version {hit.version})")
                lines.append(f"    {' '.join(hit.snippet.split())}")
            return "\n".join(lines)

        return self._call(ctx, prefix, run)

    def grep(
        self,
        ctx: Ctx,
        pattern: Annotated[
            str,
            Field(
                description="A regular expression (Python syntax, run by RE2 in linear time: "
                "no backreferences or lookaround), matched per line."
            ),
        ],
        prefix: Annotated[str, Field(description="Only files under this directory.")] = "/",
        ignore_case: Annotated[bool, Field(description="Match case-insensitively.")] = False,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            where = self._resolve(prefix)
            matches = self.service.grep(
                principal, self.store, pattern, prefix=where.store_path,
                ignore_case=ignore_case, limit=MAX_GREP_LINES + 1,
            )  # fmt: skip
            if not matches:
                return f"No line matches {pattern!r} under {prefix}."
            lines = [
                f"{self.ns.display(m.path, where.alias)}:{m.line}:{m.text}"
                for m in matches[:MAX_GREP_LINES]
            ]
            if len(matches) > MAX_GREP_LINES:
                lines.append(
                    f"(only the first {MAX_GREP_LINES} matching lines are shown; narrow the "
                    "pattern or the prefix)"
                )
            return "\n".join(lines)

        return self._call(ctx, prefix, run)

    def history(
        self,
        ctx: Ctx,
        path: Annotated[
            str | None,
            Field(description="A file: its versions. Omitted: the latest changes to memory."),
        ] = None,
        limit: Annotated[int, Field(description="Most entries to return (1-200).")] = 20,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            _in_range("limit", limit, 200)
            if path is not None:
                return self._file_history(principal, path, limit)
            root = None if self.ns.root == "/" else self.ns.root
            commits = self.service.history(principal, self.store, prefix=root, limit=limit)
            if not commits:
                return "No changes yet."
            lines = []
            for c in commits:
                changes = ", ".join(
                    f"{v.operation} {self.ns.display(v.path)}"
                    for v in c.changes
                    if self.ns.inside(v.path)
                )
                why = f" — {c.reason}" if c.reason else ""
                via = f" (proposal {c.proposal})" if c.proposal else ""
                lines.append(
                    f"revision {c.revision} {c.created_at:%Y-%m-%d %H:%M:%S}Z by {c.actor}"
                    f"{via}: {changes}{why}"
                )
            return "\n".join(lines)

        return self._call(ctx, path or "/", run)

    def _file_history(self, principal: Principal, path: str, limit: int) -> str:
        target = self._resolve(path)
        try:
            versions = self.service.file_history(
                principal, self.store, target.store_path, limit=limit
            )
        except NotFound as error:
            if self._is_missing(error, target.store_path):
                raise Refusal(render.not_found(path), error) from None
            raise
        lines = [f"History of {path}, newest first:"]
        for v in versions:
            sha = "redacted" if v.redacted else (v.sha256 or "-")
            where = self.ns.display(v.path, target.alias)  # a file's path changes with renames
            moved = f" from {self.ns.display(v.old_path, target.alias)}" if v.old_path else ""
            why = f" — {v.reason}" if v.reason else ""
            lines.append(
                f"version {v.version} {v.created_at:%Y-%m-%d %H:%M:%S}Z {v.operation} {where}"
                f"{moved} by {v.actor} (revision {v.revision}, sha256 {sha}){why}"
            )
        return "\n".join(lines)

    def propose(
        self,
        ctx: Ctx,
        operations: Annotated[
            list[dict[str, Any]],
            Field(
                description='The changes, each an object naming its "command" with the '
                "arguments of that tool: create {path, file_text}, str_replace {path, old_str, "
                "new_str}, insert {path, insert_line, insert_text}, delete {path}, rename "
                "{old_path, new_path}; each may carry if_match."
            ),
        ],
        rationale: Annotated[
            str, Field(description="Why the change should be made, with the evidence you have.")
        ],
        evidence: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description="Optional: transcript evidence, each {transcript_id, first_event, "
                "last_event, excerpt}. It is checked against the transcript; what does not "
                "match is shown to reviewers as unverified."
            ),
        ] = None,
    ) -> CallToolResult:
        def run(principal: Principal) -> str:
            ops = [self._operation(raw) for raw in operations]
            proposal = self.service.propose(
                principal, self.store, ops, rationale=rationale, evidence=evidence
            )
            doubts = [e for e in proposal.evidence or () if isinstance(e, dict)
                      and e.get("verified") is False]  # fmt: skip
            unverified = (
                f" {len(doubts)} of {len(proposal.evidence)} evidence items could not be "
                "verified against their transcripts and are shown as unverified."
                if doubts
                else ""
            )
            paths = ", ".join(self.ns.display(p) for p in proposal.paths if self.ns.inside(p))
            return (
                f"Proposal {proposal.id} is {proposal.status}: {len(ops)} operation"
                f"{'s' if len(ops) != 1 else ''} on {paths} await review. Nothing has changed "
                f"yet; a reviewer will accept or reject it.{unverified}"
            )

        return self._call(ctx, "/", run)

    def _operation(self, raw: dict[str, Any]) -> Operation:
        """A proposal operation from memory-tool style (or memdir style) JSON."""
        data = canonical_operation(raw)
        for key in ("path", "new_path"):
            if isinstance(data.get(key), str):
                data[key] = self._resolve(data[key]).store_path
        if data.get("op") == "create" and data.get("if_match"):
            data["op"] = "write"  # a full rewrite of an existing file
        if data.get("op") == "insert" and isinstance(data.get("text"), str):
            data["text"] = data["text"].rstrip("\n")
        return operation_from_dict(data)
