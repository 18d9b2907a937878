"""On-demand benchmarks for opsuite operators, run against the local control plane.

Each benchmark measures an operator and a reference (a built-in controller) in the same run and
reports ratios, so figures from a busy or slow machine still compare like with like. Timed
performance targets live here, not in the test suite. ``python -m bench`` runs them.
"""
