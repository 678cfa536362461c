"""Redact credentials from text: agent transcripts and raw output before they are recorded,
program text and transcripts again when they are exported.

A ``Redactor`` replaces two kinds of secret with ``REDACTED``:

* literal values it was given (the provider's credential variables, see
  ``Redactor.from_environment``), together with the encodings an Agent is likely to
  print them in: JSON-escaped, URL-encoded and base64 (standard and URL-safe, at each
  of the three byte alignments, so a secret inside a base64-encoded file is found too);
* well-known secret shapes, whoever printed them: OpenAI/Anthropic ``sk-`` keys,
  ``Bearer`` tokens and ``Authorization`` headers, AWS access key ids, GitHub, GitLab,
  Hugging Face, Google and Slack tokens, JWTs, PEM private key blocks, passwords in
  URLs, and ``KEY=value`` / ``"api_key": "value"`` assignments whose key names a
  credential (only the value is replaced; the key and the quotes stay).

The shapes are written to leave ordinary text alone: identifiers (``tokenizer``,
``max_tokens``, ``skip``), code that computes a credential (``api_key =
os.environ["X"]``), hex digests, UUIDs and numbers pass unchanged. A value assigned
to a credential key is replaced only if it is 8+ characters, does not read as a name
(``"bos_token": "bos_token_id"``, ``TOKEN = "AWS_SESSION_TOKEN"`` stay) and, unquoted,
mixes letters and digits; quoted, it must have no whitespace or brackets
(``"pad_token": "<pad>"`` stays).

``text`` makes one pass over the literals (a substring test per form, then one
escaped alternation, longest first, only on a hit) and one over the shapes (each a
pattern that starts with a literal or a small character set, run only if the
lowercased text contains its anchor, and none at all when it contains no anchor of
any shape); with nothing to replace it returns its argument itself, after
linear scans only (tens of milliseconds per megabyte). It
repeats until the text is stable, so redaction is idempotent:
``text(text(s)) == text(s)``. Everything is deterministic.

Limits: a secret split across two separately redacted chunks is not found (redact
whole lines or messages); a PEM block with no END line is redacted to the end of the
text it is in, but its remainder in a later chunk is not; literal values shorter
than ``MIN_SECRET_LENGTH`` are ignored; hex and other encodings are not derived;
a shape-only secret that reads as a name (``password = "correct-horse-battery"``) or,
unquoted, has no digit is kept (literal values are replaced whatever they look like);
two dict keys that redact to the same string collapse into one.

A leaf (the standard library only): the agents redact what they record
with it (``evopolicygym.agents.message_redaction`` adds transcript messages), and the exporters
redact program text, diffs and tool arguments with it, credential values being known
to the Host only during a Run, so exports find secrets by their shapes.
"""

from __future__ import annotations

import base64
import builtins
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, Self, cast

__all__ = [
    "CREDENTIAL_VARIABLES",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "Redactor",
    "is_credential_name",
]

REDACTED = "[REDACTED]"

# A literal shorter than this is not replaced: short values ("true", "1", "admin", a
# model name) occur all over ordinary text, so replacing them would garble transcripts
# without protecting anything; real credentials are far longer.
MIN_SECRET_LENGTH = 8

# Passes of ``text`` before it gives up looking for a fixed point. One pass is stable
# for every input met in practice; a second one catches a literal that a replacement
# exposed. A cycle would need a secret built from pieces of REDACTED itself.
_MAX_PASSES = 4

# ``Redactor.text`` remembers its result for strings of at most _MEMO_LONGEST characters,
# _MEMO_CHARS characters of them at most (then it starts over).
_MEMO_LONGEST = 4096
_MEMO_CHARS = 8 * 1024 * 1024
_SAME: Any = object()  # the memo's mark for "returned unchanged"

CREDENTIAL_VARIABLES: frozenset[str] = frozenset(
    {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "MOONSHOT_API_KEY",
        "KIMI_API_KEY",
        "QODER_PERSONAL_ACCESS_TOKEN",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "AZURE_OPENAI_API_KEY",
        "AZURE_CLIENT_SECRET",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
        "MISTRAL_API_KEY",
        "GROQ_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "XAI_API_KEY",
        "DASHSCOPE_API_KEY",
        "COHERE_API_KEY",
        "PERPLEXITY_API_KEY",
        "REPLICATE_API_TOKEN",
        "WANDB_API_KEY",
        "SLACK_BOT_TOKEN",
        "NPM_TOKEN",
        "PYPI_TOKEN",
        "UV_PUBLISH_TOKEN",
        "TWINE_PASSWORD",
        "PGPASSWORD",
    }
)

