"""Settings of the audit-log example: no ORM tables are needed, DynamoDB holds the data."""

import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example only: set DJANGO_SECRET_KEY")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "auditsite.urls"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "pynamodb_sharding.contrib.django",  # manage.py pynamodb_sharding ...
    "audit",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

# Where the DynamoDB tables are: DynamoDB Local in development (what
# `pynamodb-sharding local serve` prints), None for AWS itself.
DYNAMODB_HOST = os.environ.get("DYNAMODB_HOST")
