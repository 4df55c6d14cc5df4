"""Evidence: RFC 8785 canonical JSON and digests, Ed25519 keys and keyrings, signing and verifying
objects as received. The lowest part: imports nothing else of hatp_mcp but hatp_mcp.errors (model only for types).
"""
