"""The index stage: bring the store in line with the disk (job.py, a whole
workspace or given paths) and keep it there while a daemon runs (live.py)."""
