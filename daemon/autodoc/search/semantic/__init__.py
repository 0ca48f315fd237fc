"""The semantic leg: which model serves and its run (leg.py), the per-workspace vectors a
search scans, kept up to date with the store (vector_cache.py), the vector index and its
1-bit prefilter (vectors.py), and the float16 → float32 conversion of its shortlist (halfcast.py).
Its SQL is store/vectors.py; a reader process maps the daemon's bases (readers/shared_vectors.py).
"""
