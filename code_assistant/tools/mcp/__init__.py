"""The user's MCP servers, as tools for the model: configured (config.py), approved (trust.py), connected
(connections.py)."""
