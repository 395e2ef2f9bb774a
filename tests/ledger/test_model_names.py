"""Any routing form of a priced model name is priced as the model (ledger.model_names, #43).

Frameworks built on LiteLLM (the OpenAI Agents SDK, Google ADK, CrewAI) name the model as the router
does (``anthropic/claude-sonnet-4-6``), often beside the client library's provider attribute
(``llm.system=openai``); Google's SDKs and AWS tools use resource names and ARNs. Each form must
be charged what the provider bills for the model it names. The expected dollars come from
genai-prices itself (``calc_price``), never from the ledger's price book.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

from genai_prices import Usage, calc_price, data_snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ingest import ingest
from ledger.normalize import model_call
from ledger.pricing import PriceBook
from ledger.spans import SpanRecord
from ledger.store import open_ledger

T0 = 1_790_000_000_000_000_000
WHEN = datetime.fromtimestamp(T0 / 1e9, UTC)
INPUT, OUTPUT = 12_345, 678
BOOK = PriceBook.default()


def _genai_usd(provider_id: str, model: str) -> Decimal | None:
    """What genai-prices charges for the call, or None if it does not price the model at T0."""
    try:
        price = calc_price(Usage(input_tokens=INPUT, output_tokens=OUTPUT), model_ref=model, provider_id=provider_id,
                           genai_request_timestamp=WHEN)  # fmt: skip
    except LookupError:
        return None
    return Decimal(str(price.total_price))


def _priced_ids(provider_id: str, keep: str) -> list[str]:
    """The provider's model ids genai-prices prices (less those the shipped price file overrides)."""
    snapshot = data_snapshot.get_snapshot()
    models = next(p for p in snapshot.providers if p.id == provider_id).models
    overridden = {o.name for o in BOOK.overrides}
    return sorted(
        m.id for m in models if re.match(keep, m.id) and m.id not in overridden and _genai_usd(provider_id, m.id)
    )


# The billing provider's price-book id -> (models it prices, routing forms of a model id M, provider
# attributes seen beside them: the route's own, a client library's, LiteLLM's, none).
_FORMS = {
    "anthropic": (["anthropic/{m}"], ["anthropic", "openai", "litellm", ""]),
    "openai": (["openai/{m}"], ["openai", "litellm", ""]),
    "google": (
        ["gemini/{m}", "vertex_ai/{m}", "projects/p-1/locations/us-central1/publishers/google/models/{m}"],
        ["gcp.gemini", "openai", "litellm", ""],
    ),
    "aws": (
        ["bedrock/{m}", "bedrock/converse/{m}", "arn:aws:bedrock:us-east-1::foundation-model/{m}"],
        ["aws.bedrock", "openai", "litellm", ""],
    ),
}
_MODELS = {
    "anthropic": _priced_ids("anthropic", r"^claude-[a-z0-9.\-]+$"),
    "openai": _priced_ids("openai", r"^(gpt|o\d)[a-z0-9.\-]*$"),
    "google": _priced_ids("google", r"^gemini-[a-z0-9.\-]+$"),
    "aws": _priced_ids("aws", r"^(?:[a-z]+\.)?(anthropic|amazon|meta)\.[a-z0-9.\-:]+$"),
}


def _span(provider: str, model: str, *, openinference: bool = False) -> SpanRecord:
    if openinference:  # the OpenAI Agents SDK's LiteLLM model under OpenInference
        attrs: dict[str, object] = {"openinference.span.kind": "LLM", "llm.model_name": model, "llm.system": provider,
                                    "llm.token_count.prompt": INPUT, "llm.token_count.completion": OUTPUT}  # fmt: skip
    else:
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": provider,
                 "gen_ai.usage.input_tokens": INPUT, "gen_ai.usage.output_tokens": OUTPUT}  # fmt: skip
    attrs = {k: v for k, v in attrs.items() if v != ""}
    return SpanRecord("a" * 32, "b" * 16, f"chat {model}", T0, T0 + 10**9, "", "CLIENT", attributes=attrs)


@st.composite
def _routed(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(billing provider id, model id, the name a framework reports, the provider attribute beside it)."""
    billing = draw(st.sampled_from(sorted(_MODELS)))
    forms, attributes = _FORMS[billing]
    model = draw(st.sampled_from(_MODELS[billing]))
    return billing, model, draw(st.sampled_from(forms)).format(m=model), draw(st.sampled_from(attributes))


def test_every_provider_has_models_to_route() -> None:
    assert all(len(models) >= 3 for models in _MODELS.values()), {k: len(v) for k, v in _MODELS.items()}


@settings(max_examples=400, deadline=None)
@given(_routed(), st.booleans())
def test_any_routing_form_of_a_priced_model_is_priced_as_the_model(
    routed: tuple[str, str, str, str], openinference: bool
) -> None:
    billing, model, name, attribute = routed
    call = model_call(_span(attribute, name, openinference=openinference))
    assert call is not None and call.model == model, (name, call)
    priced = BOOK.price(call.provider, call.model, call.tokens, WHEN)
    assert not priced.unpriced, f"{name!r} beside provider {attribute!r} left unpriced"
    assert priced.total == _genai_usd(billing, model), (name, attribute, call.provider)


def test_the_openai_agents_sdk_and_adk_names_for_claude_are_charged_as_claude() -> None:
    """The two $0 rows of #43's table, through ingest: a charge of claude-sonnet-4-6, priced, by anthropic."""
    con = open_ledger(":memory:")
    agents_sdk = _span("openai", "anthropic/claude-sonnet-4-6", openinference=True)
    adk = SpanRecord("c" * 32, "d" * 16, "call_llm", T0, T0 + 10**9, "", "CLIENT", attributes={
        **_span("anthropic", "anthropic/claude-sonnet-4-6").attributes, "gen_ai.response.id": "msg_adk"})  # fmt: skip
    ingest(con, [agents_sdk, adk])
    rows = con.execute(
        "SELECT provider, model, unpriced, usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h "
        "FROM charges ORDER BY trace_id"
    ).fetchall()
    expected = _genai_usd("anthropic", "claude-sonnet-4-6")
    assert rows == [("anthropic", "claude-sonnet-4-6", False, expected)] * 2


def test_names_in_no_routing_form_are_kept_as_reported() -> None:
    for name in ("my-org/my-finetune", "ft:gpt-4o:acme::abc", "arn:aws:bedrock:us-east-1:1:provisioned-model/x1"):
        call = model_call(_span("", name))
        assert call is not None and call.model == name
