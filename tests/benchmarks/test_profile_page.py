"""benchmarks/profile_page.py, the loop PROFILES.md's profiles ran, still reads its pages: sync,
async and plain, on DynamoDB Local, with the client CPU a page it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pynamodb_sharding.testing.local import DynamoDBLocal

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"


@pytest.mark.parametrize(("flags", "read"), [
    ((), "query: (\\d+) pages of 5 over 8 shards"),
    (("--async",), "aquery: (\\d+) pages of 5 over 8 shards"),
    (("--plain",), "plain: (\\d+) pages of 5"),
    (("--shards", "16", "--limit", "100"), "query: (\\d+) pages of 100 over 16 shards"),
])
def test_the_profiled_loop_reads_its_pages(dynamodb_local: DynamoDBLocal, flags: tuple[str, ...], read: str) -> None:
    env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": dynamodb_local.endpoint}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "profile_page.py"), "--seconds", "0.5", *flags],
                          cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=300, check=True)
    found = re.fullmatch(rf"{read} in 0.5 s, ([\d.]+) ms of client CPU a page\n", done.stdout)
    assert found is not None, done.stdout + done.stderr
    assert int(found[1]) > 0
    assert float(found[2]) > 0


def test_the_server_cpu_a_page_is_printed_when_the_loop_starts_its_server() -> None:
    env = {name: value for name, value in os.environ.items() if name != "DYNAMODB_LOCAL_ENDPOINT"}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "profile_page.py"), "--seconds", "0.5", "--plain"],
                          cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=300, check=True)
    found = re.search(r"^DynamoDB Local: ([\d.]+) ms of server CPU a page$", done.stdout, re.MULTILINE)
    assert found is not None, done.stdout + done.stderr
    assert float(found[1]) > 0


@pytest.mark.parametrize("flags", [(), ("--async",)])
def test_the_time_of_each_item_of_a_page_is_printed(dynamodb_local: DynamoDBLocal, flags: tuple[str, ...]) -> None:
    env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": dynamodb_local.endpoint}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "profile_page.py"), "--seconds", "0.2", "--per-item",
                           *flags], cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=300, check=True)
    found = re.search(r"^per item \(median ms\): ((?:[\d.]+ ){4}[\d.]+), end ([\d.]+)$", done.stdout, re.MULTILINE)
    assert found is not None, done.stdout + done.stderr
    first, *rest = (float(step) for step in found[1].split())
    assert first > max(rest)  # the first item waits for the shards' pages; the others are held


@pytest.mark.parametrize(("flags", "read"), [
    (("--long-read", "index"), "merged index query"),
    (("--long-read", "table", "--plain"), "plain query"),
])
def test_the_profiled_long_read_iterates_its_items(dynamodb_local: DynamoDBLocal, flags: tuple[str, ...],
                                                   read: str) -> None:
    env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": dynamodb_local.endpoint}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "profile_page.py"), "--seconds", "0.3", "--items", "300",
                           *flags], cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=300, check=True)
    found = re.fullmatch(rf"{read}: (\d+) reads of 300 items in 0.3 s, (\d+) ms of client CPU a read\n", done.stdout)
    assert found is not None, done.stdout + done.stderr
    assert int(found[1]) > 0