_CREDENTIAL_SUFFIXES = (
    "_API_KEY",
    "_APIKEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_ACCESS_KEY",
    "_SECRET_KEY",
    "_PRIVATE_KEY",
    "_PAT",
)
_CREDENTIAL_BARE = frozenset({"API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"})


def is_credential_name(name: str) -> bool:
    """Whether an environment variable named ``name`` holds a credential, by its name alone."""
    upper = name.upper()
    return (
        upper in CREDENTIAL_VARIABLES
        or upper in _CREDENTIAL_BARE
        or upper.endswith(_CREDENTIAL_SUFFIXES)
    )


# --------------------------------------------------------------------------- the shapes
#
# Each shape is its own pattern that starts with a literal or a small character set,
# so the regex engine skips ahead to where it could match (a leading lookbehind or a
# big alternation would make it try every position: ten times slower). Boundaries are
# lookbehinds placed after that first part. Each pattern names the part it replaces
# ``s_*``, the last group of its alternative to close, so ``match.lastgroup`` is it.

# RFC 6750 token characters (bearer tokens, base64, JWT) but "=", allowed only at the
# end of a value (base64 padding): a scan for a value stops at the next "=", so text
# like "token=token=token=..." stays linear instead of rescanning its rest at each key.
_T = r"[A-Za-z0-9._~+/-]"
_TOKEN_VALUE = rf"{_T}{{{MIN_SECRET_LENGTH},}}={{0,3}}"
# An unquoted value assigned to a credential key: no whitespace, quotes, brackets,
# ",;&", "$" (a variable reference), "=" or ":" (these end a value; "=" may pad it).
_U = r"[A-Za-z0-9_\-.+/~@%!#^*?]"
# A quoted value: anything but whitespace, quotes, backslashes and brackets, so
# "<pad>", "[MASK]", "{var}" and REDACTED itself are not values.
_Q = r"[^\s\"'`\\<>\[\]{}]"
# The word a credential key ends with (case-insensitive), as a trie behind its first
# letter: OPENAI_API_KEY, x-api-key, apiKey, access_token, client_secret,
# aws_secret_access_key, db.password, --token ...
_KEY_WORD = (
    r"[aAsSpPtT](?=(?i:pi|cc|ec|ri|as|ok))"
    r"(?:(?<=[aA])(?i:pi[_-]?key|ccess[_-]?key(?:[_-]?id)?)"
    r"|(?<=[sS])(?i:ecret(?:[_-]?access)?(?:[_-]?key)?)"
    r"|(?<=[pP])(?i:rivate[_-]?key|ass(?:word|wd|phrase))"
    r"|(?<=[tT])(?i:oken))"
    r"(?![\w-])"
)
_KEY_NAME = re.compile(
    r"[\w.-]*?(?i:api[_-]?key|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?access)?(?:[_-]?key)?"
    r"|private[_-]?key|password|passwd|passphrase|token)",
    re.ASCII,
)
_SEPARATOR = r"\\*[\"']?[ \t]*(?::=|=>|[:=])[ \t]*"
# A value that reads as a name, not a secret: words of one case (a digit or two at
# their end) joined by "_", "-" or ".", or a Capitalized-Header-Name. In code and
# configs these are variable, field and header names ("bos_token_id", "AWS_SESSION_TOKEN",
# "X-Api-Token", "my-secret"); generated secrets mix cases or digits and never match.
_WORD_LOWER = r"(?:[a-z]+[0-9]{0,2}|[0-9]{1,2})"
_WORD_UPPER = r"(?:[A-Z]+[0-9]{0,2}|[0-9]{1,2})"
_NAME = (
    rf"_*(?:{_WORD_LOWER}(?:[_.-]+{_WORD_LOWER})*|{_WORD_UPPER}(?:[_.-]+{_WORD_UPPER})*"
    r"|[A-Z][a-z]*(?:-[A-Z][a-z]*)+)_*"
)
_NAME_LIKE = re.compile(_NAME, re.ASCII)


