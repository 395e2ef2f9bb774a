"""What redaction costs: per KB of text, per span at ingest, and against the libraries it could use.

* **per KB**: ``Redactor.text`` over ordinary code and prose (the 440 KB corpus of
  ``tests/redaction_corpus.py``, in 2 KB pieces, the size of a message) and over the
  same pieces with the corpus's secrets mixed in, µs per KB;
* **per span**: ``ledger.rows.prepare`` of the ingest benchmark's agent spans
  (``benchmarks/agent_workload.py``), without and with captured content, with the
  policy on and with ``redact_content=False``; the difference is what redaction adds;
* **libraries**: phone numbers found by libphonenumber's own matcher over the whole
  text against ours (a cheap candidate scan, then ``phonenumbers`` validates each);
  and with ``--detect-secrets``, detect-secrets' own line scanner (all its default
  plugins, a dependency: ``ledger/redact/plugins.py`` runs some of them as detectors):
  recall on the corpus's secrets, findings on the ordinary text, µs per KB;
* **quality**: the leak rate by kind (each corpus secret in the five contexts of
  ``tests/ledger/test_redact.py``: one leaks when a needle is left) and the
  false-positive rate by data type (``ordinary_by_type``: characters lost over
  2 KB pieces; for the id kinds, ids replaced, and for 16-digit ids those failing Luhn);
  and on labelled code lines (``code_lines``: ~2,500 lines of the standard library that
  look like they could hold a secret and, by the standard library's own reading, hold
  none), the share of lines altered and of characters lost (goal: at most 0.5% each).

Settings alternate round by round; medians are printed with their ranges.

``--baseline TREE`` compares with another checkout instead (e.g. ``git archive d01fe21``,
the policy before detect-secrets and precision): ``redact_text`` µs per KB of the
ordinary text and ``prepare`` µs per span without and with content, each measured in
a fresh process per round (this tree's python, the tree first on the path), baseline
and current alternating, as process CPU time (the machine is shared: other processes'
load is left out), printed as current / baseline ratios (goal: µs per KB at most x1.2);
then the quality figures of both policies side by side (this tree's corpus, the
baseline tree's ``redact_text``), and the goals' figures of this run on one line.

Usage: ``python benchmarks/redaction.py [--rounds N] [--spans N] [--baseline TREE] [--detect-secrets]``.
The end-to-end comparison with an older tree is ``benchmarks/ingest_throughput.py --baseline TREE``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import phonenumbers  # noqa: E402
from stdnum import luhn  # noqa: E402

from benchmarks._common import footer, header  # noqa: E402
from benchmarks.agent_workload import workload  # noqa: E402
from ledger.redact import Redactor, redact_text  # noqa: E402
from ledger.redact.detectors import DETECTORS, TextView  # noqa: E402
from ledger.rows import default_prices, prepare  # noqa: E402
from tests.redaction_corpus import (  # noqa: E402
    CONTEXTS,
    ID_TYPES,
    ORDINARY_FILE,
    PIECE,
    SECRETS,
    code_lines,
    message_pieces,
    ordinary_by_type,
    ordinary_text,
)

Batch = Callable[[list[str]], list[str]]  # texts -> their redacted copies, in order


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


def _with_secrets(pieces: list[str]) -> list[str]:
    """Every piece with one corpus secret written into its middle."""
    out = []
    for i, p in enumerate(pieces):
        secret = SECRETS[i % len(SECRETS)].text
        out.append(f"{p[: PIECE // 2]} {secret} {p[PIECE // 2 :]}")
    return out


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):9.1f}  (range {min(values):.1f}–{max(values):.1f})"


def _rounds(settings: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each setting once per round, in turn, so load changes hit them alike."""
    out: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(rounds):
        for name, measure in settings.items():
            out[name].append(measure())
    return out


def _us_per_kb(texts: list[str], fn: Callable[[str], object]) -> float:
    size_kb = sum(map(len, texts)) / 1024
    start = time.perf_counter()
    for t in texts:
        fn(t)
    return (time.perf_counter() - start) * 1e6 / size_kb


