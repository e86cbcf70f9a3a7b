"""The secret rules: hand-written credential patterns and how each detect-secrets plugin is used.

Kept apart from the scanning code in :mod:`memdir.guard.secrets` so the list of formats reads as
one table. Every gate here is a *necessary* condition of a match — a literal every match
contains, a minimum run of token characters — so gates change cost, never results.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from memdir.guard.lazy import LazyRegex

__all__ = [
    "HAND_PATTERNS",
    "PLUGIN_RULES",
    "PluginRule",
    "SecretPattern",
    "is_digest_id",
    "looks_like_placeholder",
]

_TEMPLATED = LazyRegex(r"^(?:\$\{?|\{\{?|<|%\(|\[)|(?:\}\}?|>|\)s|\])$")
_PLACEHOLDER_WORDS = LazyRegex(
    r"your|example|placeholder|redacted|changeme|dummy|sample|xxx|\.\.\.|<|>|todo|fixme|here",
    re.IGNORECASE,
)
_IDENTIFIER_ONLY = LazyRegex(r"^(?:[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+|[A-Z]{4,})$")
_STAND_INS = frozenset({"password", "passwd", "secret", "token", "apikey", "none", "null"})


def looks_like_placeholder(value: str) -> bool:
    """True for values that stand for a secret rather than being one.

    Templated (``${X}``, ``{{x}}``, ``<x>``, ``%(x)s``), shell expansions (``$X``),
    masked (``****``, ``xxxx``), words such as ``your``/``example``/``changeme``, or a plain
    identifier without digits (``YOUR_API_KEY``, ``api_key``, ``TOKEN``): such strings are
    documentation, not credentials.
    """
    if len(value) < 4 or value.startswith("$") or _TEMPLATED.search(value):
        return True
    if len(set(value.lower())) <= 2 or _PLACEHOLDER_WORDS.search(value):
        return True
    if value.lower() in _STAND_INS:
        return True
    return bool(_IDENTIFIER_ONLY.match(value)) and not any(c.isdigit() for c in value)


def is_digest_id(value: str) -> bool:
    """A git commit id or SHA-256 digest (40 or 64 hex digits): quoted often, not a secret."""
    return len(value) in (40, 64) and all(c in string.hexdigits for c in value)


def _mixed_classes(value: str) -> bool:
    """Has a digit, an upper- and a lower-case letter: every random key of 32+ chars does."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


@dataclass(frozen=True)
class SecretPattern:
    """A hand-written secret rule: ``pattern``'s group ``secret`` is the value.

    ``prefixes`` are literals of which at least one must occur in the text before the regex
    runs (lowercase, looked up in the lowered text; with ``cased``, in the text as written);
    ``accept`` rejects look-alikes; ``priority`` settles overlaps (specific formats 3,
    connection strings 2, generic assignments 1). Every match lies within ``reach`` characters
    of a prefix occurrence, so only those windows are searched (``None``: the whole text).

    Cheaper necessary conditions, checked before any prefix is looked for (they change cost,
    never results): every match contains a run of token characters (``[A-Za-z0-9+/=_-]``) of
    ``run`` or more characters, and with ``inside`` the prefix lies in that run, so prefixes
    are looked for in the long runs only; every match contains one of ``requires``
    (lowercase, looked up in the case-folded text, :attr:`~memdir.guard.base.Document.folded`).
    """

    rule: str
    label: str
    pattern: re.Pattern[str] | LazyRegex
    prefixes: tuple[str, ...]
    priority: int = 3
    accept: Callable[[str], bool] | None = None
    cased: bool = False
    reach: int | None = 300
    run: int = 0
    inside: bool = False
    requires: tuple[str, ...] = ()


def _not_placeholder(value: str) -> bool:
    return not looks_like_placeholder(value)


def _random_key(value: str) -> bool:
    """A generated key, not a stand-in: not a placeholder, mixing digits and both cases."""
    return _mixed_classes(value) and not looks_like_placeholder(value)


_PASSWORD_SYMBOLS: Final = frozenset("!@#$%^&*+=?~")