def _assigned(tag: str) -> str:
    """A quoted value (8+ characters) or an unquoted one (8+, letters and digits mixed),
    either not a name."""
    return (
        rf"(?:(?P<q_{tag}>\\*[\"'])(?!{_NAME}(?P=q_{tag}))"
        rf"(?P<s_{tag}_quoted>{_Q}{{{MIN_SECRET_LENGTH},}})(?P=q_{tag})"
        rf"|(?!{_NAME}(?!{_U}))"
        rf"(?P<s_{tag}>(?={_U}*?\d)(?={_U}*?[A-Za-z]){_U}{{{MIN_SECRET_LENGTH},}}={{0,3}})"
        rf"(?!{_U}|[(\[{{<]))"
    )


_PEM_LABEL = r"-----{0}[ A-Z0-9]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"
_AUTH_SCHEMES = r"basic|bearer|token|bot|digest|negotiate|ntlm|apikey"

# Each shape with the lowercase strings one of which a text must contain for it to match:
# ``in`` over a lowercased copy rules most shapes out faster than their scan would.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (needles, re.compile(shape, re.ASCII))
    for needles, shape in (
        # PEM private keys: the body, up to the END line or, if cut off, the end of the text.
        (
            ("-----begin",),
            rf"{_PEM_LABEL.format('BEGIN')}\s*(?P<s_pem>[\s\S]*?)\s*(?:{_PEM_LABEL.format('END')}|\Z)",
        ),
        # Authorization headers (Proxy-Authorization too): the credential after an
        # optional scheme; without a scheme it must contain a digit.
        (
            ("authorization",),
            r"[aA](?<!\w[aA])(?i:uthorization)\\*[\"']?[ \t]*[:=][ \t]*\\*[\"']?"
            rf"(?:(?i:{_AUTH_SCHEMES})[ \t]+(?P<s_auth_scheme>{_TOKEN_VALUE})"
            rf"|(?P<s_auth>(?={_T}*?\d){_TOKEN_VALUE}))",
        ),
        # Bearer tokens anywhere; a digit or 20+ characters tells a token from prose.
        (
            ("bearer",),
            rf"[bB](?<![A-Za-z0-9_][bB])(?i:earer)[ \t]+"
            rf"(?P<s_bearer>(?={_T}*?\d|{_T}{{20}}){_TOKEN_VALUE})",
        ),
        # KEY=value, "api_key": "value", apiKey: value, token => 'value' ...
        (("key", "token", "secret", "pass"), rf"{_KEY_WORD}{_SEPARATOR}{_assigned('kv')}"),
        # --api-key value, --token 'value'
        (("--",), rf"--(?<![\w-]--)(?i:[\w-]*?){_KEY_WORD}[ \t]+{_assigned('flag')}"),
        # scheme://user:password@host
        (("://",), r"://[^\s/:@\"'<>\\\[\]{}]+:(?P<s_url>[^\s/@?#\"'<>\\\[\]{}]+)(?=@)"),
        # Token formats, whole.
        (("sk-",), r"(?P<s_openai>sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{20,})"),
        (
            ("akia", "asia"),
            r"(?P<s_aws>A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[0-9A-Z]{16})(?![0-9A-Za-z])",
        ),
        (
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
            r"(?P<s_github>gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{36,})",
        ),
        (
            ("github_pat_",),
            r"(?P<s_github_pat>github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,})",
        ),
        (("glpat-",), r"(?P<s_gitlab>glpat-(?<![A-Za-z0-9_-]glpat-)[A-Za-z0-9_-]{20,})"),
        (("hf_",), r"(?P<s_hf>hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,})"),
        (("aiza",), r"(?P<s_google>AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35})"),
        (
            ("xox",),
            r"(?P<s_slack>xox[abeoprs]-(?<![A-Za-z0-9_-]xox[abeoprs]-)[A-Za-z0-9-]{10,})",
        ),
        (
            ("eyj",),
            r"(?P<s_jwt>eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)",
        ),
    )
)

# A dict key naming a credential (its string value is replaced whole) and the value of
# an Authorization entry (the scheme is kept).
# Every shape's anchors, less those containing another: a lowercased text with none of
# them matches no shape. Short texts (keys, small values: most of them) are searched with
# one alternation, long ones with a substring test per anchor (the regex engine tries
# the alternation at every position).
_NEEDLES = tuple(
    sorted(
        {
            needle
            for needles, _ in _SHAPES
            for needle in needles
            if not any(other != needle and other in needle for ns, _ in _SHAPES for other in ns)
        }
    )
)
_ANCHORS = re.compile("|".join(re.escape(needle) for needle in _NEEDLES))
_SHORT = 256