def per_kb(rounds: int) -> None:
    ordinary = _pieces(ordinary_text())
    secrets = _with_secrets(ordinary)
    print(f"\n## Redactor.text, µs per KB ({len(ordinary)} pieces of {PIECE} chars)")
    results = _rounds(
        {
            "ordinary code and prose": lambda: _us_per_kb(ordinary, Redactor().text),
            "same, a secret in every piece": lambda: _us_per_kb(secrets, Redactor().text),
        },
        rounds,
    )
    for name, values in results.items():
        print(f"  {name:40s} {_spread(values)}")
    print("  by detector (ordinary text, its pre-check included):")
    policy = Redactor()
    for d in policy.detectors:
        cost = _us_per_kb(ordinary, lambda t, d=d: d.apply(t) if d.wanted(TextView(t)) else t)
        print(f"    {d.kind:16s} {cost:7.1f}")


def per_span(rounds: int, n_spans: int) -> None:
    prices = default_prices()
    print(f"\n## ledger.rows.prepare, µs per span ({n_spans:,} spans of agent runs)")
    for content in (False, True):
        spans, _ = workload(n_spans, content, seed=3)

        def timed(redact: bool, spans=spans) -> float:
            start = time.perf_counter()
            prepare(spans, prices, redact_content=redact, policy=Redactor() if redact else None)
            return (time.perf_counter() - start) * 1e6 / len(spans)

        results = _rounds({"redacted": lambda: timed(True), "not redacted": lambda: timed(False)}, rounds)
        label = "with content" if content else "without content"
        mid = {k: statistics.median(v) for k, v in results.items()}
        for name, values in results.items():
            print(f"  {label:16s} {name:14s} {_spread(values)}")
        print(f"  {label:16s} redaction adds {mid['redacted'] - mid['not redacted']:.1f} µs/span "
              f"(x{mid['redacted'] / mid['not redacted']:.3f})")  # fmt: skip


def phones(rounds: int) -> None:
    pieces = _pieces(ordinary_text())
    with_phones = [f"{p} call {SECRETS[i % len(SECRETS)].text}" for i, p in enumerate(pieces) if i % 3 == 0]
    ours = next(d for d in DETECTORS if d.kind == "phone")
    assert ours.find is not None

    def matcher(text: str) -> list[object]:
        return list(phonenumbers.PhoneNumberMatcher(text, "US", leniency=phonenumbers.Leniency.VALID))

    print("\n## phone numbers: libphonenumber's matcher vs candidates + phonenumbers.is_valid_number")
    results = _rounds(
        {"PhoneNumberMatcher": lambda: _us_per_kb(pieces, matcher), "ours": lambda: _us_per_kb(pieces, ours.find)},
        rounds,
    )
    for name, values in results.items():
        print(f"  {name:20s} µs/KB {_spread(values)}")
    found = {"PhoneNumberMatcher": sum(len(matcher(t)) for t in with_phones)}
    found["ours"] = sum(len(ours.find(t)) for t in with_phones)
    print(f"  found in {len(with_phones)} pieces with a secret appended (phones among them): {found}")


def detect_secrets() -> None:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    lines = ordinary_text().splitlines()
    with default_settings():
        found = {s.kind: 0 for s in SECRETS}
        totals = dict.fromkeys(found, 0)
        for s in SECRETS:
            totals[s.kind] += 1
            found[s.kind] += any(True for _ in scan_line(s.text))
        sample = lines[:3000]
        start = time.perf_counter()
        flagged = sum(1 for line in sample if any(True for _ in scan_line(line)))
        cost = (time.perf_counter() - start) * 1e6 / (sum(map(len, sample)) / 1024)
    ours = Redactor()
    ours_flagged = sum(1 for line in sample if ours.text(line) != line)
    print("\n## detect-secrets' own line scanner (all its default plugins)")
    print("  corpus secrets found, by kind: " + ", ".join(f"{k} {found[k]}/{totals[k]}" for k in totals))
    print(f"  ordinary lines flagged: {flagged} of {len(sample)} (ours: {ours_flagged}); {cost:,.0f} µs/KB")
    print("  (it reports lines, not spans: what to replace inside a line is not given)")


