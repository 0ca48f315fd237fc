"""Ingest, secrets: API keys, tokens, private keys and passwords pasted into a note or a session,
found and masked before anything is indexed (FTS, vectors, snippets, the stored text).

Input: a document's text. Output: the text with each secret's value replaced by a placeholder
`[redacted:<kind>]` (a private key's body by one placeholder and blank lines), and what was masked
(kind and 1-based line, never the value). Masking is in place: the line count and every line
outside a secret are unchanged, so line numbers, headings and links stay where they were.

What counts as a secret: the well-known shapes that are secrets on sight (AWS access key ids,
GitHub tokens ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, Slack xox* tokens and webhook URLs, JWTs,
PEM private-key blocks), and values assigned to a key named like one (`password:`, `token=`,
`api_key:`, `client_secret`, `aws_secret_access_key`, `Authorization: Bearer ...`). An assigned
value must look like a credential, not like documentation: a placeholder (`<your-token>`,
`${TOKEN}`, `{{ .Values.x }}`, `YOUR_API_KEY`, `xxxx`, `changeme`, `abc...xyz`), an identifier,
a qualified name (`WriteResult.CallbackToken`) or a plain word is left alone, and so is a key named
public (`PublicKeyToken=`); a value of 8 or more characters that mixes letters and digits is masked. AWS's
documentation keys (…EXAMPLE…) are examples, not secrets. The false positives this leaves on five
real documentation sites are counted and checked in docs/benchmarks/secrets.md.

Pure regular expressions (no dependency): detect-secrets (PyPI) reports lines, not spans, and its
entropy plugins flag every hash and UUID in documentation.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDER = "[redacted:{}]"
PLACEHOLDER_RE = re.compile(r"\[redacted:([a-z0-9-]+)\]")


@dataclass(frozen=True)
class Masked:
    kind: str  # "github-token", "password", ...
    line: int  # 1-based, where the value starts


_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "aws-access-key-id",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ),
    (
        "github-token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])"
        ),
    ),
    ("slack-token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}")),
    ("jwt", re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}")),
)
_PEM = re.compile(
    r"^([ \t>]*-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?)-----[ \t]*\n)"
    r"(.*?)"
    r"(?=^[ \t>]*-----END \2-----)",
    re.M | re.S,
)
_PEM_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]{20,}")
# A quick pass first: most documents hold none of these, and then the shapes are not searched.
_QUICK = re.compile(
    r"A[KSBCIRPN][A-Z]A[0-9A-Z]{16}|gh[pousr]_|github_pat_|xox[abposr]-|hooks\.slack\.com|eyJ|PRIVATE KEY"
)
# key = value, key: value, "key": "value", the value on the same line: each `:` or `=` followed by a
# value long enough to be a credential, then the key before it read backwards and checked whole by
# _KEY (its last word names a credential). Anchoring on the sign is 4 times as fast as searching
# for the key words case-insensitively at every position.
_ASSIGNED = re.compile(r"""[:=][ \t]*(?:"([^"\s]{8,})"|'([^'\s]{8,})'|([^\s"'`,;<>]{8,}))""")
_KEY = re.compile(
    r"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key|client_?secret|api_?key|apikey|access_?token"
    r"|auth_?token|private_?key|password|passwd|secret|token)$"
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_BEARER = re.compile(r"[bB][eE][aA][rR][eE][rR][ \t]+([A-Za-z0-9._~+/-]{20,}=*)")
_NOT_A_VALUE = re.compile(
    r"(?i)^(?:your|my|example|sample|dummy|fake|test|placeholder|changeme|change_me|redacted|secret|password"
    r"|token|none|null|nil|true|false|string|str|bool|int|integer|number|required|optional|default|env|foo|bar)"
)


def _key_before(text: str, sign: int) -> str | None:
    """The key that the `:` or `=` at `sign` assigns to (DB_PASSWORD, "apiKey"), when its name is a
    credential's (_KEY), else None."""
    j = sign
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    if j > 0 and text[j - 1] in "\"'":
        j -= 1
    k = j
    while k > 0 and text[k - 1] in _KEY_CHARS and j - k < 80:
        k -= 1
    key = text[k:j]
    return key if key and _KEY.search(key) else None


def _kind_of(key: str) -> str:
    k = key.lower().replace("_", "").replace("-", "")
    if "awssecret" in k or "secretaccesskey" in k:
        return "aws-secret-access-key"
    if "apikey" in k:
        return "api-key"
    if "privatekey" in k:
        return "private-key"
    if "pass" in k:
        return "password"
    if "token" in k:
        return "token"
    return "secret"


def credential_like(value: str) -> bool:
    """Whether an assigned value looks like a credential rather than a placeholder, a reference or a word."""
    if len(value) < 8 or value[0] in "$<{[(%" or "{{" in value or "${" in value:
        return False  # a reference or a template: ${TOKEN}, <your-token>, {{ .Values.token }}, %(token)s
    if value.startswith(("/", "./", "../", "~/")):
        return False  # a path: a file that holds the secret, not the secret
    if "..." in value or "\u2026" in value:  # elided: an example cut short, not a credential
        return False
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value) and not any(c.isdigit() for c in value):
        return False  # a qualified name: WriteResult.CallbackToken, os.environ
    if len(set(value)) <= 3 or _NOT_A_VALUE.match(value) or "EXAMPLE" in value.upper():
        return False
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", value):  # an environment variable's name
        return False
    if re.fullmatch(r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*\(?\)?", value) and not re.search(r"[0-9]", value):
        return False  # an identifier or a path of words: secret.name, my-token
    if re.fullmatch(r"(?:https?|file|s3)://\S*", value) or re.fullmatch(r"[0-9.:-]+", value):
        return False  # a URL (its own secrets have their own shapes), a number, a version, a time
    # random credentials mix letters and digits (20 random base-62 characters hold no digit 3 % of the
    # time); a value of letters only is a word, a name or a type far more often than a secret
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def find(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each secret's value in text (character offsets), in order, not overlapping."""
    spans: list[tuple[int, int, str]] = []
    if _QUICK.search(text):
        for kind, rx in _SHAPES:
            for m in rx.finditer(text):
                if "EXAMPLE" not in m.group(0):
                    spans.append((m.start(), m.end(), kind))
        for m in _PEM.finditer(text):
            body = m.group(3)
            if any(_PEM_BODY_LINE.search(line) for line in body.splitlines()):
                spans.append((m.start(3), m.end(3), "private-key"))
    for m in _ASSIGNED.finditer(text):
        g = 1 if m.group(1) is not None else 2 if m.group(2) is not None else 3  # "quoted", 'quoted', bare
        key = _key_before(text, m.start())
        if key and "public" not in key.lower() and credential_like(m.group(g)):
            spans.append((m.start(g), m.end(g), _kind_of(key)))
    for m in _BEARER.finditer(text):
        if credential_like(m.group(1)):
            spans.append((m.start(1), m.end(1), "bearer-token"))
    spans.sort(key=lambda s: (s[0], -s[1]))
    out: list[tuple[int, int, str]] = []
    for s in spans:
        if out and s[0] < out[-1][1]:  # inside one already kept (a token assigned to `token:`)
            continue
        out.append(s)
    return out


def mask(text: str) -> tuple[str, list[Masked]]:
    """text with every secret's value replaced by its placeholder (module docstring), and what was masked."""
    spans = find(text)
    if not spans:
        return text, []
    parts: list[str] = []
    found: list[Masked] = []
    at = 0
    line = 1
    for start, end, kind in spans:
        parts.append(text[at:start])
        line += text.count("\n", at, start)
        value = text[start:end]
        newlines = value.count("\n")
        # a multi-line value (a key's body) keeps its line breaks: one placeholder, then blank lines
        parts.append(PLACEHOLDER.format(kind) + "\n" * newlines if newlines else PLACEHOLDER.format(kind))
        found.append(Masked(kind, line))
        line += newlines
        at = end
    parts.append(text[at:])
    return "".join(parts), found


def placeholders(text: str) -> list[Masked]:
    """The placeholders already in a masked text (a stored session read back), as what was masked."""
    return [Masked(m.group(1), text.count("\n", 0, m.start()) + 1) for m in PLACEHOLDER_RE.finditer(text)]
