"""The PostgreSQL store (issue 34; docs/dev/postgres.md): a store shared by many daemons.

Groundwork only: nothing outside this package imports it yet, and the SQLite store stays the
default. Importing the package loads no database driver.

Runs on: any thread (its modules say more).
"""
