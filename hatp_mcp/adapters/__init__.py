"""Adapters from the journal to Python agent frameworks, one module per framework, each an optional extra
(`pip install hatp-mcp[pydantic-ai]`). An adapter only turns journaled tools into the framework's tools: every call
still runs as a step of the enclosing `async with journal.saga(...)`. May import runtime and below."""
