"""Signing: RFC 8785 canonical JSON and digests, Ed25519 keys and keyrings, signing and verifying
objects as received. The lowest part: imports nothing else of hatp_mcp but hatp_mcp.errors.

- canonical.py: RFC 8785 canonical JSON, and the sha256 digests built on it; compiled (mypyc, setup.py);
- keys.py: Ed25519 keys as JWKs, keyrings (each key's roles and party), signing and verifying objects;
- models.py: signing and verifying wire models, always over the object as it was received.
"""
