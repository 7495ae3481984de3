"""Run by `make dist` after `python -m build` and `twine check --strict`: what the files hold.

Usage: ``python .ci/check_dist.py DIST [--tag TAG]``. Checks, and says each problem:

* DIST holds one sdist and one wheel of the same version (``--tag``: and the release tag is
  ``v<version>``, so a tag cannot publish another version);
* the sdist carries every file git tracks in what packagers test from (tests, docs, examples,
  constraints, benchmarks, typing tests, the CI scripts, the Makefile), and no build output;
* the wheel holds the package and its data only (``py.typed``, the launcher's Java source), and
  its metadata has the project URLs (the documentation URL being the one error messages link
  to), the license file, and a classifier for each Python version CI runs and no other.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: What the sdist must carry for `pytest` to run from it (with the docs, the examples and the
#: checks CI runs); every file git tracks under these, or the file itself.
SDIST_PATHS = (
    ".ci", ".github", "benchmarks", "constraints", "docs", "examples", "tests", "typing_tests",
    ".pre-commit-config.yaml", ".readthedocs.yaml", "CHANGELOG.md", "CONTRIBUTING.md", "LICENSE", "Makefile",
    "README.md", "pyproject.toml", "setup.cfg",
)
#: Found without git (an unpacked sdist): the files the checks above cannot do without.
SDIST_ESSENTIALS = (
    ".ci/run", "Makefile", "constraints/lowest.txt", "docs/conf.py", "docs/errors.rst",
    "examples/flask_app/audit_app.py", "tests/conftest.py", "tests/unit", "typing_tests", "benchmarks/run_all.py",
)
NOT_IN_SDIST = re.compile(r"(^|/)(__pycache__|\.venv[^/]*|_build|\.pytest_cache|\.mypy_cache)(/|$)|\.pyc$")
PROJECT_URLS = ("Documentation", "Source", "Issues", "Changelog")
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def tracked(paths: tuple[str, ...]) -> set[str] | None:
    """The files git tracks under ``paths``, or ``None`` outside a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", *paths], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {name for name in listed.decode().split("\0") if name}


def ci_python_versions() -> list[str]:
    """The ``python-version`` values of the CI workflow's matrix."""
    text = WORKFLOW.read_text(encoding="utf-8")
    match = re.search(r"python-version:\s*\[([^\]]*)\]", text)
    if match is None:
        sys.exit(f"{WORKFLOW}: no `python-version: [...]` matrix")
    return sorted(value.strip().strip("'\"") for value in match[1].split(",") if value.strip())


def check_sdist(sdist: Path, version: str) -> list[str]:
    problems = []
    with tarfile.open(sdist) as archive:
        prefix = f"{archive.getnames()[0].split('/')[0]}/"
        members = {name.removeprefix(prefix) for name in archive.getnames() if name.startswith(prefix)}
    files = {name for name in members if name}
    expected = tracked(SDIST_PATHS)
    if expected is None:
        missing = sorted(path for path in SDIST_ESSENTIALS if path not in files)
    else:
        missing = sorted(expected - files)
    if missing:
        problems.append(f"{sdist.name} lacks {len(missing)} file(s) packagers test with (MANIFEST.in): "
                        + ", ".join(missing[:20]))
    if junk := sorted(name for name in files if NOT_IN_SDIST.search(name)):
        problems.append(f"{sdist.name} carries build output: " + ", ".join(junk[:20]))
    if prefix != f"pynamodb_sharding-{version}/":
        problems.append(f"{sdist.name} unpacks into {prefix!r}, not pynamodb_sharding-{version}/")
    return problems


def check_wheel(wheel: Path, version: str) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = Parser().parsestr(archive.read(f"pynamodb_sharding-{version}.dist-info/METADATA").decode())
    packaged = {"pynamodb_sharding", f"pynamodb_sharding-{version}.dist-info"}
    outside = sorted({name.split("/")[0] for name in names} - packaged)
    if outside:
        problems.append(f"{wheel.name} installs more than the package: {outside}")
    for data in ("pynamodb_sharding/py.typed", "pynamodb_sharding/testing/java/LoopbackDynamoDBLocal.java"):
        if data not in names:
            problems.append(f"{wheel.name} lacks {data}")
    urls = dict(value.split(", ", 1) for value in metadata.get_all("Project-URL", []))
    if missing := [name for name in PROJECT_URLS if name not in urls]:
        problems.append(f"{wheel.name}: no Project-URL for {missing} (setup.cfg project_urls)")
    docs = _docs_url()
    if urls.get("Documentation") != docs:
        problems.append(f"{wheel.name}: Documentation URL {urls.get('Documentation')!r} is not the one "
                        f"error messages link to ({docs!r})")
    if "LICENSE" not in metadata.get_all("License-File", []):
        problems.append(f"{wheel.name}: no License-File: LICENSE")
    declared = sorted(
        value.rsplit(":: ", 1)[1] for value in metadata.get_all("Classifier", [])
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", value)
    )
    if declared != (ci := ci_python_versions()):
        problems.append(f"{wheel.name}: classifiers declare Python {declared}, CI runs {ci} "
                        f"(setup.cfg classifiers, {WORKFLOW.relative_to(REPO)})")
    return problems


def _docs_url() -> str:
    # The default of pynamodb_sharding._exceptions.DOCS_URL, read from the source: the
    # environment variable that overrides it at import must not change what is checked here.
    source = (REPO / "pynamodb_sharding" / "_exceptions.py").read_text(encoding="utf-8")
    match = re.search(r'^DOCS_URL = .* or "([^"]+)"$', source, flags=re.MULTILINE)
    if match is None:
        sys.exit("pynamodb_sharding/_exceptions.py: cannot find the default DOCS_URL")
    return match[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dist", type=Path, help="the directory python -m build wrote")
    parser.add_argument("--tag", help="the release tag; must be v<version>")
    args = parser.parse_args(argv)
    sdists, wheels = sorted(args.dist.glob("*.tar.gz")), sorted(args.dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        sys.exit(f"{args.dist}: expected one sdist and one wheel, found {[p.name for p in sdists + wheels]}")
    version = wheels[0].name.split("-")[1]
    problems = []
    if sdists[0].name != f"pynamodb_sharding-{version}.tar.gz":
        problems.append(f"{sdists[0].name} and {wheels[0].name} are not the same version")
    if args.tag is not None and args.tag != f"v{version}":
        problems.append(f"the tag {args.tag!r} does not name the built version {version} (expected v{version})")
    problems += check_sdist(sdists[0], version)
    problems += check_wheel(wheels[0], version)
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {sdists[0].name} and {wheels[0].name}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
