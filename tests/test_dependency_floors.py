"""constraints/lowest.txt pins every runtime dependency (and the CLI's) to exactly its declared floor.

`make test-lowest` installs with that file, so the floors it proves are the floors users get;
a floor raised or added in setup.cfg without the constraints file (or the reverse) fails here.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
LOWEST = REPO / "constraints" / "lowest.txt"
# Test-only pins: boto3 pins botocore to its own minor release, so it follows the botocore floor.
TEST_ONLY = {"boto3"}


def declared(section: str, option: str) -> dict[str, Requirement]:
    """The requirements of one setup.cfg option, by canonical name."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    lines = config[section][option].splitlines()
    requirements = (Requirement(line.strip()) for line in lines if line.strip())
    return {canonicalize_name(requirement.name): requirement for requirement in requirements}


def floor(requirement: Requirement) -> Version:
    """The version of the requirement's one '>=' specifier."""
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    assert 1 == len(floors), f"{requirement} must declare one '>=' floor for make test-lowest to test"
    return floors[0]


def pins() -> dict[str, Version]:
    """The versions constraints/lowest.txt pins, by canonical name."""
    result: dict[str, Version] = {}
    for line in LOWEST.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert "==" == spec.operator, f"{LOWEST.name}: {line!r} must pin one version with '=='"
        name = canonicalize_name(requirement.name)
        assert name not in result, f"{LOWEST.name} pins {name} twice"
        result[name] = Version(spec.version)
    return result


#: The library's dependencies, those of its command line and demo extras (click, rich) and of
#: the async extra (greenlet, httptools): each is pinned to its floor. matplotlib only draws the
#: demo's chart and is not pinned.
RUNTIME = {
    **declared("options", "install_requires"),
    **{name: req for name, req in declared("options.extras_require", "demo").items() if name != "matplotlib"},
    **declared("options.extras_require", "async"),
}


class TestLowestPinsTheFloors:
    """Each runtime dependency is pinned to its declared floor, and nothing else is pinned."""

    def test_same_packages(self) -> None:
        assert set(RUNTIME) | TEST_ONLY == set(pins())

    @pytest.mark.parametrize("name", sorted(RUNTIME))
    def test_pin_is_the_floor(self, name: str) -> None:
        assert floor(RUNTIME[name]) == pins()[name]


def boto3_release_of(botocore: Version) -> Version:
    """The boto3 release that requires exactly the botocore release ``botocore``: the same
    number from 1.33 on; before that boto3's minor version was botocore's minus 3."""
    major, minor, patch = botocore.release[:3]
    if (major, minor) >= (1, 33):
        return botocore
    return Version(f"{major}.{minor - 3}.{patch}")


class TestTestOnlyPinsFollowTheFloors:
    """The test extra's boto3 installs beside the botocore floor, at the release of that floor."""

    def test_boto3_is_the_release_of_the_botocore_floor(self) -> None:
        assert boto3_release_of(pins()["botocore"]) == pins()["boto3"]

    @pytest.mark.parametrize(("botocore", "boto3"), [
        ("1.40.10", "1.40.10"), ("1.34.0", "1.34.0"), ("1.33.13", "1.33.13"),
        ("1.31.85", "1.28.85"), ("1.29.0", "1.26.0"), ("1.27.13", "1.24.13"),
    ])
    def test_boto3_release_of(self, botocore: str, boto3: str) -> None:
        assert boto3_release_of(Version(botocore)) == Version(boto3)

    def test_boto3_floor_of_the_test_extra_is_that_release(self) -> None:
        assert pins()["boto3"] == floor(declared("options.extras_require", "test")["boto3"])
