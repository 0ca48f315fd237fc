"""Telling a PostgreSQL connection string from a store path, and showing it without its password.

Wherever a store path is accepted a PostgreSQL target will be too (docs/dev/postgres.md, section 7):
a libpq URI (`postgresql://…`, `postgres://…`), a libpq key/value string (`host=db dbname=kb`), or
a service name (`service=team`, from pg_service.conf). Anything else is a store path.

Every message, log line, error or answer that names a target shows `redact(target)`: the password
(in the URI's userinfo, a `password=` query parameter, or a `password=` key) becomes `***`. A password
typed raw (not percent-encoded) with `@`, `/`, `?` or `#` in it is hidden too: where the string is
ambiguous this hides more rather than less.

Pure string work: no driver is imported (the CLI calls `is_postgres` before it loads anything).

Runs on: any thread.
"""

from __future__ import annotations

import re

SCHEMES = ("postgresql://", "postgres://")
MASK = "***"

# libpq's connection keywords (libpq's "Parameter Key Words"): a key/value string starts with one.
# A fixed list, so that a store path such as `./a=b.db` is not taken for a connection string.
KEYWORDS = frozenset(
    """host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
    sslnegotiation sslcompression sslcert sslkey sslcertmode sslpassword sslrootcert sslcrl sslcrldir
    sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
    service target_session_attrs load_balance_hosts""".split()
)

_KEY = re.compile(r"\s*([A-Za-z_]+)\s*=")
# a key/value string's password: quoted ('…', with \' and \\ escapes) or up to the next space
_KV_PASSWORD = re.compile(r"(?<![A-Za-z_])((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)", re.IGNORECASE)
# a URI's password parameter, up to the next & or #
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)


def is_postgres(target: str) -> bool:
    """Whether `target` names a PostgreSQL database rather than a store path."""
    text = target.strip()
    if text.lower().startswith(SCHEMES):
        return True
    m = _KEY.match(text)
    return m is not None and m.group(1).lower() in KEYWORDS


def redact(target: str) -> str:
    """`target` as it may be shown: a connection string without its password; a path unchanged."""
    if not is_postgres(target):
        return target
    text = target.strip()
    if not text.lower().startswith(SCHEMES):
        return _KV_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    scheme_end = text.index("://") + 3
    rest = text[scheme_end:]
    # the userinfo ends at an @; a password typed raw may hold @ / ? # itself, so the last @ of the
    # whole string is taken (an @ in a query parameter then hides more than the password: never less)
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        colon = userinfo.find(":")
        if colon >= 0:
            rest = userinfo[: colon + 1] + MASK + rest[at:]
    return text[:scheme_end] + _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, rest)


def passwords(target: str) -> list[str]:
    """The password(s) `target` spells out, as typed and as decoded (percent-escapes, key/value
    quoting): what `scrub` hides wherever it turns up. Empty for a path or a string without one."""
    from urllib.parse import unquote

    if not is_postgres(target):
        return []
    text = target.strip()
    found: list[str] = []
    if text.lower().startswith(SCHEMES):
        rest = text[text.index("://") + 3 :]
        at = rest.rfind("@")
        colon = rest.find(":", 0, at) if at >= 0 else -1
        if colon >= 0:
            found.append(rest[colon + 1 : at])
        found += [m.group(0).split("=", 1)[1] for m in _QUERY_PASSWORD.finditer(rest)]
    else:
        for m in _KV_PASSWORD.finditer(text):
            raw = m.group(2)
            found.append(raw)
            if raw.startswith("'"):
                found.append(re.sub(r"\\(.)", r"\1", raw.strip("'")))
    found += [unquote(p) for p in found]
    return sorted({p for p in found if p}, key=len, reverse=True)


def scrub(text: str, target: str) -> str:
    """`text` (a driver's error, a log line) with `target` and every password it holds masked."""
    text = text.replace(target, redact(target)) if target else text
    for pw in passwords(target):
        text = text.replace(pw, MASK)
    return text
