"""The stores on PostgreSQL (psycopg 3 with psycopg_pool): one database shared by several processes and machines.

Each module serves the interface of its namesake in hatp_mcp.store with the same guarantees (a call returns only
once what it wrote is committed; commits are durable: the server's fsync and synchronous_commit stay on). It
may import psycopg; nothing else in hatp_mcp does, so SQLite installs need none of it.
"""
