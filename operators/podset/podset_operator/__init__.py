"""podset_operator."""
