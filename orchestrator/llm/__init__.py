"""The model side: the streaming chat client over the ``openai`` package, the scripted
OpenAI-compatible server used by tests and the offline model."""
