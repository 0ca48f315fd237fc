"""The search stage, all reading one snapshot of the store. engine.py runs a search as named
stages (plan_search → run_legs → fuse → rerank → shape_answer, their state in stages.py, the
answer built in shape.py): the query parsed (query.py, options.py), the legs (lexical/ and
semantic/, each a subpackage; graph.py), fusion and boosts (fusion.py, ties.py), the ranker
(rerank.py) and the snippets (snippet.py); compact.py shapes the answer a caller asked for.
"""
