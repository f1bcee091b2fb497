"""The MCP surface of a team: its tools (`tools`, `run_tools`, `checkpoint_tools`), prompts, resources, the text of
tool results, exact answers to a client's mistakes (`strict`), what a client may ask (`limits`), progress and log
messages to the client."""