def _has_anchor(lowered: str) -> bool:
    if len(lowered) < _SHORT:
        return _ANCHORS.search(lowered) is not None
    return any(needle in lowered for needle in _NEEDLES)


_AUTHORIZATION_KEY = re.compile(r"(?i:(?:proxy-)?authorization)", re.ASCII)
_QUOTED_VALUE = re.compile(rf"{_Q}{{{MIN_SECRET_LENGTH},}}", re.ASCII)
_SCHEME_VALUE = re.compile(rf"((?i:{_AUTH_SCHEMES})[ \t]+)?({_TOKEN_VALUE})", re.ASCII)


_CREDENTIAL_KEY, _AUTHORIZATION = 1, 2  # what a dict key names (``_key_kind``)
_KEY_KINDS: dict[str, int] = {}  # the kinds of the keys met so far (a few thousand at most)
_MEMO_KEYS = 65536


def _key_kind(key: str) -> int:
    """Whether a dict key names a credential, an Authorization header (bits), or neither."""
    kind = _KEY_KINDS.get(key) if type(key) is str else None
    if kind is None:
        kind = (_CREDENTIAL_KEY if _KEY_NAME.fullmatch(key) else 0) | (
            _AUTHORIZATION if _AUTHORIZATION_KEY.fullmatch(key) else 0
        )
        if type(key) is str and len(key) <= _MEMO_LONGEST:
            if len(_KEY_KINDS) >= _MEMO_KEYS:
                _KEY_KINDS.clear()
            _KEY_KINDS[key] = kind
    return kind


def _replace_shape(match: re.Match[str]) -> str:
    group = match.lastgroup
    assert group is not None and group.startswith("s_"), group
    start, end = match.span(group)
    whole, offset = match.group(), match.start()
    return whole[: start - offset] + REDACTED + whole[end - offset :]


# --------------------------------------------------------------------------- the literals


def _encodings(secret: str) -> set[str]:
    """The forms of ``secret`` an Agent may print: as is, JSON-escaped, URL-encoded, base64."""
    forms = {secret, secret.strip()}
    forms.add(json.dumps(secret)[1:-1])
    forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    # (a value from os.environ may hold undecodable bytes as surrogate escapes)
    raw = secret.encode("utf-8", "surrogateescape")
    for quoted in (urllib.parse.quote(raw, safe=""), urllib.parse.quote_plus(raw)):
        forms.add(quoted)
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quoted))
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms.update((whole, whole.rstrip("=")))
        # Inside a longer base64 text the secret starts at byte offset 0, 1 or 2 of a
        # 3-byte group; keep the characters that depend on the secret's bytes alone.
        for align in range(3):
            encoded = encode(b"\0" * align + raw).decode("ascii").rstrip("=")
            head = (0, 2, 3)[align]
            tail = (align + len(raw)) * 8 // 6  # characters made of whole 6-bit groups
            forms.add(encoded[head:tail])
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH and form not in REDACTED}


def _literal_pattern(secrets: Iterable[str]) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
    """Every form of every secret, longest first, and one escaped alternation of them."""
    forms: set[str] = set()
    for secret in secrets:
        forms |= _encodings(secret)
    ordered = tuple(sorted(forms, key=lambda form: (-len(form), form)))  # deterministic
    if not ordered:
        return (), None
    return ordered, re.compile("|".join(re.escape(form) for form in ordered))


# --------------------------------------------------------------------------- the redactor


