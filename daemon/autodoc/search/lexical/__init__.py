"""The lexical leg, its pure half: the query's words → FTS5 MATCH expressions (fts.py), the leg
itself (leg.py: the strict AND, the relaxed OR, coverage weights), the OR's ranking from the
postings in numpy (impact.py, with maxscore.py's bounds), FTS5's tokenizer for stems and
snippets (tokens.py), and the helper process that runs the leg beside the semantic one
(legproc.py). Its SQL half, every statement it runs, is store/lexical/.
"""
