"""The test suite, a package so that its shared code is imported as `tests.support.X` (docs/testing.md)."""
