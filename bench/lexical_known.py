"""The known-item questions through the lexical leg alone, on stores built without a model (issue 35:
file-name words and the fuzzy fallback are lexical changes): every corpus indexed in minutes,
no embedding, so all five corpora and every question set are measured where bench/known_item.py
(hybrid, a fully embedded store per corpus) cannot finish in a session's time.

For each question: a lexical search (limit 30) in its corpus's workspace; the target's rank is
the place of its document among the distinct documents of the hits (1-based). Reported: R@1, R@3,
R@10 and MRR@10 per question file and style, and how many answers said each `lexical_match`.

    python -m bench.lexical_known --cache /tmp/lexknown [--questions a.jsonl b.jsonl] [--out FILE]

The stores are rebuilt when the code's schema differs (a store is one code state's).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from .common import DEFAULT_DATA, REPO, git_commit, log

SETS = [REPO / "bench" / "known_items" / "questions.jsonl", REPO / "bench" / "known_items" / "typos.jsonl"]


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "n": len(ranks),
        "R@1": sum(1 for r in ranks if r and r <= 1) / n,
        "R@3": sum(1 for r in ranks if r and r <= 3) / n,
        "R@10": sum(1 for r in ranks if r and r <= 10) / n,
        "MRR": sum(1 / r for r in ranks if r and r <= 10) / n,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lexical_known", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=DEFAULT_DATA / "corpora")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--questions", type=Path, nargs="*", default=SETS)
    ap.add_argument("--out", default="-")
    args = ap.parse_args(argv)

    from autodoc.config import Settings
    from autodoc.service import Service

    qs = [(p.name, json.loads(line)) for p in args.questions for line in p.read_text().splitlines() if line.strip()]
    corpora = sorted({q["corpus"] for _, q in qs})
    args.cache.mkdir(parents=True, exist_ok=True)
    svc = Service(Settings.from_env(store=args.cache / "lexical.db"))
    ranks: dict[str, list[int | None]] = defaultdict(list)
    matches: dict[str, Counter] = defaultdict(Counter)
    rows = []
    try:
        have = set(svc.workspaces())
        for c in corpora:
            if c not in have:
                svc.workspace_add(c, str(args.corpora / c), {"embedding": {"provider": "none"}})
            rep = svc.index(c)
            log(f"{c}: {rep.get('chunks')} chunks")
        for name, q in qs:
            a = svc.search(q["corpus"], q["query"], {"mode": "lexical", "limit": 30})
            docs = list(dict.fromkeys(h["path"] for h in a["hits"]))
            targets = q.get("targets") or [q["target"]]
            rank = next((i + 1 for i, d in enumerate(docs) if d in targets), None)
            for key in (name, f"{name} · {q['style']}"):
                ranks[key].append(rank)
                matches[key][str(a["lexical_match"])] += 1
            rows.append((q["id"], q["style"], q["query"], rank, a["lexical_match"], a.get("corrections")))
    finally:
        svc.close()
    out = [f"Lexical leg alone, limit 30, code {git_commit()}", ""]
    out += ["| set | n | R@1 | R@3 | R@10 | MRR@10 | lexical_match |", "|---|---:|---:|---:|---:|---:|---|"]
    for key in sorted(ranks):
        m = _metrics(ranks[key])
        said = ", ".join(f"{k} {v}" for k, v in sorted(matches[key].items()))
        out.append(
            f"| {key} | {m['n']} | {m['R@1']:.3f} | {m['R@3']:.3f} | {m['R@10']:.3f} | {m['MRR']:.3f} | {said} |"
        )
    out += ["", "| id | style | query | rank | lexical_match | corrections |", "|---|---|---|---:|---|---|"]
    out += [
        f"| {i} | {s} | {q} | {r or '—'} | {m} | {c or ''} |"
        for i, s, q, r, m, c in rows
        if i[:4] in ("typo", "name") or c
    ]
    text = "\n".join(out) + "\n"
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
