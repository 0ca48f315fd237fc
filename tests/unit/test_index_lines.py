"""What `autodoc index` says about search by meaning when a daemon runs (trial 5): the line read
`adr: search by meaning covers 0 chunks; 1160 more to embed (1160 chunks wait for vectors)`, which
left a new user asking who embeds them and whether to do something; it names the command that
follows the daemon's fill, with its ETA."""

from __future__ import annotations

from autodoc.indexcli import _embedding_line


def test_a_daemons_fill_names_the_command_that_follows_it():
    emb = {"available": True, "embedded": 0, "skipped": 1160, "reason": "1160 chunks wait for vectors"}
    line = _embedding_line("adr", emb, here=False, seconds=0.0)
    assert line == (
        "adr: search by meaning covers 0 chunks; 1160 more to embed (1160 chunks wait for vectors); "
        "follow it: autodoc workspace status adr"
    )
    assert _embedding_line("adr", {**emb, "embedded": 1160, "skipped": 0}, here=False, seconds=0.0) == (
        "adr: search by meaning covers all 1160 chunks"
    )
    # in this process (--wait) it embedded before answering: nothing to follow
    here = _embedding_line("adr", {**emb, "embedded": 1160, "skipped": 0}, here=True, seconds=2.0)
    assert here == "adr: 1160 chunks embedded in 2.0 s"
