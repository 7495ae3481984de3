"""Checkpoints: how far each parallel-scan segment of a job has got, kept in a DynamoDB table.

One item per (job, segment): the scan position to resume from (the ``LastEvaluatedKey`` of the
last page whose writes all completed), whether the segment is done, and its running counts.
Kept in DynamoDB so that workers on several hosts (a Kubernetes indexed Job, an AWS Batch
array job, Spark tasks) share them. The table is created on first use, on-demand billing, in
the account and region of the job's source model.

A checkpoint is written only after every write of its page succeeded: a worker killed before
that re-reads the page and writes it again, which changes nothing (copies overwrite the same
keys; moved items are no longer where they were).
"""

from __future__ import annotations

import time
from typing import Any

import attrs
from botocore.exceptions import ClientError

from pynamodb_sharding._exceptions import MigrationError

__all__ = ["DEFAULT_CHECKPOINT_TABLE", "Checkpoint", "CheckpointStore"]

#: The checkpoint table a job uses unless told otherwise (``--checkpoint-table``).
DEFAULT_CHECKPOINT_TABLE = "pynamodb_sharding_migrations"

_HASH, _RANGE = "job", "segment"
#: The ``segment`` of a job's item that numbers its passes (segments count from 0).
_PASSES = -1
_COUNTS = ("read", "written", "moved", "skipped", "waiting", "conflicts", "undecodable", "units", "read_units")


@attrs.frozen
class Checkpoint:
    """Where one segment of one job stands."""

    segment: int
    #: The scan's ``ExclusiveStartKey`` to resume from; ``None``: from the start (or done).
    position: dict[str, Any] | None = None
    done: bool = False
    #: Running totals over every run of this segment (``read``, ``written``, ``moved``, ...).
    counts: dict[str, float] = attrs.field(factory=dict)


class CheckpointStore:
    """Reads and writes the checkpoints of jobs in one table, through a botocore DynamoDB client.

    Args:
        client: a botocore DynamoDB client (the job uses its source model's).
        table_name: the checkpoint table, created by :meth:`ensure_table` if missing.
    """

    def __init__(self, client: Any, table_name: str = DEFAULT_CHECKPOINT_TABLE) -> None:
        self.client = client
        self.table_name = table_name

    def ensure_table(self) -> None:
        """Create the checkpoint table (on-demand billing) unless it exists; wait until active.

        Raises:
            MigrationError: a table of that name exists with another key schema.
        """
        try:
            description = self.client.describe_table(TableName=self.table_name)["Table"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            try:
                self.client.create_table(
                    TableName=self.table_name,
                    KeySchema=[{"AttributeName": _HASH, "KeyType": "HASH"},
                               {"AttributeName": _RANGE, "KeyType": "RANGE"}],
                    AttributeDefinitions=[{"AttributeName": _HASH, "AttributeType": "S"},
                                          {"AttributeName": _RANGE, "AttributeType": "N"}],
                    BillingMode="PAY_PER_REQUEST",
                )
            except ClientError as race:  # another worker created it first
                if race.response.get("Error", {}).get("Code") != "ResourceInUseException":
                    raise
            self._wait_active()
            return
        schema = {entry["AttributeName"]: entry["KeyType"] for entry in description["KeySchema"]}
        if schema != {_HASH: "HASH", _RANGE: "RANGE"}:
            msg = (
                f"the checkpoint table {self.table_name!r} exists with key schema {schema}, not "
                f"(job HASH, segment RANGE); name another table with --checkpoint-table."
            )
            raise MigrationError(msg)
        if description.get("TableStatus") != "ACTIVE":
            self._wait_active()

    def _wait_active(self) -> None:
        for _ in range(600):
            status = self.client.describe_table(TableName=self.table_name)["Table"].get("TableStatus")
            if status == "ACTIVE":
                return
            time.sleep(0.1)

    def load(self, job_id: str, segment: int) -> Checkpoint:
        """The checkpoint of ``segment`` (an empty one if the segment never ran), read consistently."""
        reply = self.client.get_item(
            TableName=self.table_name,
            Key={_HASH: {"S": job_id}, _RANGE: {"N": str(segment)}},
            ConsistentRead=True,
        )
        item = reply.get("Item")
        if item is None:
            return Checkpoint(segment=segment)
        position = item.get("position", {}).get("M")
        counts = {name: float(item[name]["N"]) for name in _COUNTS if name in item}
        return Checkpoint(segment=segment, position=position, done=item.get("done", {}).get("BOOL", False),
                          counts=counts)

    def load_all(self, job_id: str, total_segments: int) -> list[Checkpoint]:
        """The checkpoints of segments ``0..total_segments - 1``."""
        return [self.load(job_id, segment) for segment in range(total_segments)]

    def save(self, job_id: str, checkpoint: Checkpoint) -> None:
        """Record ``checkpoint`` (replacing the segment's previous one)."""
        item: dict[str, Any] = {
            _HASH: {"S": job_id},
            _RANGE: {"N": str(checkpoint.segment)},
            "done": {"BOOL": checkpoint.done},
            "updated_at": {"N": repr(time.time())},
        }
        if checkpoint.position is not None:
            item["position"] = {"M": checkpoint.position}
        for name, value in checkpoint.counts.items():
            item[name] = {"N": repr(float(value))}
        self.client.put_item(TableName=self.table_name, Item=item)

    def generation(self, job_id: str) -> int:
        """The number of the job's current pass (0 before its first pass is finished and run again)."""
        reply = self.client.get_item(TableName=self.table_name,
                                     Key={_HASH: {"S": job_id}, _RANGE: {"N": str(_PASSES)}}, ConsistentRead=True)
        item = reply.get("Item")
        return int(item["generation"]["N"]) if item and "generation" in item else 0

    def advance(self, job_id: str, seen: int) -> int:
        """Start pass ``seen + 1`` of the job, unless another run started a newer pass since
        ``seen`` was read; returns the job's current pass either way."""
        condition = ("attribute_not_exists(#g)" if seen == 0 else "#g = :seen")
        values = {} if seen == 0 else {"ExpressionAttributeValues": {":seen": {"N": str(seen)}}}
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={_HASH: {"S": job_id}, _RANGE: {"N": str(_PASSES)}, "generation": {"N": str(seen + 1)},
                      "updated_at": {"N": repr(time.time())}},
                ConditionExpression=condition, ExpressionAttributeNames={"#g": "generation"}, **values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return self.generation(job_id)
        return seen + 1

    def reset(self, job_id: str, total_segments: int) -> None:
        """Forget the job's checkpoints, so the next run starts from the beginning."""
        for segment in range(total_segments):
            self.client.delete_item(TableName=self.table_name,
                                    Key={_HASH: {"S": job_id}, _RANGE: {"N": str(segment)}})
