"""Secrets masked before indexing (issue 35): how many masks fire on the five real corpora (each is
a false positive unless a real credential was published there, so each is listed to check by eye),
recall on planted credentials and silence on planted look-alikes, and what masking costs beside
parsing.

    python -m bench.quality secrets              # writes docs/benchmarks/secrets.md
    python -m bench.quality secrets --out -      # printed only

Every Markdown file of ``../shared/data/corpora`` is read as the index job reads it
(ingest/text.py: decoded, bad bytes replaced) and handed to ingest/secrets.py; a fire is listed
with its file, line, kind and the line with the value already masked (never the value itself).

Runs on: the benchmark's main thread.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from autodoc.index.prepare import prepare
from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.secrets import find, mask
from autodoc.ingest.text import decode

from .common import DEFAULT_DATA, RESULTS, command_line, git_commit, log, replace_section

CORPORA = ("opentelemetry-docs", "swift-evolution", "foam-docs", "simpler-grants-adr", "jekyll")
MARKDOWN = (".md", ".markdown")
# Credentials of the documented shapes, made up here (none is real): each must be masked.
PLANTED = [
    ("aws-access-key-id", "aws_access_key_id = AKIAZ7QX4M2N8P3R5T6V"),
    ("aws-secret-access-key", "aws_secret_access_key = q8Zr3kT1vX9mW2nB7cY4pL6sD0fG5hJ1aE3uK8oI"),
    ("github-token", "git clone https://ghp_R4nd0mT0k3nW1thTh1rtySixCh4r4ct3rs00@github.com/x/y"),
    ("github-token", "GH_TOKEN: gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("github-token", "github_pat_11AB2CD3E0fGhIjKlMnOpQ_rStUvWxYz0123456789abcdefGhIjKlMnOpQrStUvW"),
    ("slack-token", "SLACK_BOT_TOKEN=xoxb-2345678901-3456789012345-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack-webhook", "post to https://hooks.slack.com/services/T0A1B2C3D/B4E5F6G7H/abcdefghijklmnopqrstuvwx"),
    (
        "jwt",
        "Authorization: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36",
    ),
    ("bearer-token", "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc'"),
    ("password", "password: Tr0ub4dor&3x"),
    ("password", 'DB_PASSWORD="s3cr3t-P4ssw0rd"'),
    ("token", "token = 7d1c3e9a0b5f4e2d8c6a"),
    ("api-key", '"apiKey": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"'),
    ("secret", "client_secret: 8c2f1e9d7b3a5c4e6f8a0b2d4c6e8f1a"),
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx9s8Kf3lq0ZyQ2Vb7nWm4tR1pE6hJ8uY0iO3aS5dF7gH9jK2\nlZ4xC6vB8nM1qW3eR5tY7uI9oP2aS4dF6gH8jK0lZ1xC3vB5nM7qW9eR1tY3uI5\n-----END RSA PRIVATE KEY-----"
# Things documentation writes that look like credentials but are not: none may fire.
LOOKALIKES = [
    "password: <your-password>",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "api_key: YOUR_API_KEY",
    "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "password: changeme",
    "password: ********",
    "token: xxxxxxxxxxxxxxxx",
    "secret: {{ .Values.secretName }}",
    "max_tokens: 4096",
    "token_count: 12",
    "PublicKeyToken=b77a5c561934e089",
    "func cancel(token: WriteResult.CallbackToken)",
    "Authorization: Bearer <token>",
    "Authorization=Bearer Z2hwX0l4Y29QOWhr....ScQo=",
    "password: process.env.DB_PASSWORD",
    "secretKeyRef:",
    "the token: a short-lived credential",
    "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "id: 123e4567-e89b-12d3-a456-426614174000",
]


def corpus_fires(root: Path) -> tuple[int, int, float, float, list[tuple[str, int, str, str]]]:
    """(files, bytes, seconds masking, seconds parsing, [(path, line, kind, masked line)])."""
    files = size = 0
    t_mask = t_parse = 0.0
    fires: list[tuple[str, int, str, str]] = []
    for f in sorted(root.rglob("*")):
        if f.suffix.lower() not in MARKDOWN or not f.is_file() or any(p.startswith(".") for p in f.parts):
            continue
        data = f.read_bytes()
        text = decode(data)[0]
        files += 1
        size += len(data)
        t0 = time.perf_counter()
        masked, found = mask(text)
        t_mask += time.perf_counter() - t0
        t0 = time.perf_counter()
        parse_markdown(text)
        t_parse += time.perf_counter() - t0
        lines = masked.splitlines()
        for m in found:
            fires.append((str(f.relative_to(root)), m.line, m.kind, lines[m.line - 1].strip()[:120]))
    return files, size, t_mask, t_parse, fires


def prepare_cost(data: Path, rounds: int = 3) -> tuple[int, float, float]:
    """(files, seconds, seconds): the index job's prepare step (decode, mask, parse, chunk; no token
    counter) over every corpus file with redact_secrets off and on, the least CPU time of `rounds`
    interleaved rounds."""
    files = [
        (str(f), f.read_bytes())
        for name in CORPORA
        for f in sorted((data / "corpora" / name).rglob("*"))
        if f.suffix.lower() in MARKDOWN and f.is_file() and not any(p.startswith(".") for p in f.parts)
    ]
    best = {False: float("inf"), True: float("inf")}
    for _ in range(rounds):
        for redact in (False, True):
            t0 = time.process_time()
            for rel, raw in files:
                prepare(rel, raw, 350, True, None, redact)
            best[redact] = min(best[redact], time.process_time() - t0)
    return len(files), best[False], best[True]


def planted() -> tuple[list[str], list[str]]:
    """(planted credentials missed, look-alikes that fired)."""
    missed = [line for kind, line in PLANTED if [k for _, _, k in find(line)] != [kind]]
    if [k for _, _, k in find(PEM)] != ["private-key"]:
        missed.append("a PEM RSA private key block")
    fired = [line for line in LOOKALIKES if find(line)]
    return missed, fired


def report(data: Path) -> str:
    rows, listed = [], []
    total = Counter()
    for name in CORPORA:
        files, size, t_mask, t_parse, fires = corpus_fires(data / "corpora" / name)
        kinds = Counter(k for _, _, k, _ in fires)
        total.update(kinds)
        rows.append(
            f"| {name} | {files} | {size / 1e6:.1f} | {len(fires)} | "
            f"{', '.join(f'{k} {n}' for k, n in kinds.most_common()) or '–'} | "
            f"{t_mask * 1000:.0f} | {t_parse * 1000:.0f} | {100 * t_mask / t_parse:.1f} % |"
        )
        listed += [f"| {name}/{p}:{line} | {k} | `{text}` |" for p, line, k, text in fires]
        log(f"{name}: {len(fires)} masks in {files} files")
    missed, fired = planted()
    n_files, off, on = prepare_cost(data)
    out = [
        f"Commit `{git_commit()}`; `{command_line()}`.",
        "",
        "| corpus | files | MB | masks | by kind | mask ms | parse ms | mask / parse |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
        *rows,
        "",
        f"Masks on the five corpora: **{sum(total.values())}**"
        + (" (each listed below, to check by eye)." if total else "."),
        "",
    ]
    if listed:
        out += ["| where | kind | the line, masked |", "|---|---|---|", *listed, ""]
    out += [
        f"Planted credentials ({len(PLANTED) + 1}, of {len({k for k, _ in PLANTED}) + 1} kinds): "
        f"**{len(PLANTED) + 1 - len(missed)} masked**" + (f"; missed: {missed}" if missed else "") + ".",
        f"Planted look-alikes ({len(LOOKALIKES)}): **{len(fired)} fired**" + (f": {fired}" if fired else "") + ".",
        "",
        f"The index job's prepare step (decode, mask, parse, chunk) on the {n_files} files, CPU seconds, least of "
        f"3 interleaved rounds: redact_secrets off **{off:.2f} s**, on **{on:.2f} s** "
        f"(**+{100 * (on - off) / off:.1f} %**).",
    ]
    return "\n".join(out)


def main_secrets(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality secrets", description=__doc__)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", default=str(RESULTS / "secrets.md"), help="the report file, or - to print it")
    args = ap.parse_args(argv)
    text = report(args.data)
    if args.out == "-":
        print(text)
    else:
        replace_section(Path(args.out), "secrets", text)
        log(f"wrote {args.out}")
    return 0
