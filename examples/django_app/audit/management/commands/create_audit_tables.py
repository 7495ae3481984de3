"""``manage.py create_audit_tables``: create the DynamoDB tables of the audit log."""

from django.core.management.base import BaseCommand

from audit.models import AuditLog


class Command(BaseCommand):
    help = "Create the audit log's DynamoDB table (and its sharding's companion tables)."

    def handle(self, *args: object, **options: object) -> None:
        AuditLog.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        self.stdout.write(f"created {AuditLog.Meta.table_name}")
