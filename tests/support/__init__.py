"""What the tests share besides fixtures: paths, stack helpers, the headless browser, the Pulumi mocks, the training
group, the unprivileged runner and polling. Fixtures and hooks stay in tests/conftest.py (docs/testing.md)."""
