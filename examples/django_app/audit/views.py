"""GET a page of a file's accesses (newest first, with the next page's token); POST one."""

import json
import time

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from pynamodb_sharding import CursorError

from .models import AuditLog

PAGE_SIZE = 20


@csrf_exempt
def file_log(request: HttpRequest, file_path: str) -> JsonResponse:
    key = f"/{file_path}"
    if request.method == "POST":
        user_id = json.loads(request.body or b"{}").get("user_id")
        if not isinstance(user_id, str) or not user_id:
            return JsonResponse({"error": "give the user_id as a non-empty string"}, status=400)
        entry = AuditLog(key, time.time_ns() // 1000, user_id=user_id)
        entry.save()
        return JsonResponse({"accessed_at": entry.accessed_at, "shard": entry.shards}, status=201)
    try:
        page = AuditLog.query(key, scan_index_forward=False, limit=PAGE_SIZE,
                              last_evaluated_key=request.GET.get("page"))
    except CursorError:
        return JsonResponse({"error": "the page token is not valid for this file"}, status=400)
    entries = [{"accessed_at": entry.accessed_at, "user_id": entry.user_id} for entry in page]
    return JsonResponse({"entries": entries, "next": page.next_page_token})
