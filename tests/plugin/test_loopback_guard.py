"""The loopback-only guard: a class a test forgot to bind raises before anything is sent.

Nothing here may leave this machine, even if the guard broke: the ``network`` fixture makes
every name resolution of a host that is not a loopback address fail (and records it), and the
inner test sessions install the same check as an audit hook. A request that reached the
network layer would be recorded there, so "nothing was sent" is asserted, not assumed; the
negative control shows an unguarded request does get there (and is stopped by the check).
"""

from __future__ import annotations

import gc
import socket
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import GetError
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, RandomShards, ShardedModel, Sharding, ShardMetadata, TimePartitioned
from pynamodb_sharding._host import unshared_connection
from pynamodb_sharding.testing import DynamoDBLocal, LoopbackGuard, ModelBinding, UnboundModelError
from pynamodb_sharding.testing.guard import is_loopback
from pynamodb_sharding.testing.local import ENDPOINT_ENV

AWS = "https://dynamodb.us-east-1.amazonaws.com"


class AwsMeta:
    """The production connection every model here declares: AWS, no retries."""

    host = AWS
    region = "us-east-1"
    # Credentials of its own: creating a client looks none up (no instance metadata request).
    aws_access_key_id = "AKIDEXAMPLE"
    aws_secret_access_key = "not-a-secret"
    max_retry_attempts = 0


class Account(Model):
    class Meta(AwsMeta):
        table_name = "accounts"

    account_id = UnicodeAttribute(hash_key=True)
    balance = NumberAttribute(default=0)


class Visit(ShardedModel):
    """Time-partitioned: its requests go through period models the library derives at run time."""

    class Meta(AwsMeta):
        table_name = TimePartitioned("visits.{period}", attribute="at", period="month")

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


class PageShards(ShardMetadata):
    class Meta:
        table_name = "page_shards"
        home_region = "us-west-2"  # no home_host: counts change at AWS's endpoint of that region
        home_retry_seconds = 0


class HotPage(ShardedModel):
    class Meta(AwsMeta):
        table_name = "hot_pages"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(PageShards))


