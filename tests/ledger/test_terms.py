"""One definition of the price terms and of each table's columns.

The declarations in ``ledger.tables`` are checked against the schema the
migrations build, and a price term added to ``TERMS`` (plus the migration
``add_term_columns`` writes for it, the two steps adding a term takes) reaches
the schema, the charge rows, the SQL sums, the runs rebuild and the report
with no other change.
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest

from collector.demo.samples import build
from ledger import rows, schema, terms
from ledger.ingest import ingest
from ledger.pricing import PriceBook, TokenCounts
from ledger.report import build_report, format_report
from ledger.store import open_ledger
from ledger.tables import USD, WRITTEN, table
from ledger.terms import PriceTerm, usd_sum

FAKE = PriceTerm(
    "fake_term", "fake_term_tokens", "usd_fake_term", "fake term", "#000000", "fake_term_mtok", True, Decimal("2")
)
FAKE_TOKENS = 1_000  # on every call; five_turn_run runs on claude-opus-5 ($5 input): the fake term costs $10 / MTok
FAKE_USD = Decimal("0.01")
REAL_TERMS = usd_sum()  # the terms before the fake one (read at import, before a test adds it)


def _live_columns(con, name):
    return con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [name],
    ).fetchall()


@pytest.mark.parametrize("name", [*WRITTEN, "runs", "evaluations"])
def test_every_table_declaration_matches_the_live_schema(ledger, name):
    assert _live_columns(ledger, name) == [(c.name, c.sql_type) for c in table(name).columns]


def test_building_rows_does_not_load_duckdb():
    code = (
        "import sys\n"
        "from ledger import conventions as c\n"
        "from ledger.rows import prepare\n"
        "from ledger.spans import SpanRecord\n"
        "attrs = {c.OPERATION_NAME: 'chat', c.PROVIDER_NAME: 'anthropic', c.REQUEST_MODEL: 'claude-opus-5',\n"
        "         c.INPUT_TOKENS: 10, c.OUTPUT_TOKENS: 5}\n"
        "span = SpanRecord('1' * 32, '2' * 16, 'chat claude-opus-5', 1, 2, attributes=attrs)\n"
        "batch = prepare([span]).to_arrow()\n"
        "assert batch.tables['charges'].num_rows == 1, batch.tables\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'duckdb'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_token_counts_refuse_a_term_the_registry_does_not_know():
    with pytest.raises(TypeError, match="'cache_write_2h'"):
        TokenCounts(cache_write_2h=1)


def _add_fake_term(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two steps of adding a term: its entry in TERMS and its migration."""
    monkeypatch.setattr(terms, "TERMS", (*terms.TERMS, FAKE))
    version = schema.MIGRATIONS[-1][0] + 1
    migration = (version, "fake price term", schema.add_term_columns("fake_term"))
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, migration])


@pytest.fixture
def fake_term(monkeypatch):
    _add_fake_term(monkeypatch)
    counted = rows.model_call

    def with_fake_tokens(span):  # the normalizer reads this count from the span, once the convention exists
        call = counted(span)
        if call is not None:
            call.tokens.by_term["fake_term"] = FAKE_TOKENS
        return call

    monkeypatch.setattr(rows, "model_call", with_fake_tokens)


def test_a_new_price_term_reaches_the_schema_the_charges_the_sums_and_the_runs(fake_term, tmp_path):
    con = open_ledger(tmp_path / "fresh.duckdb")
    for name in ("charges", "runs"):
        assert _live_columns(con, name)[-2:] == [("fake_term_tokens", "BIGINT"), ("usd_fake_term", USD)]

    ingest(con, build("five_turn_run"), PriceBook.default())  # a price book built with the term: files price it
    charges = con.execute("SELECT model, fake_term_tokens, usd_fake_term FROM charges").fetchall()
    assert len(charges) == 5
    assert set(charges) == {("claude-opus-5", FAKE_TOKENS, FAKE_USD)}

    (real, summed) = con.execute(f"SELECT sum({REAL_TERMS}), sum({usd_sum()}) FROM charges").fetchone()
    assert summed == real + 5 * FAKE_USD
    run = con.execute("SELECT fake_term_tokens, usd_fake_term, usd_total FROM runs").fetchall()
    assert run == [(5 * FAKE_TOKENS, 5 * FAKE_USD, summed)]


def test_a_new_term_migration_upgrades_a_ledger_in_place(tmp_path, monkeypatch):
    path = tmp_path / "old.duckdb"
    with open_ledger(path) as con:
        ingest(con, build("five_turn_run"))
        (before,) = con.execute("SELECT usd_total FROM runs").fetchone()
    _add_fake_term(monkeypatch)
    with open_ledger(path) as con:  # opening migrates: the term's columns, 0 in every row already there
        assert con.execute("SELECT DISTINCT fake_term_tokens, usd_fake_term FROM charges").fetchall() == [(0, 0)]
        assert con.execute("SELECT fake_term_tokens, usd_fake_term, usd_total FROM runs").fetchall() == [(0, 0, before)]


def test_a_new_price_term_reaches_the_report(fake_term, tmp_path):
    con = open_ledger(tmp_path / "fresh.duckdb")
    ingest(con, build("five_turn_run"), PriceBook.default())
    (total,) = con.execute(f"SELECT sum({usd_sum()}) FROM charges").fetchone()
    report = build_report(con)
    assert report["total_usd"] == float(round(total, 10))
    assert report["where_the_money_went"]["share_fake_term"] == pytest.approx(float(5 * FAKE_USD / total))
    assert sum(report["where_the_money_went"].values()) == pytest.approx(1)
    (model,) = report["models"]
    assert (model["usd_fake_term"], model["usd_total"]) == (float(5 * FAKE_USD), float(round(total, 10)))
    assert "fake term" in format_report(report)
