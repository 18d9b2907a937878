"""poddebugger_operator."""
