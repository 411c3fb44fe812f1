"""The user's HTTP service of the HTTP race in ``bench/peers.py``: one process for every system.

``uvicorn bench.service_app:app --http httptools --loop uvloop`` (``bench.peers_service`` starts
it). Two routes doing the same no-op work (read the body, parse its JSON, answer 204):

- ``POST /jobgate``: Jobgate's pushes, whose Standard Webhooks signature is verified first, as a
  service taking pushes from the internet must (a bad one gets 401).
- ``POST /peer``: the peers' task functions POST ``bench.service_body.BODY`` here (their
  broker is the trust boundary, so nothing is signed).

The endpoint's signing secret is made by the gateway when the harness registers the endpoint,
after this process started, so the harness hands it over with ``PUT /secret``.
"""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.service_body import PATH
from sdk.errors import SignatureError
from sdk.signatures import Verifier

_verifiers: list[Verifier] = []


async def jobgate(request: Request) -> Response:
    body = await request.body()
    try:
        _verifiers[0].verify_lowered(body, dict(request.headers))
    except (IndexError, SignatureError):
        return Response(status_code=401)
    json.loads(body)
    return Response(status_code=204)


async def peer(request: Request) -> Response:
    json.loads(await request.body())
    return Response(status_code=204)


async def secret(request: Request) -> Response:
    _verifiers[:] = [Verifier((await request.body()).decode())]
    return Response(status_code=204)


app = Starlette(
    routes=[
        Route("/jobgate", jobgate, methods=["POST"]),
        Route(PATH, peer, methods=["POST"]),
        Route("/secret", secret, methods=["PUT"]),
    ]
)
