"""Run by Django's own runner: ``python manage.py test audit`` (DynamoDB Local started once)."""

from django.core.management import call_command
from django.test import SimpleTestCase

from pynamodb_sharding.contrib.django.testing import DynamoDBTestMixin

from .models import AuditLog


class FileLogTests(DynamoDBTestMixin, SimpleTestCase):
    dynamodb_models = [AuditLog]

    def test_pages_come_back_newest_first(self) -> None:
        stamps = []
        for n in range(30):
            response = self.client.post("/files/shared/a.txt/log", {"user_id": f"u{n}"},
                                        content_type="application/json")
            self.assertEqual(response.status_code, 201)
            stamps.append(response.json()["accessed_at"])
        first = self.client.get("/files/shared/a.txt/log").json()
        second = self.client.get("/files/shared/a.txt/log", {"page": first["next"]}).json()
        got = [entry["accessed_at"] for entry in first["entries"] + second["entries"]]
        self.assertEqual(got, sorted(stamps, reverse=True))
        self.assertIsNone(second["next"])
        self.assertGreater(len({item.shards for item in AuditLog.query("/shared/a.txt")}), 1)

    def test_a_foreign_token_is_a_400(self) -> None:
        for _ in range(25):
            self.client.post("/files/a.txt/log", {"user_id": "u"}, content_type="application/json")
        token = self.client.get("/files/a.txt/log").json()["next"]
        self.assertEqual(self.client.get("/files/b.txt/log", {"page": token}).status_code, 400)

    def test_the_cli_runs_inside_django(self) -> None:
        # `status` imports audit.models, which also holds an ORM model: fine once Django is set up.
        call_command("create_audit_tables")  # the table exists already: PynamoDB leaves it
        AuditLog("/hot", 1, user_id="u").save()
        call_command("pynamodb_sharding", "status", "audit.models:AuditLog", "/hot")
