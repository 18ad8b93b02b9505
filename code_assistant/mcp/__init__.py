"""The user's MCP servers, as tools for the model: where they are configured (config.py: the repository's `.mcp.json`
and the user's own `mcp.json`), which a person approved (trust.py: a repository's servers start only once approved),
and the connections to them through the official `mcp` SDK (connections.py: stdio and streamable HTTP, their tools
as `server__tool`). Our own operations offered to other agents over MCP are a door of their own (serve/)."""
