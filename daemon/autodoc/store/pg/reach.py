"""Why a PostgreSQL store could not be reached, said once for every entry point: the daemon at start,
each command, `autodoc doctor`.

`cause_of(target, exc)` is a driver's failure to connect on one line, scrubbed of the password
(config/pguri.py `scrub`); `fix_for(cause)` says what to do about it. The store raises
StoreUnreachable naming the store without its password, the cause and the fix (store/pg/store.py);
the CLI prints it and exits 1, the daemon likewise; `autodoc doctor` connects itself and says both.

Pure string work: the driver's exception is only read (its text), so this module imports no driver.

Runs on: any thread.
"""

from __future__ import annotations

from ...config.pguri import scrub

# (words that all appear in libpq's message, what to do): the first match wins; libpq's own wording
_AUTH = "check the user and its password: in the connection string, PGPASSWORD, or ~/.pgpass (mode 0600)"
_DOWN = "start PostgreSQL there, or correct the host, port or socket folder in the connection string"
_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("password authentication failed",), _AUTH),
    (("no password supplied",), _AUTH),
    (("authentication failed",), _AUTH),
    (("database", "does not exist"), "create the database (createdb NAME), or name one that exists"),
    (("role", "does not exist"), "create the role (README, For a team: the roles and their grants), or name another"),
    (("no pg_hba.conf entry",), "the server refuses this host, user or database: a pg_hba.conf line must allow it"),
    (("resolve host",), "correct the host name in the connection string"),
    (("translate host name",), "correct the host name in the connection string"),
    (("timeout expired",), "the server did not answer in time: check the host, the port and any firewall"),
    (("no such file or directory",), _DOWN),
    (("connection refused",), _DOWN),
    (("ssl",), "check the connection string's sslmode and certificate settings"),
    (("invalid",), "correct the connection string (libpq's keywords and URI form)"),
)


def fix_for(cause: str) -> str:
    """What to do about a failure to connect, from the driver's message."""
    low = cause.lower()
    for words, fix in _FIXES:
        if all(w in low for w in words):
            return fix
    return "check that PostgreSQL runs and that the connection string names it (autodoc doctor says more)"


def cause_of(target: str, exc: BaseException) -> str:
    """The driver's message on one line, without the password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for prefix in ("connection failed: ", "connection is bad: "):
        text = text.removeprefix(prefix)
    return scrub(text, target)
