"""The web binding: the inbox a person uses in their browser (inbox.py, pages.py; questions.py draws the controls of
choose / form / text asks; timeline.py the sequence diagram of a finished record, record_shelf.py where the inbox
finds those records), served by the gateway process.
Beside hatp_mcp.mcp in the layers: may import runtime, store and the core; the core knows nothing of it."""