def refusal(model: str, table: str, endpoint: str = AWS) -> str:
    return (
        f"{model} (table {table!r}) was about to send a DynamoDB request to {endpoint}, which is not on this "
        f"machine, while requests may only go to loopback endpoints (dynamodb_loopback_only); nothing was "
        f"sent. Bind the class to DynamoDB Local in the test: dynamodb_models({model}) (or "
        f"dynamodb_models_module / dynamodb_models_session). (see "
        f"https://pynamodb-sharding.readthedocs.io/en/latest/errors.html#unbound-model)"
    )


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host a request tried to resolve that is not on this machine (the resolution fails)."""
    attempts: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if not is_loopback(f"//{name}"):
            attempts.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: not resolved in this test")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


@pytest.fixture(autouse=True)
def uncached() -> Iterator[None]:
    """Each test starts and ends with no connection cached on the classes here (an unguarded
    request caches one, as PynamoDB does)."""
    _forget_connections()
    yield
    _forget_connections()


def _forget_connections() -> None:
    for model in (Account, Visit):
        if "_connection" in vars(model):
            del model._connection


@pytest.fixture
def guard() -> Iterator[LoopbackGuard]:
    guard = LoopbackGuard()
    guard.cover()
    yield guard
    guard.release()


class TestRefused:
    def test_every_request_of_an_unbound_class_raises_before_sending(
        self, network: list[str], guard: LoopbackGuard
    ) -> None:
        expected = refusal("Account", "accounts")
        with pytest.raises(UnboundModelError) as raised:
            Account.get("a1")
        assert expected == str(raised.value)
        for request in (lambda: Account("a1").save(), lambda: list(Account.query("a1")), Account.count,
                        Account.exists, lambda: Account.create_table(billing_mode="PAY_PER_REQUEST")):
            with pytest.raises(UnboundModelError):
                request()
        assert [] == network

    def test_without_the_guard_the_request_goes_out(self, network: list[str]) -> None:
        """The negative control: the same call reaches name resolution, where the test stops it."""
        with pytest.raises(GetError):
            Account.get("a1")
        assert ["dynamodb.us-east-1.amazonaws.com"] == network

    def test_a_class_defined_later_under_a_covered_base(self, network: list[str], guard: LoopbackGuard) -> None:
        class Ledger(ShardedModel):
            class Meta:
                table_name = "ledger"
                region = "eu-west-1"  # no host: AWS's endpoint of the region

            account_id = UnicodeAttribute(hash_key=True)
            shards = Sharding(RandomShards(4))

        with pytest.raises(UnboundModelError) as raised:
            Ledger("a1").save()
        assert refusal("Ledger", "ledger", "https://dynamodb.eu-west-1.amazonaws.com") == str(raised.value)
        assert [] == network

    def test_the_period_models_of_an_unbound_time_partitioned_model(
        self, network: list[str], guard: LoopbackGuard
    ) -> None:
        with pytest.raises(UnboundModelError, match=r"^Visit \(table 'visits\.201602'\) was about to send"):
            Visit("/top", at=1456473647).save()  # 2016-02-26: a period model made by this call
        assert [] == network


    def test_the_home_region_model_of_a_bound_metadata_model(
        self, network: list[str], guard: LoopbackGuard, dynamodb_local: DynamoDBLocal
    ) -> None:
        """Binding HotPage binds PageShards, but a change of a count goes to its home region."""
        with ModelBinding(dynamodb_local) as binding:
            binding.bind(HotPage)
            HotPage("/top", at=1).save()
            with pytest.raises(UnboundModelError, match=(
                r"^PageShards \(table 'page_shards_\w+'\) was about to send a DynamoDB request to "
                r"https://dynamodb.us-west-2.amazonaws.com, which is not on this machine, .*; nothing was sent\. "
                r"The class derives from a class bound to DynamoDB Local but its own Meta names another endpoint "
                r"\(a metadata model's Meta.home_region without Meta.home_host, for example\): point that "
                r"endpoint at DynamoDB Local too\."
            )):
                HotPage.shards.grow("/top")
        assert [] == network


class TestBound:
    def test_a_bound_class_works_and_is_refused_again_once_unbound(
        self, network: list[str], guard: LoopbackGuard, dynamodb_local: DynamoDBLocal
    ) -> None:
        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Account)
            Account("a1", balance=5).save()
            assert 5 == Account.get("a1").balance
            guard.cover()  # as before the next test: a bound class keeps its connection
            assert 5 == Account.get("a1").balance
        with pytest.raises(UnboundModelError):
            Account.get("a1")
        assert [] == network

    def test_models_on_loopback_hosts_are_left_alone(self, dynamodb_local: DynamoDBLocal) -> None:
        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Account)
            Account("a2").save()
            connection = vars(Account)["_connection"]
            guard = LoopbackGuard()
            assert Account not in guard.cover()
            assert connection is vars(Account)["_connection"]
            guard.release()


class TestRelease:
    def test_release_restores_each_class_exactly(self, network: list[str]) -> None:
        cached = object()
        Visit._connection = cached  # type: ignore[assignment]
        assert "_connection" not in vars(Account)
        guard = LoopbackGuard()
        covered = guard.cover()
        assert {Account, Visit, ShardedModel} <= set(covered)
        guard.release()
        assert "_connection" not in vars(Account)
        assert "_connection" not in vars(ShardedModel)
        assert cached is vars(Visit)["_connection"]
        del Visit._connection
        guard.release()  # twice is harmless
        with pytest.raises(RuntimeError, match="was released"):
            guard.cover()

    def test_a_covered_class_dropped_during_the_run_is_freed(self, network: list[str]) -> None:
        """The run-wide guard covers the classes alive before each test; one a test made and
        dropped is freed before the run ends, as without the guard (plain and sharded)."""

        def made() -> list[type[Model]]:
            plain = type("TenantPlain", (Model,), {
                "Meta": type("Meta", (), {"table_name": "tenant_plain", "host": AWS}),
                "key": UnicodeAttribute(hash_key=True)})
            sharded = type("TenantSharded", (ShardedModel,), {
                "Meta": type("Meta", (), {"table_name": "tenant_sharded", "host": AWS}),
                "key": UnicodeAttribute(hash_key=True), "shards": Sharding(RandomShards(2))})
            return [plain, sharded]

        guard = LoopbackGuard()
        models = made()
        assert set(models) <= set(guard.cover())
        refs = [weakref.ref(model) for model in models]
        del models
        gc.collect()
        assert [ref() for ref in refs] == [None, None]
        guard.release()
        assert "_connection" not in vars(Account)

    def test_a_binding_closed_after_the_release_leaves_no_refusal_behind(
        self, network: list[str], dynamodb_local: DynamoDBLocal
    ) -> None:
        """Fixture teardown order may close a binding after the guard: the guard's leftover is inert."""
        guard = LoopbackGuard()
        guard.cover()
        binding = ModelBinding(dynamodb_local)
        binding.bind(Account)
        guard.release()
        binding.close()  # puts back what it found: the guard's descriptor
        assert unshared_connection(Account) is not None
        with pytest.raises(GetError):  # an ordinary request again, stopped by the test's check
            Account.get("a1")
        assert ["dynamodb.us-east-1.amazonaws.com"] == network


