"""Settings with a PostgreSQL store (issue 34): `--store` and `AUTODOC_STORE` take a connection string
in every form libpq does and keep it whole (the store is opened with it), while everything that shows
the store (store_named, repr, the lease's file name, the daemon's log) shows it without the password;
a path stays a resolved Path. And what a failed connection says (store/pg/reach.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.config.pguri import passwords, scrub
from autodoc.config.settings import lease_file
from autodoc.store.pg.reach import fix_for

SECRET = "s3cr3t-Pw"
FORMS = [
    f"postgresql://kb:{SECRET}@db.example.com:5433/autodoc",
    f"postgres://kb:{SECRET}@db/autodoc?sslmode=require",
    f"postgresql://kb@db/autodoc?password={SECRET}&application_name=x",
    f"host=db dbname=autodoc user=kb password={SECRET}",
    f"host=db dbname=autodoc password='{SECRET} with space'",
]


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.delenv("AUTODOC_STORE", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return monkeypatch


@pytest.mark.parametrize("target", [*FORMS, "service=team"])
@pytest.mark.parametrize("how", ["--store", "AUTODOC_STORE"])
def test_a_connection_string_is_kept_whole_and_shown_without_its_password(env, target, how):
    if how == "--store":
        s = Settings.from_env(store=target)
    else:
        env.setenv("AUTODOC_STORE", target)
        s = Settings.from_env()
    assert s.store == target and s.postgres and s.store_from == how
    for shown in (s.store_shown, s.store_named(), repr(s), str(s.lease), str(s.daemon_log)):
        assert SECRET not in shown, shown
    assert s.store_named().startswith(s.store_shown)
    assert s.lease.parent == Path(env_dir := s.lease.parent) and env_dir.name == "autodoc"
    if "service=" not in target:
        assert "***" in s.store_shown


def test_a_path_stays_a_resolved_path(env, tmp_path):
    env.chdir(tmp_path)
    s = Settings.from_env(store="kb.db")
    assert s.store == tmp_path / "kb.db" and not s.postgres
    assert s.lease == tmp_path / "kb.db.lease" and s.daemon_log == tmp_path / "kb.db.daemon.log"
    # a file name with `=` in it is still a file: only libpq's keywords start a key/value string
    assert Settings.from_env(store="a=b.db").store == tmp_path / "a=b.db"


def test_one_lease_per_database_and_role_whatever_the_password(env):
    a = lease_file("postgresql://kb:one@db/autodoc")
    assert a == lease_file("postgresql://kb:two@db/autodoc")  # same database, same role: one daemon here
    assert a != lease_file("postgresql://reader:one@db/autodoc")  # a reader role's daemon is another
    assert a != lease_file("postgresql://kb:one@db/other")


@pytest.mark.parametrize("target", FORMS)
def test_scrub_hides_the_password_wherever_a_message_repeats_it(target):
    password = SECRET + " with space" if "space" in target else SECRET
    assert password in passwords(target)
    text = f"could not connect with {target}: the password {password} was refused"
    assert scrub(text, target).count("***") == 2 and password not in scrub(text, target)


def test_a_percent_encoded_password_is_hidden_decoded_too():
    target = "postgresql://kb:p%40ss%2Fw0rd@db/autodoc"
    assert "p@ss/w0rd" not in scrub("auth failed for p@ss/w0rd and p%40ss%2Fw0rd", target)


@pytest.mark.parametrize(
    "cause, fix",
    [
        (
            'connection to server on socket "/tmp/x/.s.PGSQL.5432" failed: No such file or directory '
            "Is the server running locally and accepting connections on that socket?",
            "start PostgreSQL",
        ),
        ('connection to server at "127.0.0.1", port 1 failed: Connection refused', "start PostgreSQL"),
        ("failed to resolve host 'nohost.invalid': [Errno -2] Name or service not known", "host name"),
        ('FATAL:  database "nodb" does not exist', "createdb"),
        ('FATAL:  role "nobody" does not exist', "create the role"),
        ('FATAL:  password authentication failed for user "kb"', "PGPASSWORD"),
        ('invalid connection option "foo"', "correct the connection string"),
    ],
)
def test_each_failure_to_connect_says_what_to_fix(cause, fix):
    assert fix in fix_for(cause)


def test_a_database_workspace_path_is_checked_by_its_text_alone(tmp_path):
    # the root is the indexer's folder: nothing here is resolved, not even a symlink of the same name
    from autodoc.documents import stored_relpath
    from autodoc.errors import PathOutsideWorkspace

    (tmp_path / "link").symlink_to("/etc")
    root = str(tmp_path)
    assert stored_relpath(root, "adr/./0001.md") == "adr/0001.md"
    assert stored_relpath(root, f"{root}/adr/0001.md") == "adr/0001.md"
    assert stored_relpath(root, "link/passwd") == "link/passwd"  # a stored path, not this machine's /etc
    for bad in ("../x.md", "adr/../../x.md", "/etc/passwd"):
        with pytest.raises(PathOutsideWorkspace):
            stored_relpath(root, bad)