def _password_like(value: str) -> bool:
    """An unquoted value after "password:" / "password is" that is a password, not prose.

    It has a letter and a digit or one of ``!@#$%^&*+=?~`` (``hunter2``, ``Tr0ub4dor&3``), is
    no placeholder, path, URL or tag (``/run/secrets/db``, ``!vault``): ordinary words such as
    "required", "stored in the vault" or "case-sensitive" are not passwords.
    """
    if looks_like_placeholder(value) or "/" in value or value.startswith(("!", "&", "*")):
        return False
    return any(c.isalpha() for c in value) and any(
        c.isdigit() or c in _PASSWORD_SYMBOLS for c in value
    )


#: Words that name a password, in the languages memory is written in (lowercase literals).
#: Literals holding ``pass`` cost nothing extra (see ``Document.has``); ``passw`` and
#: ``contrase`` are looked up for the keyword plugin anyway.
#: Non-ASCII ones cost nothing on an ASCII text.
_PASSWORD_NAMES: Final = (
    "passw", "passphrase", "passcode", "passe", "pw", "contrase", "пароль", "hasło",
)  # fmt: skip
_PASSWORD_WORD: Final = (
    r"(?:password|passwd|passwort|passphrase|passcode|pwd|pw|contraseña|contrasena"
    r"|mot[ \t]+de[ \t]+passe|пароль|hasło)"
)
#: A value that may be a password: no spaces, quotes, brackets; not ending in ``.,;:?``.
_PASSWORD_VALUE: Final = r"[^\s\"'`<>()\[\]{}]{5,127}[^\s\"'`<>()\[\]{}.,;:?]"


