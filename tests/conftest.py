"""Shared test configuration: pytester, for the tests of the pytest plugin itself."""

pytest_plugins = ["pytester"]
