"""The fast path's SigV4 signature is botocore's, byte for byte, for the requests it sends.

botocore signs the same POST (the same headers, body, time, credentials and scope) with its own
``SigV4Auth``; the ``Authorization`` headers must be equal, with and without a session token,
at the endpoint's root and under a path, and across days (the signing key kept per day).
"""

from __future__ import annotations

import datetime
from typing import Any
from unittest import mock

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from pynamodb_sharding._wire import sign

BODY = b'{"TableName":"audit_log","KeyConditionExpression":"#0 = :0","ExpressionAttributeNames":{"#0":"path"},' \
       b'"ExpressionAttributeValues":{":0":{"S":"/shared/a.txt_3"}},"Limit":5,"ReturnConsumedCapacity":"TOTAL"}'
WHEN = datetime.datetime(2026, 12, 3, 18, 4, 5)


def botocore_signature(url: str, headers: dict[str, str], credentials: ReadOnlyCredentials, region: str,
                       when: datetime.datetime) -> str:
    request = AWSRequest(method="POST", url=url, data=BODY, headers=dict(headers))
    with _botocore_clock(when):
        SigV4Auth(credentials, "dynamodb", region).add_auth(request)
    return str(request.headers["Authorization"])


def _botocore_clock(when: datetime.datetime) -> Any:
    """botocore's signing time set to ``when``: its ``get_current_datetime`` (botocore 1.31 on),
    or the ``datetime.datetime.utcnow`` its signers called before (the lowest version we support)."""
    if hasattr(botocore.auth, "get_current_datetime"):
        return mock.patch("botocore.auth.get_current_datetime", return_value=when)
    clock = mock.Mock(wraps=datetime)
    clock.datetime = mock.Mock(wraps=datetime.datetime, utcnow=mock.Mock(return_value=when))
    return mock.patch("botocore.auth.datetime", clock)


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEJr//////////wEaDExampleSessionToken=="])
@pytest.mark.parametrize(("url", "host", "path"), [
    ("https://dynamodb.eu-west-1.amazonaws.com/", "dynamodb.eu-west-1.amazonaws.com", "/"),
    ("http://127.0.0.1:8000/", "127.0.0.1:8000", "/"),
    ("https://gateway.example.com/dynamo db/", "gateway.example.com", "/dynamo db/"),
])
@pytest.mark.parametrize("day", [WHEN, WHEN + datetime.timedelta(days=1)])
def test_the_signature_is_botocores(token: str | None, url: str, host: str, path: str,
                                    day: datetime.datetime) -> None:
    credentials = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    headers = {"Host": host, "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.Query"}
    ours = dict(headers)
    sign(ours, path=path, body=BODY, credentials=credentials, region="eu-west-1", service="dynamodb",
         now=day.replace(tzinfo=datetime.UTC).timestamp())
    expected = botocore_signature(url, {k: v for k, v in headers.items() if k != "Host"}, credentials, "eu-west-1", day)
    assert expected == ours["Authorization"]
    assert day.strftime("%Y%m%dT%H%M%SZ") == ours["X-Amz-Date"]
    assert ours.get("X-Amz-Security-Token") == token
