"""ingest/secrets.py and ingest/text.py: what is masked, what is left alone, and that masking and
decoding keep every line where it was (issue 35)."""

from __future__ import annotations

import pytest

from autodoc.ingest.secrets import find, mask, placeholders
from autodoc.ingest.text import decode, prepared_text
from bench.secrets import LOOKALIKES, PEM, PLANTED, planted

NOTE = f"""---
title: Deploy
token: ghp_{"a1B2" * 9}
---
# Deploy

Keys for the staging account:

    aws_access_key_id = AKIAZ7QX4M2N8P3R5T6V
    aws_secret_access_key = q8Zr3kT1vX9mW2nB7cY4pL6sD0fG5hJ1aE3uK8oI

{PEM}

The #deploy tag stays, and so does [the runbook](runbook.md).
"""


def test_every_planted_credential_is_masked_and_no_look_alike_is():
    assert planted() == ([], [])
    assert len(PLANTED) > 10 and len(LOOKALIKES) > 20


def test_masking_keeps_lines_and_says_what_and_where_never_the_value():
    masked, found = mask(NOTE)
    assert masked.count("\n") == NOTE.count("\n")
    assert [(m.kind, m.line) for m in found] == [
        ("github-token", 3),
        ("aws-access-key-id", 9),
        ("aws-secret-access-key", 10),
        ("private-key", 13),
    ]
    assert "AKIAZ7QX" not in masked and "MIIE" not in masked and "q8Zr3k" not in masked
    lines = masked.splitlines()
    assert lines[2] == "token: [redacted:github-token]" and lines[11] == "-----BEGIN RSA PRIVATE KEY-----"
    assert lines[12] == "[redacted:private-key]" and lines[13] == "" and lines[14] == "-----END RSA PRIVATE KEY-----"
    assert lines[-1] == NOTE.splitlines()[-1]  # the rest is untouched
    assert [(m.kind, m.line) for m in placeholders(masked)] == [(m.kind, m.line) for m in found]
    assert mask(masked) == (masked, [])  # masking a masked text changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "password: hunter2",  # too short to tell from a word
        "password: correcthorsebatterystaple",  # letters only: a word far more often than a secret
        "see https://example.com/?token=abc",  # a URL's own query: its value is too short
        "ghp_short",
    ],
)
def test_what_is_not_masked(text):
    assert find(text) == []


def test_prepared_text_decodes_blanks_erb_and_masks_with_problems_on_their_lines():
    data = b"# Caf\xe9 <%= title %>\n\n<% if x %>\npassword: s3cretPass9\n<% end %>\n"
    text, problems = prepared_text("page.html.md.erb", data)
    blank = " " * len("<%= title %>")
    assert text == f"# Caf\ufffd {blank}\n\n{' ' * 10}\npassword: [redacted:password]\n{' ' * 9}\n"
    assert [(p.code, p.line) for p in problems] == [("encoding", 1), ("secret", 4)]
    assert prepared_text("page.md", data, redact=False)[0].startswith("# Caf\ufffd <%= title %>")
    assert decode("\ufeff# x\n".encode("utf-32-le"))[0] == "# x\n"


def test_a_quoted_value_is_masked_whole_and_an_unusual_first_character_does_not_hide_it():
    masked, found = mask('password: "p@ss,w0rd;9x"\napi_key = !Qz8mK2vL9x\n')
    assert masked == 'password: "[redacted:password]"\napi_key = [redacted:api-key]\n'
    assert [m.kind for m in found] == ["password", "api-key"]
    assert find("token: ~/.config/tokens/deploy1.txt") == []  # a path to the secret, not the secret
