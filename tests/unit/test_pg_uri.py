"""config/pguri.py: which targets are PostgreSQL connection strings, and that no form of one
shows its password once redacted (issue 34: credentials never logged or echoed)."""

from __future__ import annotations

import pytest

from autodoc.config.pguri import MASK, is_postgres, redact


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://kb@db.example.com/autodoc",
        "postgres://db/autodoc",
        "PostgreSQL://db/autodoc",
        "postgresql:///autodoc?host=/var/run/postgresql",
        "service=team",
        "  host=db dbname=autodoc",
        "dbname = autodoc",
        "postgresql://h1:5432,h2:5433/autodoc?target_session_attrs=read-write",
    ],
)
def test_connection_strings_are_postgres(target):
    assert is_postgres(target)


@pytest.mark.parametrize(
    "target",
    [
        "/home/me/.local/share/autodoc/autodoc.db",
        "autodoc.db",
        "./a=b.db",  # a path with = in it, but no libpq keyword before it
        "store=1.db",
        "postgresql.db",
        "~/postgres/autodoc.db",
        "",
    ],
)
def test_paths_are_not_postgres_and_are_shown_unchanged(target):
    assert not is_postgres(target)
    assert redact(target) == target


@pytest.mark.parametrize(
    ("target", "secret", "shown"),
    [
        ("postgresql://kb:s3cret@db:5432/autodoc", "s3cret", f"postgresql://kb:{MASK}@db:5432/autodoc"),
        ("postgres://kb:p%40ss@db/autodoc", "p%40ss", f"postgres://kb:{MASK}@db/autodoc"),
        # typed raw, not percent-encoded: @ / ? # inside the password
        ("postgresql://kb:a@b/c?d#e@db/autodoc", "a@b/c?d#e", f"postgresql://kb:{MASK}@db/autodoc"),
        ("postgresql://kb:x?y@db/autodoc?sslmode=require", "x?y", f"postgresql://kb:{MASK}@db/autodoc?sslmode=require"),
        (
            "postgresql://db/autodoc?user=kb&password=hunter2&sslmode=require",
            "hunter2",
            f"postgresql://db/autodoc?user=kb&password={MASK}&sslmode=require",
        ),
        (
            "postgresql://kb:one@db/autodoc?sslpassword=two",
            "two",
            f"postgresql://kb:{MASK}@db/autodoc?sslpassword={MASK}",
        ),
        # an @ in a query parameter: more is hidden than the password, never less
        ("postgresql://kb:pw@db/autodoc?application_name=a@b", "pw", f"postgresql://kb:{MASK}@b"),
        ("host=db password=hunter2 dbname=autodoc", "hunter2", f"host=db password={MASK} dbname=autodoc"),
        ("host=db password = 'it\\'s a \\\\ secret' dbname=kb", "secret", f"host=db password = {MASK} dbname=kb"),
        ("host=db PASSWORD=Hunter2", "Hunter2", f"host=db PASSWORD={MASK}"),
        ("service=team password=x1", "x1", f"service=team password={MASK}"),
    ],
)
def test_redact_hides_every_password(target, secret, shown):
    out = redact(target)
    assert out == shown
    assert secret not in out


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://kb@db/autodoc",
        "postgresql://db/autodoc?application_name=a@b",
        "service=team",
        "host=db dbname=autodoc user=kb",
        "postgresql://h1:5432,h2:5433/autodoc",
    ],
)
def test_redact_leaves_a_target_without_password_unchanged(target):
    assert redact(target) == target


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://kb:s3cret@db:5432/autodoc",
        "postgresql://kb:p%40ss%2Fw@db/autodoc",
        "postgresql://db/autodoc?user=kb&password=hunter2",
        "host=db password=hunter2 dbname=autodoc",
        "host=db password = 'it\\'s a \\\\ secret' dbname=kb",
    ],
)
def test_redact_hides_the_password_libpq_reads(target):
    """The password libpq itself parses out of the string (psycopg's parser) is not in the redacted
    form, whole or percent-decoded, and the rest still parses to the same keys."""
    conninfo = pytest.importorskip("psycopg.conninfo", reason="psycopg is not installed")
    params = conninfo.conninfo_to_dict(target)
    out = redact(target)
    assert params["password"] and params["password"] not in out
    assert {k: v for k, v in conninfo.conninfo_to_dict(out).items() if k != "password"} == {
        k: v for k, v in params.items() if k != "password"
    }
