"""OTLP metric payloads (protobuf and JSON encodings) -> ``ledger.metrics.MetricPoint``.

Both encodings are parsed by the official generated class (``ExportMetricsServiceRequest``);
OTLP/JSON through ``json_format`` once its hex ids (in exemplars) are rewritten
(``collector.otlp_json_ids``). Attributes are read and bounded as span attributes are
(``collector.otlp``). Number points of ``Sum`` and ``Gauge`` metrics become points; the points
of other kinds (histograms, summaries) are counted as points with a problem, so the exporter
is told they were not stored.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from ledger.errors import MalformedInput
from ledger.metrics import CUMULATIVE, DELTA, GAUGE, MetricPoint

from .otlp import _Budget, _pb_attrs, _SpanProblem
from .otlp_json_ids import base64_ids

__all__ = ["decode_metrics_json", "decode_metrics_protobuf"]

_TEMPORALITY = {
    metrics_pb2.AGGREGATION_TEMPORALITY_DELTA: DELTA,
    metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE: CUMULATIVE,
}
_NOT_NUMBERS = ("histogram", "exponential_histogram", "summary")


def decode_metrics_protobuf(body: bytes) -> list[MetricPoint]:
    request = ExportMetricsServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise MalformedInput(f"not an OTLP ExportMetricsServiceRequest protobuf: {exc}") from None
    return _points(request)


def decode_metrics_json(body: bytes | str) -> list[MetricPoint]:
    """Points of an OTLP/JSON request; a body of the wrong shape raises MalformedInput."""
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise MalformedInput(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceMetrics"), list):
        raise MalformedInput("not OTLP/JSON metrics: expected an object with a `resourceMetrics` list")
    _exemplar_ids(doc)
    request = ExportMetricsServiceRequest()
    try:
        json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise MalformedInput(f"not an OTLP/JSON ExportMetricsServiceRequest: {str(exc)[:200]}") from None
    return _points(request)


def _exemplar_ids(doc: Any, where: str = "request", depth: int = 0) -> None:
    """Rewrite every exemplar's hex ids (the only ids a metrics request holds) for ``json_format``."""
    if depth > 12:  # exemplars sit 7 levels down; anything deeper is left to the parser to refuse
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "exemplars" and isinstance(value, list):
                for i, exemplar in enumerate(value):
                    if isinstance(exemplar, dict):
                        base64_ids(exemplar, f"{where}.exemplars[{i}]")
            elif isinstance(value, (dict, list)):
                _exemplar_ids(value, f"{where}.{key}", depth + 1)
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            _exemplar_ids(item, f"{where}[{i}]", depth + 1)


def _points(request: ExportMetricsServiceRequest) -> list[MetricPoint]:
    out: list[MetricPoint] = []
    budget = _Budget()
    for i, rm in enumerate(request.resource_metrics):
        try:
            resource = _pb_attrs(rm.resource.attributes, budget)
        except _SpanProblem as exc:
            raise MalformedInput(f"resourceMetrics[{i}].resource: {exc}") from None
        budget.end_span()
        for sm in rm.scope_metrics:
            scope_name, scope_version = sm.scope.name, sm.scope.version
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind in _NOT_NUMBERS:
                    for dp in getattr(metric, kind).data_points:
                        out.append(
                            MetricPoint(metric.name, dp.time_unix_nano, 0, problem=f"a {kind} point is not stored")
                        )
                    continue
                if kind == "sum":
                    temporality = _TEMPORALITY.get(metric.sum.aggregation_temporality, "")
                    monotonic, data_points = metric.sum.is_monotonic, metric.sum.data_points
                elif kind == "gauge":
                    temporality, monotonic, data_points = GAUGE, False, metric.gauge.data_points
                else:
                    continue  # a metric with no data
                for dp in data_points:
                    problem = "" if temporality else "a sum point with no aggregation temporality"
                    try:
                        attributes = _pb_attrs(dp.attributes, budget)
                    except _SpanProblem as exc:
                        attributes, problem = {}, f"attributes: {exc}"
                    budget.end_span()
                    value_kind = dp.WhichOneof("value")
                    if value_kind is None:
                        problem = problem or "a point with no value"
                    value = dp.as_int if value_kind == "as_int" else dp.as_double
                    out.append(
                        MetricPoint(
                            name=metric.name,
                            time_ns=dp.time_unix_nano,
                            value=value,
                            temporality=temporality or GAUGE,
                            start_ns=dp.start_time_unix_nano,
                            unit=metric.unit,
                            monotonic=monotonic,
                            attributes=attributes,
                            resource=resource,
                            scope_name=scope_name,
                            scope_version=scope_version,
                            problem=problem,
                        )
                    )
    return out
