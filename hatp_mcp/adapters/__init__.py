"""Adapters from the journal to Python agent frameworks, one module per framework, each an optional extra
(`pip install hatp-mcp[pydantic-ai]`). An adapter only turns journaled tools into the framework's tools: every call
still runs as a step of the enclosing `async with journal.saga(...)`. May import runtime and below.

- pydantic_ai.py: `journaled_tools` for PydanticAI agents (extra `pydantic-ai`);
- openai_agents.py: `journaled_tools` as function tools for OpenAI Agents SDK agents (extra `openai-agents`);
- langchain.py: `journaled_tools` as LangChain tools for LangChain and LangGraph agents (extra `langgraph`).
"""
