"""Build-time generators: CRDs from the pydantic models, Helm charts, OLM bundles, and the
check that generated files are fresh. Used by hack/ (make manifests, make bundle) and the tests;
never in an image."""
