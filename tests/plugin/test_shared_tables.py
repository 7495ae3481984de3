"""Classes over one production table share one test table, as they share the production one.

A single-table design: five model classes over table ``shop`` (the same keys; ``Customer``
declares index ``by_email``, ``Order`` index ``by_status``). Bound together or one by one,
in one binding, they get one test table holding both indexes and see each other's items;
classes whose schemas one table cannot serve are refused before anything changes, naming both
classes; each ``Meta`` is restored exactly. The tables are checked with raw boto3 calls.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, KeysOnlyProjection, LocalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding.testing import DynamoDBLocal, ModelBinding, SharedTableError
from pynamodb_sharding.testing.local import _dynamodb_client
from tests.raw import raw_client, raw_items

PRODUCTION_HOST = "https://dynamodb.eu-west-1.amazonaws.com"


class ByEmail(GlobalSecondaryIndex["Customer"]):
    class Meta:
        index_name = "by_email"
        projection = AllProjection()

    email = UnicodeAttribute(hash_key=True)


class Customer(Model):
    class Meta:
        table_name = "shop"
        host = PRODUCTION_HOST

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    email = UnicodeAttribute(null=True)
    by_email = ByEmail()


class ByStatus(GlobalSecondaryIndex["Order"]):
    class Meta:
        index_name = "by_status"
        projection = AllProjection()

    status = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class Order(Model):
    class Meta:
        table_name = "shop"
        host = PRODUCTION_HOST

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    status = UnicodeAttribute(null=True)
    by_status = ByStatus()


def shop_model(name: str, **attributes: Any) -> type[Model]:
    """A class over table ``shop`` with the table's keys, a ``Meta`` of its own, and ``attributes``."""

    class Meta:
        table_name = "shop"
        host = PRODUCTION_HOST

    namespace = {"Meta": Meta, "pk": UnicodeAttribute(hash_key=True), "sk": UnicodeAttribute(range_key=True),
                 "__module__": __name__, "__qualname__": name, **attributes}
    model: type[Model] = type(name, (Model,), namespace)
    return model


Invoice = shop_model("Invoice")
Shipment = shop_model("Shipment")
Review = shop_model("Review")
SHOP = (Customer, Order, Invoice, Shipment, Review)


class PremiumCustomer(Customer):
    """A Meta of its own that inherits Customer's: the same table."""

    class Meta(Customer.Meta):
        pass


def meta_snapshot(model: type[Model]) -> dict[str, Any]:
    return dict(vars(model.Meta))


def table_names(server: DynamoDBLocal) -> set[str]:
    return set(_dynamodb_client(server).list_tables()["TableNames"])


def index_names(model: type[Model]) -> set[str]:
    table = raw_client(model).describe_table(TableName=model.Meta.table_name)["Table"]
    return {index["IndexName"] for index in table.get("GlobalSecondaryIndexes", ())}


def write_one_item_each() -> None:
    Customer("c#1", "profile", email="ann@example.com").save()
    Order("c#1", "order#1", status="open").save()
    Invoice("c#1", "invoice#1").save()
    Shipment("c#1", "shipment#1").save()
    Review("c#1", "review#1").save()


SORT_KEYS = ["invoice#1", "order#1", "profile", "review#1", "shipment#1"]


class TestOneTable:
    """Every class sees every item, through its own queries and the indexes of the others."""

    def test_classes_bound_one_by_one_share_a_table(self, dynamodb_local: DynamoDBLocal) -> None:
        before = table_names(dynamodb_local)
        with ModelBinding(dynamodb_local) as binding:
            for model in SHOP:  # as separate fixtures would: one call each
                binding.bind(model)
            assert 1 == len({model.Meta.table_name for model in SHOP})
            assert 1 == len(table_names(dynamodb_local) - before)
            write_one_item_each()
            for model in SHOP:
                assert SORT_KEYS == [item.sk for item in model.query("c#1")], model.__name__
            assert SORT_KEYS == sorted(item["sk"]["S"] for item in raw_items(Invoice))
            # Customer created the table with by_email; Order's by_status was added to it.
            assert {"by_email", "by_status"} == index_names(Review)
            assert ["order#1"] == [order.sk for order in Order.by_status.query("open")]
            assert ["profile"] == [customer.sk for customer in Customer.by_email.query("ann@example.com")]
        assert before == table_names(dynamodb_local)

    def test_classes_bound_in_one_call_get_the_union_of_their_indexes(self, dynamodb_local: DynamoDBLocal) -> None:
        with ModelBinding(dynamodb_local) as binding:
            tables = binding.bind(*SHOP)
            assert 1 == len(set(tables.values()))
            assert {"by_email", "by_status"} == index_names(Invoice)
            write_one_item_each()
            assert ["order#1"] == [order.sk for order in Order.by_status.query("open")]
            assert ["profile"] == [customer.sk for customer in Customer.by_email.query("ann@example.com")]
            assert 5 == Shipment.count("c#1")

    def test_fixture_calls_in_one_test_share_the_table(self, dynamodb_models: Any) -> None:
        dynamodb_models(Order)
        dynamodb_models(Invoice)
        Order("c#2", "order#1", status="open").save()
        assert ["order#1"] == [item.sk for item in Invoice.query("c#2")]
        assert Order.Meta.table_name == Invoice.Meta.table_name

    def test_a_meta_inheriting_a_bound_meta_shares_its_table(self, dynamodb_local: DynamoDBLocal) -> None:
        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Customer)
            binding.bind(PremiumCustomer)
            assert PremiumCustomer.Meta.table_name == Customer.Meta.table_name
            PremiumCustomer("c#3", "profile", email="vip@example.com").save()
            assert ["profile"] == [item.sk for item in Customer.query("c#3")]
        assert "shop" == PremiumCustomer.Meta.table_name
        assert "table_name" not in vars(PremiumCustomer.Meta)

    def test_every_meta_is_restored_exactly(self, dynamodb_local: DynamoDBLocal) -> None:
        before = {model: meta_snapshot(model) for model in (*SHOP, PremiumCustomer)}
        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Invoice, Customer)
            binding.bind(PremiumCustomer, Order, Shipment, Review)
            assert all(model.Meta.host == dynamodb_local.endpoint for model in SHOP)
        assert before == {model: meta_snapshot(model) for model in (*SHOP, PremiumCustomer)}
        assert all("_connection" not in vars(model) for model in SHOP)

    def test_the_same_name_on_another_host_is_another_table(self, dynamodb_local: DynamoDBLocal) -> None:
        class Elsewhere(Model):
            class Meta:
                table_name = "shop"
                host = "https://dynamodb.ap-northeast-1.amazonaws.com"

            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)

        with ModelBinding(dynamodb_local) as binding:
            tables = binding.bind(Invoice, Elsewhere)
            assert tables[Invoice] != tables[Elsewhere]
            Invoice("c#4", "invoice#1").save()
            assert 0 == Elsewhere.count("c#4")


