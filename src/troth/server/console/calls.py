"""The console's protocol requests, sent through the server's own ``POST /`` handler.

Every action and every protocol read the console makes is a standard request envelope
carrying the visitor's token, handed to ``troth.server.rpc.Rpc`` as if it had come over the
wire: the same decoding, the same authentication and scoping (401/403), the same engine.
So the console can do nothing its visitor could not do with ``troth`` or an SDK.
"""

from __future__ import annotations

import itertools

from troth.protocol.envelope import decode_response, encode_request
from troth.protocol.kinds import Kind
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.server.rpc import Rpc


class Calls:
    def __init__(self, rpc: Rpc) -> None:
        self._rpc = rpc
        self._corr = itertools.count(1)

    async def __call__(self, kind: Kind, data: Data, token: str | None) -> Reply:
        body = encode_request(kind, data, f"console-{next(self._corr)}", auth=token)
        _, response = await self._rpc(body)
        return decode_response(response).reply