def _secret_cases() -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, text, needles): each corpus secret in each context."""
    return [(s.name or s.kind, c.format(s.text), s.needles) for s in SECRETS for c in CONTEXTS]


def _ordinary_cases() -> dict[str, list[str]]:
    """Per data type, the texts given to the policy: 2 KB pieces, or one id a line for the id kinds."""
    return {
        kind: text.splitlines() if kind in ID_TYPES else message_pieces(text)
        for kind, text in ordinary_by_type().items()
    }


def _lost(before: str, after: str) -> int:
    if before == after:
        return 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return len(before) - sum(m.size for m in matcher.get_matching_blocks())


def quality(policies: dict[str, Batch]) -> dict[str, dict[str, float]]:
    """Leak rate, and false positives by data type and on labelled code lines, per policy."""
    cases = _secret_cases()
    print(f"\n## leak rate by kind ({len(SECRETS)} secrets x {len(CONTEXTS)} contexts; leaked / cases)")
    leaked: dict[str, dict[str, int]] = {name: {} for name in policies}
    totals: dict[str, int] = {}
    for name, redact in policies.items():
        out = redact([text for _, text, _ in cases])
        for (kind, _, needles), redacted in zip(cases, out, strict=True):
            leaked[name][kind] = leaked[name].get(kind, 0) + any(n in redacted for n in needles)
    for kind, _, _ in cases:
        totals[kind] = totals.get(kind, 0) + 1
    print(f"  {'kind':24s} {'cases':>5s}  " + "  ".join(f"{n:>9s}" for n in policies))
    for kind, n in totals.items():
        print(f"  {kind:24s} {n:5d}  " + "  ".join(f"{leaked[p][kind]:9d}" for p in policies))
    print(
        f"  {'all':24s} {len(cases):5d}  " + "  ".join(f"{sum(leaked[p].values()) / len(cases):9.1%}" for p in policies)
    )

    ordinary = _ordinary_cases()
    print("\n## false positives by data type (characters lost; for ids, ids replaced)")
    print(f"  {'data type':16s} {'chars':>9s}  " + "  ".join(f"{n + ' lost':>14s}" for n in policies))
    for kind, texts in ordinary.items():
        size = sum(map(len, texts))
        row = []
        for redact in policies.values():
            out = redact(texts)
            lost = sum(_lost(a, b) for a, b in zip(texts, out, strict=True))
            cell = f"{lost / size:.3%}"
            if kind in ID_TYPES:
                replaced = [a for a, b in zip(texts, out, strict=True) if a != b]
                cell += f" {len(replaced)}/{len(texts)}"
                if kind == "id_16_digits":
                    failing = sum(not luhn.is_valid("".join(ch for ch in a if ch.isdigit())) for a in replaced)
                    cell += f" ({failing} fail Luhn)"
            row.append(f"{cell:>14s}")
        print(f"  {kind:16s} {size:9,d}  " + "  ".join(row))

    non_secret, held = code_lines()
    size = sum(map(len, non_secret))
    print(
        f"\n## labelled code lines ({len(non_secret):,} non-secret lines of the standard library that look like"
        f" they could hold one, {len(held)} holding personal data or a credential by its form)"
    )
    figures: dict[str, dict[str, float]] = {}
    for name, redact in policies.items():
        out = redact(non_secret)
        altered = [(a, b) for a, b in zip(non_secret, out, strict=True) if a != b]
        caught = sum(a != b for a, b in zip(held, redact(held), strict=True))
        figures[name] = {
            "leak": sum(leaked[name].values()) / len(cases),
            "lines": len(altered) / len(non_secret),
            "chars": sum(_lost(a, b) for a, b in altered) / size,
        }
        print(
            f"  {name:9s} non-secret lines altered {len(altered):4d} ({figures[name]['lines']:.2%}), characters lost"
            f" {figures[name]['chars']:.3%};  held lines redacted {caught}/{len(held)}"
        )
    return figures


# Run in a fresh process with the tree under test first on the path: only APIs both trees have.
_IN_TREE = """
import gzip, json, sys, time
sys.path.insert(0, sys.argv[1])
from benchmarks.agent_workload import workload
from ledger.redact import redact_text
from ledger.rows import default_prices, prepare
what, n, piece = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if what == "redact":  # texts in, their redacted copies out (JSON files)
    texts = json.load(open(sys.argv[5], encoding="utf-8"))
    json.dump([redact_text(t) for t in texts], open(sys.argv[6], "w", encoding="utf-8"))
    print(json.dumps(0))
