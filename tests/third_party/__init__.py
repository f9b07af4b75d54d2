"""Test suites of other projects, vendored unmodified and run against Brook (each with its LICENSE)."""
