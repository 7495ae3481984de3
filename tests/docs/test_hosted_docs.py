"""The docs build on Read the Docs as ``.readthedocs.yaml`` configures them, and every error's URL lands.

An error message ends with ``{DOCS_URL}errors.html#<code>``, ``DOCS_URL`` being the Read the
Docs site. These tests build the docs with Read the Docs' own Sphinx command line for the file
(warnings as errors), importing only what its ``python.install`` installs (``hosted.py``), and
check that the URL of every ``ShardingError`` subclass names a built page and an ``id`` on it.
``make test`` runs them; ``.ci/run`` has no separate docs step.
"""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from pynamodb_sharding import _exceptions as exceptions

from . import hosted
from .examples import DOCS, REPO
from .test_error_codes import _package_errors

HOSTED_DOCS = "https://pynamodb-sharding.readthedocs.io/en/latest/"


def _project_urls() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    urls = {}
    for line in config["metadata"]["project_urls"].strip().splitlines():
        name, _, url = line.partition("=")
        urls[name.strip()] = url.strip()
    return urls


def test_messages_link_to_the_documentation_the_package_declares() -> None:
    """The base URL of the messages is the Read the Docs site, and the wheel's Documentation URL."""
    assert HOSTED_DOCS == exceptions.DOCS_URL, "PYNAMODB_SHARDING_DOCS_URL is set: unset it to run the docs tests"
    assert HOSTED_DOCS == _project_urls()["Documentation"]


def test_read_the_docs_builds_with_warnings_as_errors_from_the_docs_extra() -> None:
    """The file builds docs/conf.py with -W, on the Python CI tests, from this checkout with the docs extra."""
    settings = hosted.config()
    assert 2 == settings["version"]
    assert "docs/conf.py" == settings["sphinx"]["configuration"]
    assert settings["sphinx"]["fail_on_warning"] is True
    assert "docs" in hosted.installed_extras(settings)
    workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert f'python-version: ["{settings["build"]["tools"]["python"]}"]' in workflow
    arguments = hosted.sphinx_arguments(settings, Path("out"))
    assert ["-T", "-W", "--keep-going", "-b", "html"] == arguments[:5]


def test_the_hosted_build_cannot_import_what_read_the_docs_does_not_install() -> None:
    """The build's interpreter refuses the test tools but has Sphinx and the documented extras."""
    extras = hosted.installed_extras(hosted.config())
    blocked = hosted.blocked_modules(hosted.requirement_closure(hosted.PROJECT, extras))
    assert {"pyspark", "hypothesis", "django"} <= set(blocked)
    assert not {"sphinx", "myst_parser", "furo", "click", "rich", "pynamodb", "pynamodb_sharding"} & set(blocked)
    done = subprocess.run(
        [sys.executable, str(hosted.RUN_AS_HOSTED), json.dumps(blocked), "-c", "import pyspark"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert 1 == done.returncode
    assert "No module named 'pyspark' (not installed by .readthedocs.yaml)" in done.stderr


def _error_urls() -> dict[str, str]:
    """The URL each public error class's message ends with."""
    errors = [cls for cls in _package_errors() if not cls.__name__.startswith("_")]
    # docs_url depends on the class's code only; no message or cause needed.
    return {cls.__name__: cls.__new__(cls).docs_url for cls in errors}


def _missing_anchors(built: Path, urls: dict[str, str]) -> dict[str, str]:
    """The URLs of ``urls`` whose page is not in ``built`` or has no ``id`` for the fragment."""
    missing = {}
    for name, url in sorted(urls.items()):
        page, _, anchor = url.removeprefix(HOSTED_DOCS).partition("#")
        path = built / page
        ids = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8"))) if path.exists() else set()
        if not url.startswith(HOSTED_DOCS) or anchor not in ids:
            missing[name] = url
    return missing


def test_read_the_docs_publishes_every_page_and_the_anchor_of_every_error_url(tmp_path: Path) -> None:
    """Built as Read the Docs builds it, the site has every page and ``errors.html#<code>`` of every error.

    One test, so the build (about 30 s) runs once, whichever worker takes it.
    """
    completed, built = hosted.build(tmp_path)
    assert 0 == completed.returncode, completed.stdout[-3000:] + completed.stderr[-6000:]
    expected = {f"{page.stem}.html" for page in DOCS.glob("*.rst")}
    assert set() == expected - {path.name for path in built.glob("*.html")}
    assert 'href="errors.html"' in (built / "index.html").read_text(encoding="utf-8")
    urls = _error_urls()
    assert len(urls) > 30  # every error of the package, the testing tools' included
    assert {} == _missing_anchors(built, urls)


def test_a_url_without_its_anchor_or_page_is_reported(tmp_path: Path, monkeypatch: Any) -> None:
    """The anchor check can fail: a code errors.rst has no section for, a page that was not built."""
    (tmp_path / "errors.html").write_text('<section id="unknown-index"><h2>x</h2></section>', encoding="utf-8")
    urls = {"UnknownIndexError": _error_urls()["UnknownIndexError"], "page": f"{HOSTED_DOCS}nowhere.html#key"}
    assert {"page": urls["page"]} == _missing_anchors(tmp_path, urls)
    monkeypatch.setattr(exceptions.UnknownIndexError, "code", "no-such-section")
    urls["UnknownIndexError"] = _error_urls()["UnknownIndexError"]
    assert urls == _missing_anchors(tmp_path, urls)
