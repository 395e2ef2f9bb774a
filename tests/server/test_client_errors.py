"""``ServerClient``: every failure comes out as one kind of ``ledger.errors``, named by the route."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collector.client import ServerClient
from ledger.budgets import BudgetError, UnknownBudget
from ledger.errors import InputError, NotFound, ServerError, Unavailable


class _Answers(BaseHTTPRequestHandler):
    """Answers every request with the status named by the last path segment: ``/.../404``."""

    def _answer(self) -> None:
        status = int(self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1])
        body = json.dumps({"error": f"said {status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def client() -> Iterator[ServerClient]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield ServerClient(f"http://127.0.0.1:{server.server_address[1]}", token="")
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, InputError),
        (404, NotFound),
        (401, ServerError),
        (429, Unavailable),
        (503, Unavailable),
        (500, ServerError),
    ],
)
def test_query_routes_raise_the_kind_of_the_status(client, status, error):
    with pytest.raises(error) as err:
        client.query(str(status))
    assert type(err.value) is error and f"query '{status}': said {status}" in str(err.value)
    if error is ServerError:
        assert err.value.status == status


def test_budget_routes_raise_the_budget_errors_and_a_401_says_which_token(client):
    with pytest.raises(BudgetError, match=r"^said 400$"):
        client.budget("400")
    with pytest.raises(UnknownBudget, match=r"^said 404$"):
        client.remove_budget("404")
    with pytest.raises(ServerError, match="set TURNLEDGER_TOKEN"):
        client.budget("401")


def test_a_missing_context_is_none_and_an_absent_server_says_what_to_do(client):
    assert client.context("t", "404") is None
    with pytest.raises(ServerError, match=r"cannot reach the turnledger server.*unset TURNLEDGER_SERVER"):
        ServerClient("http://127.0.0.1:9").budgets()  # nothing listens on the discard port
