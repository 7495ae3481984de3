"""The README and the quick start name every extra a user installs, every example app and the
async page, and the way to run DynamoDB Local that needs no extra.

A new user reads the README and the docs only: an extra declared in ``setup.cfg`` but missing
from the install lines (``[async]`` was) is a feature they never find.
"""

from __future__ import annotations

import configparser
import re

from .examples import DOCS, REPO

#: Extras for the project's own tooling, not for users.
TOOLING_EXTRAS = frozenset({"test", "docs", "release"})


def user_extras() -> set[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    return set(config["options.extras_require"]) - TOOLING_EXTRAS


def installed_extras(text: str) -> set[str]:
    return set(re.findall(r"pip install 'pynamodb-sharding\[(\w+)\]'", text))


def readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match is not None, f"README.md has no '## {title}' section"
    return match[1]


def test_every_extra_has_an_install_line_in_the_readme_and_the_quick_start() -> None:
    extras = user_extras()
    assert {"cli", "demo", "testing", "async"} <= extras
    assert extras == installed_extras(readme_section("Install"))
    assert extras == installed_extras((DOCS / "quickstart.rst").read_text(encoding="utf-8"))


def test_the_readme_lists_the_async_page_and_every_example_app() -> None:
    documentation = readme_section("Documentation")
    assert "[docs/async.rst](docs/async.rst)" in documentation
    assert "aquery" in documentation
    apps = sorted(path.name for path in (REPO / "examples").iterdir() if (path / "README.md").is_file())
    assert "fastapi_app" in apps
    for app in apps:
        assert f"[examples/{app}](examples/{app})" in documentation, app


def test_dynamodb_local_without_the_cli_extra_is_documented() -> None:
    command = "python -m pynamodb_sharding.testing serve"
    assert command in readme_section("Documentation")
    assert command in (DOCS / "quickstart.rst").read_text(encoding="utf-8")
    assert command in (DOCS / "testing.rst").read_text(encoding="utf-8")
