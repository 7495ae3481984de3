"""Django integration: add ``"pynamodb_sharding.contrib.django"`` to ``INSTALLED_APPS``.

It gives ``manage.py pynamodb_sharding ...``, the library's command line run after Django is
set up (so a models module that also holds ORM models imports), and
:class:`~pynamodb_sharding.contrib.django.testing.DynamoDBTestMixin` for Django's test runner.

.. versionadded:: 0.1.0
"""
