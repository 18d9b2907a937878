"""opsuite_common."""
