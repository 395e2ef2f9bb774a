"""A decoder worker imports what decoding and row building use, and nothing the server's CLI drags in.

A spawned worker re-runs its parent's ``__main__`` (under ``turnledger up``, the
console script: ``from collector.cli import main``) and imports the modules on
the path to the worker function. Neither may load the command table (budget
rules, every parser), pandas (which pyarrow would import on the first
``pa.array`` of a list), DuckDB (rows are built without it; the writer inserts), the
dashboard's libraries or the budget package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The parent's __main__ is a console script like the one pip writes for `turnledger`.
DRIVER = """
import json, sys
from pathlib import Path
sys.modules["__main__"].__file__ = sys.argv[1]
from collector.receiver.decode_pool import DecodePool
from ledger.pricing import PriceBook
pool = DecodePool(1, PriceBook.default(), True)
batch = pool.prepare(Path(sys.argv[2]).read_bytes(), "application/json")
modules = pool._pool.submit(eval, "sorted(__import__('sys').modules)").result()  # the worker's own
pool.close()
print(json.dumps({"spans": batch.received, "modules": modules}))
"""

NEVER_IN_A_WORKER = (
    "collector.cli.commands",
    "collector.cli.budget",
    "ledger.budgets",
    "ledger.write",
    "duckdb",
    "pandas",
    "streamlit",
    "plotly",
)


def test_a_decoder_worker_loads_no_cli_commands_budgets_duckdb_pandas_or_dashboard(tmp_path):
    script = tmp_path / "turnledger"
    script.write_text("import sys\nfrom collector.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    sample = ROOT / "sample_traces" / "five_turn_run.json"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script), str(sample)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found = json.loads(done.stdout)
    assert found["spans"] > 0
    modules = found["modules"]
    assert "collector.receiver.decode_pool" in modules and "__mp_main__" in modules  # it ran as spawn runs it
    loaded = sorted(m for m in modules if m.startswith(NEVER_IN_A_WORKER))
    assert loaded == []