def test_loopback_hosts() -> None:
    assert all(is_loopback(host) for host in (
        "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "127.0.0.5:9", "http://LOCALHOST",
    ))
    assert not any(is_loopback(host) for host in (
        None, "", AWS, "http://10.0.0.1:8000", "http://localhost.example.com", "http://127.0.0.1.nip.io",
    ))


INNER_CONFTEST = '''
import gc
import socket
import weakref
import sys

from pynamodb_sharding.testing.guard import is_loopback

BLOCKED = []


def _no_traffic_off_this_machine(event, args):
    # The safety net of these inner runs: nothing resolves or connects off this machine.
    if event == "socket.getaddrinfo":
        host = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        if not is_loopback("//" + host):
            BLOCKED.append(host)
            raise socket.gaierror(socket.EAI_NONAME, host + ": not resolved in this test")


sys.addaudithook(_no_traffic_off_this_machine)
'''

INNER_TESTS = '''
import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from conftest import BLOCKED


class Account(Model):
    class Meta:
        table_name = "accounts"
        host = "https://dynamodb.us-east-1.amazonaws.com"
        region = "us-east-1"
        aws_access_key_id = "AKIDEXAMPLE"
        aws_secret_access_key = "not-a-secret"
        max_retry_attempts = 0

    account_id = UnicodeAttribute(hash_key=True)


@pytest.fixture(scope="session")
def seeded():
    Account("seed").save()  # a session fixture that forgot to bind


def test_bound(dynamodb_models):
    dynamodb_models(Account)
    Account("a1").save()
    assert Account.get("a1").account_id == "a1"


def test_forgot_to_bind():
    Account.get("a1")


def test_forgot_to_bind_in_a_session_fixture(seeded):
    pass


def test_nothing_left_this_machine():
    assert BLOCKED == []
'''


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dynamodb_local: DynamoDBLocal) -> pytest.Pytester:
    monkeypatch.setenv(ENDPOINT_ENV, dynamodb_local.endpoint)  # the inner runs start no server
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_accounts=INNER_TESTS)
    return pytester


def _refused(result: pytest.RunResult) -> int:
    # The tracebacks' "E" lines only: the -ra summary repeats the message, cut to the terminal's
    # width, or whole where pytest does not cut it (when CI is set).
    refusal = "UnboundModelError: Account (table 'accounts') was about to send"
    return sum(1 for line in result.stdout.lines if line.startswith("E ") and refusal in line)


@pytest.mark.parametrize("switch", ["option", "ini"])
def test_the_option_and_the_ini_setting_guard_every_test(inner: pytest.Pytester, switch: str) -> None:
    args = ["-ra", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if switch == "option":
        args.append("--dynamodb-loopback-only")
    else:
        inner.makeini("[pytest]\ndynamodb_loopback_only = true\n")
    result = inner.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    assert 2 == _refused(result)
    summary = str(result.stdout)
    assert "FAILED test_accounts.py::test_forgot_to_bind - pynamodb_sharding.testing.guar" in summary
    assert "ERROR test_accounts.py::test_forgot_to_bind_in_a_session_fixture - pynamodb_s" in summary


def test_off_by_default(inner: pytest.Pytester) -> None:
    """Without the guard the forgotten class sends its request (stopped here by the audit hook)."""
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    assert 0 == _refused(result)
    result.stdout.fnmatch_lines(["*dynamodb.us-east-1.amazonaws.com: not resolved in this test*"])


def test_the_fixture_guards_the_tests_that_use_it(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_fixture='''
import pytest
from test_accounts import Account

pytestmark = pytest.mark.usefixtures("dynamodb_loopback_only")


def test_forgot_to_bind():
    Account.get("a1")
''')
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "test_fixture.py")
    result.assert_outcomes(failed=1)
    assert 1 == _refused(result)
