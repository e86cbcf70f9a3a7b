"""Helpers the importers share: canonical JSON, content blocks, usage, envelopes, error rules."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder, outcome_from_score
from memdir.transcripts.model import OUTCOMES, parse_time

_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)

__all__ = [
    "ERROR_PREFIX",
    "EnvelopeError",
    "apply_envelope",
    "as_str",
    "blocks_text",
    "dumps",
    "exit_code_in",
    "parse_arguments",
    "starts_with_error",
    "usage_of",
]

#: The ``is_error`` rule of formats without an error flag (OpenAI chat, Responses, τ-bench).
ERROR_PREFIX: Final = "Error: "
_EXIT_CODE: Final = re.compile(r"^(?:Error: )?Exit code:? (-?\d{1,9})\b")
_USAGE_NAMES: Final = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: The C encoder that ``_ENCODER.encode`` builds on every call, built once: importers encode
#: every record as its event's raw form, and the per-call set-up is a fifth of that cost. No
#: circular-reference bookkeeping (values come from parsed JSON; a cycle would end in
#: RecursionError, not ValueError). None where the C accelerator is missing.
_C_ENCODE: Final[Any] = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True
    )
)


def dumps(value: Any) -> str:
    """Canonical JSON text: compact, UTF-8 (not ASCII-escaped), keys in source order."""
    if _C_ENCODE is None or isinstance(value, str):
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def starts_with_error(output: str | None) -> bool:
    return output is not None and output.startswith(ERROR_PREFIX)


def exit_code_in(output: str | None) -> int | None:
    """The exit code a shell tool's output begins with (``Exit code 1`` / ``Exit code: 1``)."""
    if not output:
        return None
    match = _EXIT_CODE.match(output)
    return int(match.group(1)) if match else None


def parse_arguments(arguments: Any) -> Any:
    """Tool arguments as a JSON value: a JSON string is parsed, anything else kept as is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def blocks_text(content: Any) -> str | None:
    """The text of a message content: a string, or the text parts of a list of blocks.

    Text-like parts (``text``, ``input_text``, ``output_text``, ``summary_text``, OTel
    ``content``) are joined with blank lines; images and documents become ``[image]`` /
    ``[document]``; other parts are skipped. None when there is no text at all.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            text = block.get("text")
            if isinstance(text, str) and kind in (None, "text", "input_text", "output_text",
                                                  "summary_text", "refusal"):  # fmt: skip
                parts.append(text)
            elif kind == "text" and isinstance(block.get("content"), str):
                parts.append(block["content"])
            elif kind in ("image", "input_image", "image_url"):
                parts.append("[image]")
            elif kind in ("document", "input_file", "file"):
                parts.append("[document]")
            elif kind == "refusal" and isinstance(block.get("refusal"), str):
                parts.append(block["refusal"])
    return "\n\n".join(parts) if parts else None


def usage_of(value: Any) -> dict[str, int] | None:
    """Token counts from a usage object, named as Anthropic does (``input_tokens``, ...).

    OpenAI's ``prompt_tokens`` / ``completion_tokens`` become ``input_tokens`` /
    ``output_tokens``; ``*_details.cached_tokens`` becomes ``cache_read_input_tokens``;
    nested details are flattened as ``<parent>.<name>``. Only integers are kept.
    """
    if not isinstance(value, Mapping):
        return None
    out: dict[str, int] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            continue
        if isinstance(item, int) and not isinstance(item, bool):
            out[_USAGE_NAMES.get(key, key)] = item
        elif isinstance(item, Mapping):
            for sub, number in item.items():
                if isinstance(number, int) and not isinstance(number, bool):
                    if sub == "cached_tokens" and key.startswith(("prompt", "input")):
                        out["cache_read_input_tokens"] = number
                    else:
                        out[f"{key}.{sub}"] = number
    return out or None


class EnvelopeError(ValueError):
    """An envelope field has the wrong type (the transcript is skipped with this reason)."""


_SCOPE_KEYS: Final = ("project", "user", "agent", "task")


def apply_envelope(builder: TranscriptBuilder, envelope: Mapping[str, Any]) -> None:
    """Session metadata from an envelope's top level and its ``metadata`` object.

    Recognised: ``project``, ``user``, ``agent``, ``task`` (scope labels: strings),
    ``labels`` (list of strings), ``outcome`` (success / failure / unknown), ``score`` or
    ``reward`` (a number; sets the outcome when none is given: >= 1 success, else failure),
    ``started_at`` / ``ended_at``, ``parent_session_id``. Everything else in ``metadata`` is kept
    as transcript metadata. Raises :class:`EnvelopeError` for a present field of the wrong type.
    """
    metadata = envelope.get("metadata")
    sources: list[Mapping[str, Any]] = [envelope]
    if isinstance(metadata, Mapping):
        sources.append(metadata)
        for key, value in metadata.items():
            if isinstance(key, str) and key not in _KNOWN:
                builder.set_meta(key, value)
    t = builder.transcript
    for source in sources:
        for key in _SCOPE_KEYS:
            if key in source and source[key] is not None:
                value = source[key]
                if not isinstance(value, str):
                    raise EnvelopeError(
                        f"{key!r} must be a string, received {type(value).__name__}"
                    )
                setattr(t, key, value)
        if "labels" in source and source["labels"] is not None:
            labels = source["labels"]
            if not isinstance(labels, list) or not all(isinstance(v, str) for v in labels):
                raise EnvelopeError("'labels' must be a list of strings")
            t.labels = tuple(dict.fromkeys([*t.labels, *labels]))
        _apply_outcome(builder, source)
        for key in ("started_at", "ended_at"):
            if source.get(key) is not None:
                when = parse_time(source[key])
                if when is None:
                    raise EnvelopeError(f"{key!r} is not an ISO 8601 time: {source[key]!r:.60}")
                setattr(t, key, when)
        parent = source.get("parent_session_id")
        if isinstance(parent, str):
            t.parent_session = parent


_KNOWN: Final = frozenset({*_SCOPE_KEYS, "labels", "outcome", "score", "reward", "started_at",
                           "ended_at", "parent_session_id", "session_id"})  # fmt: skip


def _apply_outcome(builder: TranscriptBuilder, source: Mapping[str, Any]) -> None:
    t = builder.transcript
    for key in ("score", "reward"):
        value = source.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise EnvelopeError(f"{key!r} must be a number, received {value!r:.60}")
        t.score = float(value)
        if t.outcome == "unknown":
            t.outcome = outcome_from_score(t.score)
    outcome = source.get("outcome")
    if outcome is not None:
        if outcome not in OUTCOMES:
            raise EnvelopeError(f"'outcome' must be one of {', '.join(OUTCOMES)}: {outcome!r:.60}")
        t.outcome = outcome
