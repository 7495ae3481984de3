"""Errors the user can fix end the command with one line on stderr and exit code 2.

No traceback unless ``--debug`` is given, and then the traceback is there. Each case runs the
installed console script against DynamoDB Local.
"""

from __future__ import annotations

import pytest

from .console import ModelsModule, run_cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("status", "no_such_module_here:AuditLog", "k"), "cannot import module 'no_such_module_here'"),
        (("tables", "create", "{module}:NoSuchModel"), "has no attribute 'NoSuchModel'"),
        (("tables", "create", "{module}"), "is not MODULE:Model"),
        (("tables", "create", "{module}:HOST"), "is not a PynamoDB model class"),
        (("status", "{module}:Plain", "k"), "is not a sharded model: Plain must inherit from"),
        (("status", "{module}:AuditLog", "k"), "does not exist (needed by {module}:AuditLog)"),
    ],
    ids=[
        "module-not-importable",
        "no-such-class",
        "malformed-spec",
        "not-a-model",
        "not-sharded",
        "table-missing",
    ],
)
def test_error_is_one_line_with_exit_code_2(
    project: ModelsModule, cli_env: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    """The message names the problem; stdout is empty and no traceback is printed."""
    argv = [arg.format(module=project.name) for arg in args]
    result = run_cli(*argv, cwd=project.directory, env=cli_env)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message.format(module=project.name) in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_table_names_the_fix(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """The table-missing line says which table and the command that creates it."""
    spec = project.spec("AuditLog")
    result = run_cli("status", spec, "k", cwd=project.directory, env=cli_env)
    assert f"table '{project.table('audit_log')}'" in result.stderr
    assert f"create it with: pynamodb-sharding tables create {spec}" in result.stderr


def test_import_error_inside_the_module_is_one_line(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """A module that exists but fails to import reports the failure, not a traceback."""
    (project.directory / "broken_models.py").write_text("import not_installed_dependency_xyz\n")
    result = run_cli("tables", "create", "broken_models:AuditLog", cwd=project.directory, env=cli_env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "importing 'broken_models' failed" in result.stderr
    assert "not_installed_dependency_xyz" in result.stderr


def test_unexpected_failure_is_one_line_and_debug_shows_the_traceback(
    project: ModelsModule, cli_env: dict[str, str]
) -> None:
    """A connection failure (nothing listens at the Meta's host) is one line; --debug adds the traceback."""
    spec = project.spec("Elsewhere")
    quiet = run_cli("tables", "create", spec, cwd=project.directory, env=cli_env)
    assert quiet.returncode == 2
    assert quiet.stderr.count("\n") == 1, quiet.stderr
    assert quiet.stderr.startswith("error: ")
    assert "--debug" in quiet.stderr
    assert "Traceback" not in quiet.stderr

    loud = run_cli("--debug", "tables", "create", spec, cwd=project.directory, env=cli_env)
    assert loud.returncode != 0
    assert "Traceback (most recent call last)" in loud.stderr


def test_debug_shows_the_traceback_of_a_reported_error(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """With --debug, even a known error (module not importable) shows where it came from."""
    result = run_cli("--debug", "status", "no_such_module_here:AuditLog", "k", cwd=project.directory, env=cli_env)
    assert result.returncode == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert "No module named 'no_such_module_here'" in result.stderr


def test_a_missing_region_or_credentials_names_what_to_set(project: ModelsModule, cli_env: dict[str, str],
                                                            dynamodb_local: object) -> None:
    """Without AWS settings: a local --endpoint gets a region by itself, and what is still
    missing (credentials, or a region for AWS itself) is named with the option or variable to set."""
    bare = {name: value for name, value in cli_env.items() if not name.startswith("AWS_")}
    bare["AWS_CONFIG_FILE"] = bare["AWS_SHARED_CREDENTIALS_FILE"] = str(project.directory / "none")
    spec = project.spec("AuditLog")
    endpoint = getattr(dynamodb_local, "endpoint")  # noqa: B009  # typed as object here

    no_credentials = run_cli("status", spec, "k", "--endpoint", endpoint, cwd=project.directory, env=bare)
    assert no_credentials.returncode == 2
    assert "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in no_credentials.stderr

    with_credentials = {**bare, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    local = run_cli("status", spec, "k", "--endpoint", endpoint, cwd=project.directory, env=with_credentials)
    assert "does not exist" in local.stderr  # it reached DynamoDB Local: the region was chosen

    no_region = run_cli("status", project.spec("Regionless"), "k", cwd=project.directory, env=with_credentials)
    assert no_region.returncode == 2
    assert "no AWS region is set: pass --region" in no_region.stderr
