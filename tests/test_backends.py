"""The lists in tests/conftest.py that send a test to both database backends name tests that exist: a renamed
test would otherwise drop to SQLite alone without anyone noticing."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import BOTH_BACKENDS_MODULES, BOTH_BACKENDS_TESTS, _backends_of


@pytest.mark.parametrize("name", sorted(BOTH_BACKENDS_TESTS))
def test_every_test_named_for_both_backends_exists_and_takes_a_database(name):
    module, test = name.split("::")
    function = getattr(importlib.import_module(f"tests.{module}"), test, None)
    assert function is not None, f"{name} is not a test any more"
    assert _backends_of(module, test, marked=False) == ["sqlite", "postgresql"]


@pytest.mark.parametrize("module", sorted(BOTH_BACKENDS_MODULES))
def test_every_module_named_for_both_backends_exists(module):
    importlib.import_module(f"tests.{module}")


def test_the_environment_overrides_the_rule(monkeypatch):
    monkeypatch.setenv("TURKFLOW_TEST_BACKENDS", "all")
    assert _backends_of("test_text_rule", "test_x", marked=False) == ["sqlite", "postgresql"]
    monkeypatch.setenv("TURKFLOW_TEST_BACKENDS", "sqlite")
    assert _backends_of("test_db", "test_x", marked=True) == ["sqlite"]
    monkeypatch.delenv("TURKFLOW_TEST_BACKENDS")
    assert _backends_of("test_text_rule", "test_x", marked=False) == ["sqlite"]
    assert _backends_of("test_text_rule", "test_x", marked=True) == ["sqlite", "postgresql"]
    monkeypatch.setenv("TURKFLOW_TEST_BACKENDS", "mysql")
    with pytest.raises(pytest.UsageError, match="mysql"):
        _backends_of("test_db", "test_x", marked=False)