HAND_PATTERNS: Final[tuple[SecretPattern, ...]] = (
    SecretPattern(
        "secret.anthropic-key",
        "Anthropic API key",
        LazyRegex(r"(?<![\w-])(?P<secret>sk-ant-[A-Za-z0-9_-]{32,})"),
        ("sk-ant-",),
        run=39,
        inside=True,
    ),
    SecretPattern(
        "secret.openai-key",
        "OpenAI API key",
        LazyRegex(r"(?<![\w-])(?P<secret>sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,})"),
        ("sk-",),
        accept=_mixed_classes,
        run=35,
        inside=True,
    ),
    SecretPattern(
        "secret.google-api-key",
        "Google API key",
        LazyRegex(r"(?<![\w-])(?P<secret>AIza[0-9A-Za-z_-]{35})(?![\w-])"),
        ("aiza",),
        run=39,
        inside=True,
    ),
    SecretPattern(
        "secret.github-token",
        "GitHub fine-grained personal access token",
        LazyRegex(r"(?<!\w)(?P<secret>github_pat_[A-Za-z0-9_]{60,})"),
        ("github_pat_",),
        run=71,
        inside=True,
    ),
    SecretPattern(
        "secret.stripe-key",
        "Stripe secret key",
        LazyRegex(r"(?<!\w)(?P<secret>[rs]k_(?:live|test)_[0-9A-Za-z]{20,})"),
        ("k_live_", "k_test_"),
        run=28,
        inside=True,
    ),
    SecretPattern(
        "secret.bearer-token",
        "credential in an Authorization header",
        LazyRegex(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|token|basic)\s+"
            r"(?P<secret>[A-Za-z0-9._~+/=-]{16,})"
        ),
        ("authorization",),
        accept=_not_placeholder,
    ),
    SecretPattern(
        "secret.private-key",
        "PEM private key block",
        LazyRegex(
            r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            r"[\s\S]*?-----END (?P=kind)-----"
        ),
        ("private key",),
        reach=None,
    ),
    SecretPattern(
        "secret.connection-string",
        "database or broker connection string with a password",
        LazyRegex(
            r"(?i:\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql"
            r"|sqlserver|oracle|cockroachdb|clickhouse)(?:\+\w+)?)://[^:\s/@]*:"
            r"(?P<secret>[^@\s/]+)@"
        ),
        (
            "postgres",
            "mysql",
            "mariadb",
            "mongodb",
            "redis",
            "amqp",
            "mssql",
            "sqlserver",
            "oracle",
            "cockroachdb",
            "clickhouse",
        ),
        priority=2,
        accept=_not_placeholder,
        requires=("://",),
    ),
    SecretPattern(
        "secret.basic-auth-url",
        "password in a URL",
        LazyRegex(
            r"(?i:\b[a-z][a-z0-9+.-]{1,30})://[^\s:/?#@\[\]\"'`<>]*:"
            r"(?P<secret>[^\s/?#@\"'`<>]+)@(?=[\w\[])"
        ),
        ("://",),
        priority=2,
        accept=_not_placeholder,
        requires=("@",),
    ),
    SecretPattern(
        "secret.azure-storage-key",
        "Azure account or shared access key",
        LazyRegex(
            r"(?i:\b(?:AccountKey|SharedAccessKey))=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})"
            r"(?![A-Za-z0-9+/=])"
        ),
        ("accountkey=", "accesskey="),
        accept=_random_key,
        run=30,
        inside=True,
    ),
    SecretPattern(
        "secret.password-value",
        "password written in prose or YAML",
        LazyRegex(
            rf"(?i:\b{_PASSWORD_WORD}\b)(?:[ \t]+(?:for|to|of|on|at|für|pour|para|per|de|do)"
            r"[ \t]+[^\n:=]{1,40}?)?[ \t]*(?:(?i:\b(?:is|was|will[ \t]+be|ist|war|es|est|é"
            r"|era|è))[ \t]+[\"'`]?|->[ \t]*|=>[ \t]*|:=[ \t]*|:[ \t]*|=[ \t]*)"
            rf"(?P<secret>{_PASSWORD_VALUE})"
        ),
        _PASSWORD_NAMES,
        priority=1,
        accept=_password_like,
        requires=_PASSWORD_NAMES,
    ),
    SecretPattern(
        "secret.aws-secret-key",
        "AWS secret access key",
        LazyRegex(
            r"(?i:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key"
            r"|secret access key)[\"']?\W{0,4}?(?:\s+is\s+|\s*[:=]\s*|\s+)[\"']?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        ("aws_secret", "awssecret", "secret_access", "secretaccess", "secret access"),
        run=40,
    ),
    SecretPattern(
        "secret.keyword-assignment",
        "quoted value assigned to a secret-named key",
        LazyRegex(
            r"(?i:\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token|private[_-]?key))[\"']?\s*(?:=|:|:=|=>)\s*([\"'`])"
            r"(?P<secret>[^\"'`\s]{4,})\1"
        ),
        ("pass", "pwd", "secret", "key", "token"),
        priority=1,
        accept=_not_placeholder,
        requires=("passw", "passp", "pwd", "secret", "key", "token"),
    ),
    SecretPattern(
        "secret.keyword-assignment",
        "secret assigned to an environment variable",
        LazyRegex(
            r"(?<![\w$])[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_KEY)"
            r"[A-Z0-9_]*=(?P<secret>[^\s'\"`]{6,})"
        ),
        ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "API_KEY", "APIKEY", "PRIVATE_KEY"),
        priority=1,
        accept=_not_placeholder,
        cased=True,
        requires=("=",),
    ),
)


@dataclass(frozen=True)
class PluginRule:
    """How one detect-secrets plugin is used, with the necessary conditions of its matches.

    A plugin looks at a line only if: one literal of ``gate`` occurs in the case-folded line
    (:attr:`~memdir.guard.base.Document.folded`; and one of ``also``, if given), one of
    ``cased`` occurs as written, the line holds a quote when ``quote``, and its longest run of
    token characters (``[A-Za-z0-9+/=_-]``) has at least ``min_run`` characters. Every match of
    the plugin satisfies these, so they only save time.
    """

    rule: str
    label: str
    priority: int
    gate: tuple[str, ...] = ()
    min_run: int = 16
    also: tuple[str, ...] = ()
    cased: tuple[str, ...] = ()
    quote: bool = False

    def admits(self, low: str, text: str, run: int) -> bool:
        """Whether a line (``text``, lowered ``low``, longest token run ``run``) may match."""
        if run < self.min_run or (self.quote and "'" not in text and '"' not in text):
            return False
        # Loops written out, not any() or a helper: this runs for every line and plugin.
        if self.gate:
            for literal in self.gate:
                if literal in low:
                    break
            else:
                return False
        if self.also:
            for literal in self.also:
                if literal in low:
                    break
            else:
                return False
        if self.cased:
            for literal in self.cased:
                if literal in text:
                    break
            else:
                return False
        return True


