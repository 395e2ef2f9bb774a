"""A model name as a call reports it, resolved to the (provider, model) that bills it.

Frameworks that route calls name the model in the router's form, not the provider's:
LiteLLM and everything built on it (the OpenAI Agents SDK's LiteLLM model, Google ADK's
``LiteLlm``, CrewAI) say ``anthropic/claude-sonnet-4-6``, ``bedrock/converse/us.anthropic.…``,
``vertex_ai/claude-…@…``, ``gemini/gemini-2.5-flash``, ``openrouter/anthropic/…``; Google's
SDKs say ``models/gemini-…`` or a Vertex resource name (``projects/…/publishers/google/models/…``);
AWS tools pass Bedrock ARNs. The provider attribute beside such a name is often the client
library's (``llm.system=openai`` for an OpenAI-shaped client calling Anthropic through LiteLLM).

The rule, for a source no test names: the outermost route a name carries is who bills the call
(``openrouter/anthropic/…`` is billed by OpenRouter), and it wins over the provider attribute;
without a route the attribute stands. What is left is the provider's own model id. A name that
resolves to a model the price book knows is priced like that model (a property test holds it).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["resolve"]

# Router prefixes (LiteLLM's provider names, which ADK, CrewAI and the Agents SDK pass on) -> the
# OpenTelemetry provider name (gen_ai.provider.name) where it has one, else the price book's id.
_ROUTES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "text-completion-openai": "openai",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "deepseek": "deepseek",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "groq": "groq",
    "perplexity": "perplexity",
    "cerebras": "cerebras",
    "openrouter": "openrouter",
    "together_ai": "together",
    "fireworks_ai": "fireworks",
}
# Providers whose own model ids never hold a slash: after their route, only the last segment is
# the id (``bedrock/converse/…``, ``bedrock/invoke/…``, ``vertex_ai/…/models/…``). The others
# (OpenRouter, Together, Fireworks, Groq...) use ``vendor/model`` ids of their own.
_FLAT_IDS = {"anthropic", "openai", "azure.ai.openai", "aws.bedrock", "gcp.vertex_ai", "gcp.gemini", "x_ai"}
# arn:aws:bedrock:REGION:ACCOUNT:foundation-model/ID or :inference-profile/ID (a provisioned or
# application profile's ARN names no model: it stays as it is, unpriced and flagged).
_BEDROCK_ARN = re.compile(r"arn:aws[\w-]*:bedrock:[\w-]*:\d*:(?:foundation-model|inference-profile)/(?P<id>[^/\s]+)$")
# Google's resource names: models/ID, publishers/P/models/ID, projects/…/locations/…/publishers/P/models/ID.
_GOOGLE_RESOURCE = re.compile(
    r"^(?:projects/[^/]+/locations/[^/]+/)?(?:publishers/(?P<publisher>[^/]+)/)?models/(?P<id>[^/]+)$"
)


@lru_cache(maxsize=4096)  # a batch names a handful of models over and over
def resolve(provider: str, model: str) -> tuple[str, str]:
    """The (provider, model id) billing a call reported as ``model`` beside the provider attribute
    ``provider`` ("" when the span has none). Names in no routing form come back as they are."""
    name = model.strip()
    routed = ""
    if arn := _BEDROCK_ARN.match(name):
        name, routed = arn["id"], "aws.bedrock"
    while "/" in name:
        head, rest = name.split("/", 1)
        route = _ROUTES.get(head.lower())
        if route is None:
            break
        routed = routed or route  # the outermost route bills the call
        name = rest
        if route in _FLAT_IDS and not _ROUTES.get(rest.split("/", 1)[0].lower()):
            name = rest.rsplit("/", 1)[-1]
    if google := _GOOGLE_RESOURCE.match(name):
        name = google["id"]
        routed = routed or ("gcp.vertex_ai" if google["publisher"] else "")
    return (routed or provider), name
