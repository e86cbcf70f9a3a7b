"""Generate docs/rest.md from the REST app's own OpenAPI document.

Run `python scripts/gen_rest_docs.py` after changing a route; tests/test_api_docs.py fails while
the committed reference differs from what this prints. `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

HEADER = """# REST API reference

Generated from the app's OpenAPI document by `scripts/gen_rest_docs.py`; do not edit by hand.
A running server serves the same document at `/openapi.json` and a browsable form at `/docs`.

Start a server with `memdir serve` (127.0.0.1:8420 by default). On the first start of a
database it registers `user:admin` in group `admins` and prints its token once on stderr.

## Conventions

- **Authentication.** Every `/v1` route needs `Authorization: Bearer <token>`; without a valid
  token the answer is 401 with `WWW-Authenticate: Bearer`. `/healthz` (liveness: the process
  answers) and `/readyz` (readiness: the database answers; 503 with the kind of outage
  otherwise) need no token (see docs/configuration.md); `/metrics` (Prometheus text) needs a
  token of a member of the `admins` group that allows `admin` on `/.memdir/db/metrics`
  (database-wide administration is one decision, narrowed by the token like any action;
  `GET .../policy/check?action=admin&path=/.memdir/db/tokens` explains it).
- **Errors.** Every error, whatever its origin, is one JSON envelope
  `{"error": {"type": "...", "message": "...", ...details}}`; match on `type`. Statuses:

  | status | `type` | when |
  |---|---|---|
  | 400 | `invalid_input`, `invalid_path` | a malformed request, path, parameter or body |
  | 401 | `unauthenticated` | no valid bearer token |
  | 403 | `forbidden` | the caller may read the target but not do this; archived store |
  | 404 | `not_found` | no such thing, or the caller may not read it (the same answer) |
  | 405 | `method_not_allowed` | the route does not take this method (`Allow` lists those it does) |
  | 409 | `conflict`, `edit_conflict`, `path_conflict`, `idempotency_mismatch` | state conflict |
  | 412 | `precondition_failed` | `If-Match` / `If-None-Match: *` did not hold; `current_sha256` |
  | 413 | `content_too_large` | content over `MEMDIR_MAX_FILE_BYTES` |
  | 422 | `invalid_content` | content is not UTF-8 (`offset` of the first bad byte) or malformed |
  | 422 | `screening_refused` | write screening refused the content (`findings`) |
  | 428 | `precondition_required` | a full overwrite of an existing file without `If-Match` |
  | 429 | `rate_limited` | over the token's rate; `Retry-After` says when to retry |
  | 202 | `proposed` | not applied: queued for review as proposal `proposal` (`Location`) |
  | 500 | `internal_error` | a bug; the server log has the details, the response none |
  | 503 | `backend_error` | the database cannot be used right now; `Retry-After` |

- **Files and conditional requests.** A file is `/v1/stores/{store}/files/{path}` with the memory
  path's leading `/` dropped and the rest percent-encoded. `GET` returns the raw content
  (`text/markdown`) with `ETag: "<sha256>"` and `X-Memdir-Version`, or the FileView as JSON with
  `Accept: application/json` or `?format=json`; `If-None-Match` answers 304 while the file is
  unchanged. `PUT` takes the whole content as the raw UTF-8 body and needs `If-Match: <sha256>`
  (overwrite exactly that content) or `If-None-Match: *` (create only) when the file exists —
  428 without either; a new file may be created with neither. A failed precondition is always
  412 with the current sha256, even when the new content equals the current one.
- **Verbs on one file** are `POST` to the file's URL with `:verb` appended — `:str_replace`,
  `:insert`, `:move`, `:revert`, `:redact`, `:purge` — with a JSON body; the last `:` of the URL
  starts the verb. Edits, moves and deletes take an optional `If-Match` (header or `if_match`).
- **Idempotency.** `Idempotency-Key: <key>` on a write (any request that makes a commit: file
  writes, edits, moves, deletes, commits, reverts, policy changes, purges) makes a retry safe:
  the same key with the same request returns the first result (`replayed: true`, header
  `Idempotent-Replayed: true`); the same key with another request is 409
  `idempotency_mismatch`. Proposals, reviews, creating, archiving and deleting stores,
  registering principals and creating tokens honour the key the same way. A replay answers only a caller who may still do what the first
  attempt did (the token and the policy now): otherwise it gets the error the request itself
  would get (404 / 403), never the recorded result.
- **Provenance** of a change comes from the headers `X-Memdir-Session`, `X-Memdir-Transcript`,
  `X-Memdir-Reason`, `X-Memdir-Source-Kind`, or the same fields (`session`, `transcript`,
  `reason`, `source_kind`) of a JSON body, which win. The actor is always the token's principal.
- **Pagination.** Every list answers `{"items": [...], "next_cursor": "..." | null}`; pass
  `next_cursor` back as `cursor` (with the same other parameters) for the next page, `limit`
  sets the page size.
