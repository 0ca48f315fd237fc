"""The search stage: query parsing, the legs (lexical, semantic, graph), fusion and
boosts, and the rerank step, all reading one snapshot of the store."""