class TestRefused:
    """What one table cannot serve raises SharedTableError naming both classes; nothing changes."""

    def test_different_keys(self, dynamodb_local: DynamoDBLocal) -> None:
        class Legacy(Model):
            class Meta:
                table_name = "shop"
                host = PRODUCTION_HOST

            id = NumberAttribute(hash_key=True)

        before = table_names(dynamodb_local)
        snapshots = {model: meta_snapshot(model) for model in (Invoice, Legacy)}
        with ModelBinding(dynamodb_local) as binding, pytest.raises(SharedTableError) as raised:
            binding.bind(Invoice, Legacy)
        assert str(raised.value).startswith(
            "Legacy and Invoice both use table 'shop', with different keys (hash key 'id' (N) and hash key "
            "'pk' (S), range key 'sk' (S)): one test table cannot serve both. Declare the production table's "
            "keys on both classes, or give one of them the table_name of the table it really uses."
        )
        assert "errors.html#shared-table" in str(raised.value)
        assert before == table_names(dynamodb_local)
        assert snapshots == {model: meta_snapshot(model) for model in (Invoice, Legacy)}

    def test_one_index_declared_two_ways(self, dynamodb_local: DynamoDBLocal) -> None:
        class ByStatusKeys(GlobalSecondaryIndex["OrderSummary"]):
            class Meta:
                index_name = "by_status"
                projection = KeysOnlyProjection()

            status = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)

        OrderSummary = shop_model("OrderSummary", status=UnicodeAttribute(null=True), by_status=ByStatusKeys())

        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Order)
            table = Order.Meta.table_name
            with pytest.raises(SharedTableError, match=(
                "OrderSummary and Order both declare index 'by_status' of table 'shop', differently "
                r"\(global, hash key 'status', range key 'sk', projection KEYS_ONLY and global, hash key "
                r"'status', range key 'sk', projection ALL\): one test table cannot serve both"
            )):
                binding.bind(OrderSummary)
            assert "shop" == OrderSummary.Meta.table_name
            assert {"by_status"} == index_names(Order)
            assert table == Order.Meta.table_name

    def test_an_attribute_of_two_types(self, dynamodb_local: DynamoDBLocal) -> None:
        class ByStatusCode(GlobalSecondaryIndex["OrderCode"]):
            class Meta:
                index_name = "by_status_code"
                projection = AllProjection()

            status = NumberAttribute(hash_key=True)

        OrderCode = shop_model("OrderCode", status=NumberAttribute(null=True), by_status_code=ByStatusCode())

        with ModelBinding(dynamodb_local) as binding, pytest.raises(SharedTableError, match=(
            r"OrderCode declares attribute 'status' of table 'shop' \(a key of the table or of an index\) as type N, "
            r"Order as type S: one test table cannot serve both\. Declare it with the same attribute class in both\."
        )):
            binding.bind(Order, OrderCode)

    def test_a_local_index_the_created_table_lacks(self, dynamodb_local: DynamoDBLocal) -> None:
        class BySku(LocalSecondaryIndex["LineItem"]):
            class Meta:
                index_name = "by_sku"
                projection = AllProjection()

            pk = UnicodeAttribute(hash_key=True)
            sku = UnicodeAttribute(range_key=True)

        LineItem = shop_model("LineItem", sku=UnicodeAttribute(null=True), by_sku=BySku())

        with ModelBinding(dynamodb_local) as binding:
            binding.bind(Invoice)
            with pytest.raises(SharedTableError, match=re.escape(
                "LineItem declares local secondary index 'by_sku' of table 'shop', whose test table was "
                "created earlier for Invoice; a local secondary index can only be created with its table. "
                "Bind LineItem in the same call as Invoice."
            )):
                binding.bind(LineItem)
            assert "shop" == LineItem.Meta.table_name

        with ModelBinding(dynamodb_local) as binding:  # the fix: one call
            binding.bind(Invoice, LineItem)
            LineItem("c#5", "line#1", sku="A-1").save()
            assert ["line#1"] == [item.sk for item in LineItem.by_sku.query("c#5", LineItem.sku == "A-1")]
            assert 1 == Invoice.count("c#5")
