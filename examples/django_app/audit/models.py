"""The audit log (DynamoDB, sharded) beside an ordinary Django model (the ORM)."""

from django.conf import settings
from django.db import models
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding


class AuditLog(ShardedModel):
    class Meta:
        table_name = "django_audit_log"
        host = settings.DYNAMODB_HOST
        region = "us-east-1"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)  # microseconds since the epoch
    user_id = UnicodeAttribute()
    # Page tokens are signed with Django's SECRET_KEY, read when a token is made or checked.
    shards = Sharding(RandomShards(8), cursor_secret=lambda: settings.SECRET_KEY)


class WatchedFile(models.Model):
    """An ORM model in the same module: why the CLI must run inside a set-up Django."""

    path = models.CharField(max_length=1024)
