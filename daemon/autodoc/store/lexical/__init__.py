"""The lexical leg, its SQL half: FTS5's text preparation (ftstext.py) and term statistics
(ftsterms.py), the MATCH queries the leg runs (matches.py), and the postings index beside
chunks_fts, written with the chunks (postings.py) and read for a search (postread.py).
Its pure half, which calls these, is search/lexical/.
"""