_GITLAB: Final = ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-",
                  "glimt-", "glptt-", "glagent-", "gloas-")  # fmt: skip
#: Gate for the keyword plugin: a literal of each word its denylist can match (``api_?key``
#: ... ``key_?pass`` hold "key", ``password`` and ``passwd`` "passw"; ``db_?pass`` and
#: ``database_?pass`` are spelt out). Not "pass" or "_pass", which would send every line
#: mentioning passengers through its regexes (about 1 ms on a 2 KB JSON line).
_KEYWORDS: Final = (
    "key", "passw", "db_pass", "dbpass", "database_pass", "databasepass", "pwd", "secret",
    "contrase",
)  # fmt: skip

#: detect-secrets plugin class name -> how it is used. Dict order is the order they run.
PLUGIN_RULES: Final[dict[str, PluginRule]] = {
    "AWSKeyDetector": PluginRule(
        "secret.aws-access-key",
        "AWS access key",
        3,
        ("akia", "asia", "abia", "acca", "a3t", "aws"),
        20,
    ),
    "GitHubTokenDetector": PluginRule(
        "secret.github-token", "GitHub token", 3, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), 40
    ),
    "GitLabTokenDetector": PluginRule("secret.gitlab-token", "GitLab token", 3, _GITLAB, 20),
    "SlackDetector": PluginRule(
        "secret.slack-token", "Slack token or webhook", 3, ("xox", "hooks.slack.com")
    ),
    "StripeDetector": PluginRule("secret.stripe-key", "Stripe secret key", 3, ("k_live_",), 32),
    "TwilioKeyDetector": PluginRule(
        "secret.twilio-key", "Twilio API key or account SID", 3, (), 34, cased=("AC", "SK")
    ),
    "SendGridDetector": PluginRule("secret.sendgrid-key", "SendGrid API key", 3, ("sg.",), 43),
    "NpmDetector": PluginRule("secret.npm-token", "npm auth token", 3, ("_authtoken",)),
    "PypiTokenDetector": PluginRule("secret.pypi-token", "PyPI upload token", 3, ("pypi-",), 70),
    "DiscordBotTokenDetector": PluginRule(
        "secret.discord-token", "Discord bot token", 3, (".",), 27
    ),
    "TelegramBotTokenDetector": PluginRule(
        "secret.telegram-token", "Telegram bot token", 3, (":",), 35
    ),
    "MailchimpDetector": PluginRule("secret.mailchimp-key", "Mailchimp API key", 3, ("-us",), 32),
    "SquareOAuthDetector": PluginRule(
        "secret.square-oauth", "Square OAuth secret", 3, ("sq0csp-",), 43
    ),
    "OpenAIDetector": PluginRule("secret.openai-key", "OpenAI API key", 3, ("t3blbkfj",), 20),
    "IbmCloudIamDetector": PluginRule(
        "secret.ibm-cloud-iam", "IBM Cloud IAM key", 3, ("key", "pwd", "pass", "token"), 44
    ),
    "IbmCosHmacDetector": PluginRule(
        "secret.ibm-cos-hmac", "IBM COS HMAC secret", 3, ("secret", "access", "key"), 32
    ),
    "CloudantDetector": PluginRule("secret.cloudant", "Cloudant credential", 3, ("cl",), 24),
    "SoftlayerDetector": PluginRule("secret.softlayer", "SoftLayer credential", 3, ("sl",), 64),
    "PrivateKeyDetector": PluginRule(
        "secret.private-key", "private key", 3, ("private key", "putty-user-key"), 0
    ),
    "JwtTokenDetector": PluginRule("secret.jwt", "JSON Web Token", 3, ("eyj",)),
    "KeywordDetector": PluginRule(
        "secret.keyword-assignment",
        "value assigned to a secret-named key",
        1,
        _KEYWORDS,
        0,
        quote=True,
    ),
    "Base64HighEntropyString": PluginRule(
        "secret.high-entropy-base64", "high-entropy base64 string", 0, (), 20, quote=True
    ),
    "HexHighEntropyString": PluginRule(
        "secret.high-entropy-hex", "high-entropy hex string", 0, (), 20, quote=True
    ),
}
