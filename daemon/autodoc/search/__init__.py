"""Stage 5: query parsing, the retrieval legs, fusion and boosts."""
