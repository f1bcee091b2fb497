"""Where a run can be watched: the run view (`ui/`) as an MCP App and as pages of the HTTP server (`run_view`)."""