elif what == "kb":
    text = gzip.decompress(open(sys.argv[5], "rb").read()).decode()
    pieces = [text[i : i + piece] for i in range(0, len(text), piece)]
    redact_text("warm")  # the policy is built once per process, as in a running server
    start = time.process_time()
    for p in pieces:
        redact_text(p)
    print(json.dumps((time.process_time() - start) * 1e6 / (len(text) / 1024)))
else:
    spans, prices = workload(n, what == "content", seed=3)[0], default_prices()
    prepare(workload(n, what == "content", seed=4)[0], prices)  # other runs first: warm, as a running server
    start = time.process_time()
    prepare(spans, prices)
    print(json.dumps((time.process_time() - start) * 1e6 / len(spans)))
"""


def _in_tree(tree: Path, what: str, n_spans: int) -> float:
    argv = [sys.executable, "-c", _IN_TREE, str(tree), what, str(n_spans), str(PIECE), str(ORDINARY_FILE)]
    out = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.splitlines()[-1]))


def _tree_batch(tree: Path) -> Batch:
    """``redact_text`` of ``tree``, in a process of its own, over a batch of texts."""

    def redact(texts: list[str]) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            given, taken = Path(tmp) / "in.json", Path(tmp) / "out.json"
            given.write_text(json.dumps(texts), encoding="utf-8")
            argv = [sys.executable, "-c", _IN_TREE, str(tree), "redact", "0", str(PIECE), str(given), str(taken)]
            subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=True)
            return json.loads(taken.read_text(encoding="utf-8"))

    return redact


def against(baseline: Path, rounds: int, n_spans: int) -> None:
    print(f"\n## this tree vs {baseline} (process CPU time, a fresh process per measure)")
    cost = 0.0
    for what, unit in (
        ("kb", "µs/KB of redact_text"),
        ("plain", "µs/span, no content"),
        ("content", "µs/span, content"),
    ):
        trees = {"baseline": baseline, "current": ROOT}
        results = _rounds({k: lambda t=t, w=what: _in_tree(t, w, n_spans) for k, t in trees.items()}, rounds)
        mid = {k: statistics.median(v) for k, v in results.items()}
        for name, values in results.items():
            print(f"  {unit:22s} {name:9s} {_spread(values)}")
        goal = "  (goal <= x1.2)" if what == "kb" else ""
        ratio = mid["current"] / mid["baseline"]
        cost = ratio if what == "kb" else cost
        print(f"  {unit:22s} current / baseline x{ratio:.3f}{goal}")
    figures = quality({"baseline": _tree_batch(baseline), "current": lambda texts: [redact_text(t) for t in texts]})
    now = figures["current"]
    print(
        f"\n## in this run: leak rate {now['leak']:.1%} (goal 0), non-secret code lines altered {now['lines']:.2%}"
        f" and characters {now['chars']:.3%} (goal <= 0.5% each), µs per KB x{cost:.3f} of the baseline (goal <= x1.2)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per comparison (default 3)")
    ap.add_argument("--spans", type=int, default=8_000, help="spans per prepare() workload (default 8000)")
    ap.add_argument("--detect-secrets", action="store_true", help="also run detect-secrets' own line scanner")
    ap.add_argument("--baseline", type=Path, default=None, metavar="TREE", help="compare with this checkout instead")
    a = ap.parse_args()
    header("redaction cost and quality")
    if a.baseline is not None:
        against(a.baseline.resolve(), a.rounds, a.spans)
        return
    per_kb(a.rounds)
    per_span(a.rounds, a.spans)
    phones(a.rounds)
    quality({"current": lambda texts: [redact_text(t) for t in texts]})
    if a.detect_secrets:
        detect_secrets()


if __name__ == "__main__":
    main()
    footer()
