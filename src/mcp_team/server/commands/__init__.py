"""The `mcp-team` commands, one module per command group.

Each module has `add_parsers(sub)`, which adds its subcommand(s) and sets `handler` to the function
that runs one; `mcp_team.server.cli` lists the modules. A new command is a new module plus one entry
in that list. Every command module is imported to build the parser, `serve`'s start-up path included,
so module level imports stay light (argparse and the standard library); the rest is imported by
the handler that needs it.
"""
