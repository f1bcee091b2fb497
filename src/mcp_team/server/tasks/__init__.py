"""MCP Tasks for `run_team` on both protocol revisions: the request handlers (`handlers`), the runs behind them
(`runs`) and a run as a task on the wire (`wire`)."""
