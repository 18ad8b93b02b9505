"""MCP as a door: server/ offers our own operations to other agents over MCP, beside the command line and the session.
The other way, the user's MCP servers as tools for the model, is a part of a run and lives below the workspace, in
tools/mcp/ (config.py, trust.py, connections.py)."""
