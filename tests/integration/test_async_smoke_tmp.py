from __future__ import annotations
import asyncio
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from tests.raw import put_raw


class Visit(ShardedModel):
    class Meta:
        table_name = "async_smoke_visit"
    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(16))


def test_smoke(dynamodb_models):
    dynamodb_models(Visit)
    put_raw(Visit, [{"page": {"S": f"/h_{n % 16 + 1}"}, "at": {"N": str(n)}} for n in range(100)])
    sync = [v.at for v in Visit.query("/h", limit=30)]

    async def main():
        r = Visit.aquery("/h", limit=30)
        got = [v.at async for v in r]
        n = await Visit.acount("/h")
        item = await Visit.aget("/h", 5)
        await Visit("/h", 1000).asave()
        await item.adelete()
        return got, r.next_page_token, n, item

    got, token, n, item = asyncio.run(main())
    assert got == sync
    assert n == 100
    assert item.at == 5
    assert Visit.count("/h") == 100
    assert [v.at for v in Visit.query("/h", limit=30)] == [v for v in sync if v != 5] + [30]
