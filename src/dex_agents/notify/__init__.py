"""Tell a person that a session waits for their approval: a signed webhook, ready to use.

`WebhookNotifier(url, secret)` is an `on_interrupt` callable: it POSTs each
`InterruptNotification` as JSON, signed with HMAC-SHA256 over the timestamp
and the body (`X-Dex-Signature: sha256=<hex>`, `X-Dex-Timestamp`), and raises
a `DexAgentsError` unless the receiver answers 2xx, so the engine retries it.
A retry repeats the body's `notification_id` (and `X-Dex-Notification-Id`):
the receiver deduplicates by the body's field, which the signature covers
(`verify_signature` refuses a header that differs from it).

A receiver checks the signature over the raw body before it trusts anything
(here a Starlette or FastAPI route; any framework's header mapping works):

```python
import json

from starlette.requests import Request
from starlette.responses import Response

from dex_agents.notify import WebhookNotifier


async def approvals(request: Request) -> Response:
    body = await request.body()  # the raw bytes: parse only after verifying
    if not WebhookNotifier.verify_signature(SECRET, body, request.headers):
        return Response(status_code=401)  # forged, tampered or replayed
    notification = json.loads(body)
    if not already_seen(notification["notification_id"]):  # a retry repeats it
        ask_someone(notification)
    return Response(status_code=204)
```
"""

from ._webhook import WebhookNotifier

__all__ = ["WebhookNotifier"]
