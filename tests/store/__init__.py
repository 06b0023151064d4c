"""Conformance suites of the store: one per repository family, run against every backend."""
