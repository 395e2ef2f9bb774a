"""AppTest leaves the script it ran installed as ``__main__``; the suite puts the old one back
(``tests.conftest.main_module_kept``), or every process spawned later runs that script first."""

from __future__ import annotations

import multiprocessing
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.conftest import main_module_kept


def test_a_process_spawned_after_an_apptest_run_does_not_run_its_script(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = tmp_path / "app.py"
    script.write_text(f"with open({str(runs)!r}, 'a') as f:\n    f.write('run\\n')\n")
    with main_module_kept():
        AppTest.from_file(str(script), default_timeout=60).run()
        assert sys.modules["__main__"].__file__ == str(script)  # what Streamlit leaves behind
    # As the collector starts a decode worker.
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    child.start()
    child.join(120)  # a hang guard
    assert child.exitcode == 0
    assert runs.read_text().splitlines() == ["run"]  # AppTest's run, none in the spawned process