- **Change feed.** `GET /v1/stores/{store}/changes?after=R&wait=S` returns the commits after
  revision `R` that the caller may see, waiting up to `S` seconds (at most 60) for the first;
  follow it by passing `next_after` back as `after`. `GET .../changes/stream?after=R` is the
  same feed as Server-Sent Events (`id:` the revision, so `Last-Event-ID` resumes; `event:
  commit`; `data:` the event as JSON).
- **Rate limits** are per token (a token bucket; requests without a token count per client
  address): `MEMDIR_RATE_LIMIT=RATE/BURST` (default `50/100`) or `off`. Over it: 429 with
  `Retry-After`. Failed authentications (401) are limited per client address, whatever token
  they carry: `MEMDIR_AUTH_FAILURE_LIMIT=RATE/BURST` (default `1/30`) or `off`; while an address is
  over it, its failed authentications answer 429 until its bucket refills (requests that
  authenticate still go through). The client address is the socket peer; only a peer in
  `MEMDIR_TRUSTED_PROXIES` has its `X-Forwarded-For` / `X-Forwarded-Proto` honoured. Each
  server process keeps its own buckets.
- **Metrics** (`/metrics`): `memdir_http_requests_total` and
  `memdir_http_request_duration_seconds` by method, route template and status;
  `memdir_cas_conflicts_total` (412s) by route; `memdir_proposals_created_total` by origin
  (`agent`, `quarantine`); `memdir_screening_refusals_total`; `memdir_screening_findings_total`
  by action; `memdir_rate_limited_total`. Each server process counts its own requests (with
  `memdir serve --workers N`, a scrape sees the worker that answers it).
- **Server settings** beside those of `docs/configuration.md`: `MEMDIR_RATE_LIMIT`,
  `MEMDIR_AUTH_FAILURE_LIMIT`, `MEMDIR_TRUSTED_PROXIES`,
  `MEMDIR_TOKEN_CACHE_SECONDS` (how long an authentication is reused, default 1: a token revoked
  through another process stops working here within that time; through this server at once)
  and `MEMDIR_BENCH_ROUTES` (benchmarks only).
"""


def _type(schema: dict[str, Any]) -> str:
    """A short type expression for a JSON schema."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if "oneOf" in schema:
        return " | ".join(_type(s) for s in schema["oneOf"])
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    if kind == "object" and "additionalProperties" in schema:
        return "object"
    if kind is None:
        return "any"
    if schema.get("format") == "date-time":
        return "datetime"
    return str(kind)


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [f"**{op['summary']}.**", ""]
    if op.get("description"):
        lines += [" ".join(op["description"].split()).replace("``", "`"), ""]
    params = [p for p in op.get("parameters", [])]
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            description = p.get("description") or p["schema"].get("description")
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_cell(_type(p['schema']))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(description)} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        content = body["content"].items()
        kinds = ", ".join(f"`{media}` ({_type(spec.get('schema', {}))})" for media, spec in content)
        lines += [f"Body: {kinds}.", ""]
    statuses, errors = [], []
    for status, response in sorted(op["responses"].items()):
        content = response.get("content", {})
        kinds = [_type(c.get("schema", {})) for c in content.values()]
        if kinds == ["ErrorEnvelope"] and status != "202":
            errors.append(status)
            continue
        statuses.append(f"`{status}` {', '.join(kinds) or '(no body)'}")
        if status == "202":
            statuses[-1] += " (`proposed`)"
    lines += ["Responses: " + "; ".join(statuses) + f"; errors {', '.join(errors)}.", ""]
    return lines


def _schemas(components: dict[str, Any]) -> list[str]:
    lines = ["## Schemas", ""]
    for name in sorted(components):
        schema = components[name]
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [" ".join(schema["description"].split()).replace("``", "`"), ""]
        properties = schema.get("properties", {})
        if properties:
            required = set(schema.get("required", ()))
            lines += ["| field | type | required | description |", "|---|---|---|---|"]
            for field, spec in properties.items():
                lines.append(
                    f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else 'no'}"
                    f" | {_cell(spec.get('description'))} |"
                )
            lines.append("")
    return lines


def render() -> str:
    import memdir
    from memdir.api import create_app
    from memdir.api.settings import ApiSettings
    from memdir.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        svc = memdir.open(f"sqlite:///{tmp}/docs.db", create=True)
        try:
            document = create_app(Settings(), svc, api_settings=ApiSettings()).openapi()
        finally:
            svc.db.close()
    parts = [HEADER]
    by_tag: dict[str, list[str]] = {}
    for path, item in document["paths"].items():
        for method, op in item.items():
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).extend(_operation(method, path, op))
    for tag, lines in by_tag.items():
        parts.append(f"\n## {tag.capitalize()}\n\n" + "\n".join(lines))
    parts.append("\n" + "\n".join(_schemas(document["components"]["schemas"])))
    return "".join(parts).rstrip("\n") + "\n"


def main() -> int:
    target = ROOT / "docs" / "rest.md"
    text = render()
    if "--check" in sys.argv[1:]:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print("docs/rest.md is stale: run `python scripts/gen_rest_docs.py`", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
