"""The import-time redactor (memdir.transcripts.redact): what it changes, counts and caches.

Secrets are built at run time, never committed as literals.
"""

from __future__ import annotations

import random
import string
from typing import Any

from memdir.transcripts.redact import Redactor, marker

RNG = random.Random(99)
KEY_ID = "AKIA" + "".join(RNG.choice(string.ascii_uppercase + string.digits) for _ in range(16))
PAT = "ghp" + "_" + "".join(RNG.choice(string.ascii_letters + string.digits) for _ in range(36))


class Counting:
    """The guard's screen, counting the texts it is given (the Redactor's own seam)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.inner = Redactor()._screen

    def __call__(self, text: str) -> Any:
        self.texts.append(text)
        return self.inner(text)


def test_secrets_in_values_are_replaced_and_counted_per_occurrence() -> None:
    redactor = Redactor()
    record = {"a": f"key {KEY_ID} here", "b": [f"key {KEY_ID} here", {"c": f"token {PAT}"}],
              "n": 3, "ok": "nothing to see"}  # fmt: skip
    cleaned = redactor.clean(record)
    assert cleaned["a"] == f"key {marker('secret.aws-access-key')} here" == cleaned["b"][0]
    assert cleaned["b"][1] == {"c": f"token {marker('secret.github-token')}"}
    assert (cleaned["n"], cleaned["ok"]) == (3, "nothing to see")
    assert redactor.counts == {"secret.aws-access-key": 2, "secret.github-token": 1}
    assert redactor.total == 3
    assert KEY_ID in record["a"]  # the input is not modified


def test_a_clean_record_is_returned_as_is() -> None:
    record = {"role": "user", "content": ["plain words", {"x": 1}], "é": "ü"}
    assert Redactor().clean(record) is record


def test_keys_are_made_storable_and_screened_only_when_unstorable() -> None:
    redactor = Redactor()
    record = {"bad\x00key": "v", f"{KEY_ID}": "keys are not screened", "s\ud800": f"{PAT}"}
    cleaned = redactor.clean(record)
    assert list(cleaned) == ["bad\ufffdkey", KEY_ID, "s\ufffd"]
    assert cleaned["s\ufffd"] == marker("secret.github-token")
    assert redactor.clean({f"{KEY_ID}\x00": 1}) == {f"{marker('secret.aws-access-key')}\ufffd": 1}


def test_values_are_made_storable() -> None:
    cleaned = Redactor.disabled().clean(["a\x00b", {"k": "lone \udc80 surrogate"}, f"{KEY_ID}"])
    assert cleaned == ["a\ufffdb", {"k": "lone \ufffd surrogate"}, KEY_ID]


def test_one_screen_per_record_and_long_strings_once_per_import() -> None:
    screen = Counting()
    redactor = Redactor(screen=screen)
    prompt = "You are a helpful airline agent. " * 20  # 660 characters: cached
    for n in range(3):
        redactor.clean({"system": prompt, "user": f"turn {n}", "again": f"turn {n}"})
    assert len(screen.texts) == 3
    assert screen.texts[0] == f"{prompt}\nturn 0"  # distinct strings, joined by newlines
    assert screen.texts[1:] == ["turn 1", "turn 2"]
    leaked = f"{prompt} {KEY_ID}"
    assert redactor.clean([leaked, leaked]) == [prompt + " " + marker("secret.aws-access-key")] * 2
    assert redactor.clean([leaked]) == [prompt + " " + marker("secret.aws-access-key")]
    assert len(screen.texts) == 4 and redactor.total == 3  # cached, still counted


def test_a_finding_across_two_strings_redacts_its_part_of_each() -> None:
    pem_kind = "RSA " + "PRIVATE KEY"
    head, tail = f"-----BEGIN {pem_kind}-----", f"MIIB\n-----END {pem_kind}-----"
    cleaned = Redactor().clean([head, tail])
    assert cleaned == [marker("secret.private-key")] * 2
