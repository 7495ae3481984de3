"""Two tests binding the same model get tables of their own: one's writes are unseen by the other.

An inner session binds one module-level model in two tests; the first writes an item, the
second finds its table empty, and each test sees a different table name. Between and after
the tests the model's Meta holds its declared table name again.
"""

from __future__ import annotations

import pytest

INNER = '''
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

class Note(Model):
    class Meta:
        table_name = "notes"
    key = UnicodeAttribute(hash_key=True)
    text = UnicodeAttribute()

seen_tables = []

def test_writes(dynamodb_models):
    tables = dynamodb_models(Note)
    seen_tables.append(tables[Note])
    Note("k", text="written by test_writes").save()
    assert Note.count() == 1

def test_meta_restored_between_tests():
    assert Note.Meta.table_name == "notes"

def test_does_not_see_the_other_tests_item(dynamodb_models):
    tables = dynamodb_models(Note)
    seen_tables.append(tables[Note])
    assert Note.count() == 0
    assert list(Note.scan()) == []

def test_tables_differ():
    assert len(seen_tables) == 2
    assert seen_tables[0] != seen_tables[1]
    assert all(name.startswith("notes_") for name in seen_tables)
'''


def test_two_tests_get_separate_tables(inner_session: pytest.Pytester) -> None:
    inner_session.makepyfile(test_inner=INNER)
    result = inner_session.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