class Redactor:
    """Replaces literal secrets and well-known secret shapes by ``REDACTED``; immutable
    (it remembers what it made of short strings, which changes no result)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # A secret inside REDACTED itself would be "found" again in every replacement.
        kept = sorted(
            {
                s
                for s in secrets
                if isinstance(s, str) and len(s.strip()) >= MIN_SECRET_LENGTH and s not in REDACTED
            }
        )
        self._secrets: tuple[str, ...] = tuple(kept)
        self._forms, self._literals = _literal_pattern(kept)
        # ``text`` of the strings met so far (``_SAME``: returned unchanged), up to
        # _MEMO_CHARS characters: dict keys, roles, program files and tool names recur
        # across the messages and rows of an export. Redaction is a pure function of
        # the string and the secrets, so a memo changes no result.
        self._memo: dict[str, Any] = {}
        self._memo_chars = 0

    @classmethod
    def from_environment(
        cls, names: Iterable[str], environ: Mapping[str, str] = os.environ
    ) -> Self:
        """The values of ``names`` and of every variable whose name looks like a credential."""
        wanted = set(names)
        return cls(
            value
            for name, value in sorted(environ.items())
            if value and (name in wanted or is_credential_name(name))
        )

    def extended(self, secrets: Iterable[str]) -> Self:
        """A Redactor that also replaces ``secrets``."""
        return type(self)((*self._secrets, *secrets))

    def __repr__(self) -> str:  # never the secrets themselves
        return f"Redactor({len(self._secrets)} secrets)"

    # ------------------------------------------------------------------ text

    def _once(self, s: str) -> str:
        out = s
        # ``in`` is several times faster than the alternation, which only runs on a hit.
        if self._literals is not None and any(form in out for form in self._forms):
            out = self._literals.sub(REDACTED, out)
        lowered = out.lower()
        if not _has_anchor(lowered):
            return out
        for needles, shape in _SHAPES:
            if any(needle in lowered for needle in needles):
                out = shape.sub(_replace_shape, out)
        return out

    def may_replace(self, s: str) -> bool:
        """Whether ``text(s)`` could replace anything: when False it returns ``s``. One
        scan, so a large value (say, its JSON) can be ruled out before it is walked."""
        if self._literals is not None and any(form in s for form in self._forms):
            return True
        return _has_anchor(s.lower())

    def text(self, s: str) -> str:
        """``s`` with every secret replaced; ``s`` itself when there is none."""
        if type(s) is not str or len(s) > _MEMO_LONGEST:
            return self._text(s)
        memo = self._memo
        known = memo.get(s)
        if known is not None:
            return s if known is _SAME else cast(str, known)
        out = self._text(s)
        if self._memo_chars > _MEMO_CHARS:
            memo.clear()
            self._memo_chars = 0
        memo[s] = _SAME if out is s else out
        self._memo_chars += len(s) + (0 if out is s else len(out))
        return out

    def _text(self, s: str) -> str:
        out = self._once(s)
        if out == s:
            return s
        for _ in range(_MAX_PASSES - 1):
            again = self._once(out)
            if again == out:
                break
            out = again
        return out

    def bytes(self, b: builtins.bytes) -> builtins.bytes:
        """Raw output redacted as text; bytes that are not UTF-8 pass through unchanged."""
        decoded = b.decode("utf-8", "surrogateescape")
        out = self.text(decoded)
        return b if out is decoded else out.encode("utf-8", "surrogateescape")

    # ------------------------------------------------------------------ structures

    def value(self, v: Any) -> Any:
        """A JSON-like value with every string (dict keys too) redacted, recursively.

        The string value of a key that names a credential (``"api_key"``,
        ``"password"``...) is replaced whole; that of an ``Authorization`` key keeps
        its scheme. A value with nothing to replace is returned itself (``is``), however
        deep, so ``redactor.value(v) is not v`` tells that something was replaced.
        """
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            pairs = []
            same = True
            for k, item in v.items():
                new_key = self.text(k) if isinstance(k, str) else k
                new = self._entry(k, item)
                if same and (new_key is not k or new is not item):
                    same = False
                pairs.append((new_key, new))
            return v if same else dict(pairs)
        if isinstance(v, list | tuple):
            items = [self.value(item) for item in v]
            if all(new is old for new, old in zip(items, v, strict=True)):
                return v
            return items if isinstance(v, list) else tuple(items)
        if isinstance(v, builtins.bytes):
            return self.bytes(v)
        return v

    def _entry(self, key: Any, item: Any) -> Any:
        if isinstance(key, str) and isinstance(item, str):
            kind = _key_kind(key)
            if (
                kind & _CREDENTIAL_KEY
                and _QUOTED_VALUE.fullmatch(item)
                and not _NAME_LIKE.fullmatch(item)
            ):
                return REDACTED
            if kind & _AUTHORIZATION:
                match = _SCHEME_VALUE.fullmatch(item)
                if match:
                    return (match.group(1) or "") + REDACTED
        return self.value(item)
