"""The agent loop engine (model client, tools, governance), the lead agent, sessions, the CLI and
the HTTP server."""
