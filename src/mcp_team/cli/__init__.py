"""The `mcp-team` command: the parser and `main` (`main.py`), and one module per command or command group.

Settings are read here, at the edge (flags, environment, the team file), and passed down as objects."""
