"""MCP both ways, a room each. client/: the user's MCP servers as tools for the model — where they are configured
(config.py: the repository's `.mcp.json` and the user's own `mcp.json`), which a person approved (trust.py: a
repository's servers start only once approved), and the connections to them through the official `mcp` SDK
(connections.py: stdio and streamable HTTP, their tools as `server__tool`). server/: our own operations offered to
other agents over MCP, a door beside the command line and the session."""
