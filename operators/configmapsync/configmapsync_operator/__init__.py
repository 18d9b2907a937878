"""configmapsync_operator."""
