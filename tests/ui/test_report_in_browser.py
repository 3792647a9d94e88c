"""The run report as a user meets it: in the Prefect UI, in a real browser.

A real ``prefect server start`` (with its UI) runs on 127.0.0.1; ``python -m flows.train`` runs
against it on a tiny corpus with MLflow tracking in SQLite, so the diagnostics plots exist.
Headless Chromium (Debian's package, driven over the DevTools protocol: ``tests/ui/cdp.py``)
then opens the ``xmc-run-report`` artifact of the top-level ``train`` flow run in both UIs the
server ships: V2 (where ``/`` leads) and V1 (where the flow's "View at" log links lead).

Chromium missing is a failure, not a skip (``tests/ui/conftest.py``). On failure a screenshot
is saved in the test's tmp folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tasks.report import REPORT_KEY
from tests.integration.servers import BIN, REPO, background, base_env, free_port, wait_http
from tests.prefect_db import seed_home
from tests.ui.cdp import Chromium
from xmc_core.evaluation.plots import TITLES

TITLE = "xmc xr_linear training run"
SETS = ["data.synthetic_scale=0.05", "data.rows_per_group=150"]
REPORT_STATE = """(() => {
  const h1 = [...document.querySelectorAll('h1')].find(h => h.innerText.startsWith('xmc '));
  if (!h1) return null;
  const shown = el => el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== 'hidden';
  const root = h1.parentElement;
  return {
    title: shown(h1) ? h1.innerText.trim() : null,
    rows: [...root.querySelectorAll('table tr')].filter(shown)
      .map(tr => [...tr.cells].map(c => c.innerText.trim())),
    images: [...root.querySelectorAll('img')].map(i => ({
      alt: i.alt, complete: i.complete, width: i.naturalWidth, shown: shown(i),
      scheme: (i.getAttribute('src') || '').split(':')[0],
    })),
    text: document.body.innerText,
  };
})()"""


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, prefect_template: Path
) -> Iterator[dict[str, Any]]:
    """A Prefect server with its UI, and one ``python -m flows.train`` run recorded there."""
    root = tmp_path_factory.mktemp("report-ui")
    env = base_env(seed_home(root / "prefect", prefect_template))
    with prefect_ui(env, root / "prefect-server.log") as api:
        env["PREFECT_API_URL"] = api
        work = root / "work"
        cmd = [sys.executable, "-m", "flows.train", "--set", f"work_dir={work}"]
        cmd += [arg for s in SETS for arg in ("--set", s)]
        out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        runs = post(api, "flow_runs/filter", {"flows": {"name": {"any_": ["train"]}}})
        assert len(runs) == 1, runs
        yield {"api": api, "ui": api.removesuffix("/api"), "work": work, "run": runs[0]}


@contextmanager
def prefect_ui(env: dict[str, str], log: Path) -> Iterator[str]:
    """``prefect server start`` with its UI on a free port; yields the API URL.

    The UI asks the API at ``PREFECT_UI_API_URL``; unset, that is ``PREFECT_API_URL`` or else
    ``PREFECT_SERVER_API_HOST``/``PORT`` (4200), never ``--port``: so it is set here.
    """
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    cmd = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with background(cmd, {**env, "PREFECT_UI_API_URL": api}, log) as proc:
        wait_http(f"{api}/health", proc, log)
        yield api


def post(api: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a JSON body to the Prefect REST API; the decoded answer."""
    request = urllib.request.Request(
        f"{api}/{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return list(json.load(resp))


def report_artifact(trained: dict[str, Any]) -> dict[str, Any]:
    """The ``xmc-run-report`` artifact of the top-level ``train`` flow run."""
    run_id = trained["run"]["id"]
    flt = {"key": {"any_": [REPORT_KEY]}, "flow_run_id": {"any_": [run_id]}}
    found = post(trained["api"], "artifacts/filter", {"artifacts": flt})
    assert len(found) == 1, f"no {REPORT_KEY} artifact on the train flow run {run_id}"
    return found[0]


@contextmanager
def browser(tmp_path: Path) -> Iterator[Chromium]:
    """Chromium with one page; a screenshot ``failure.png`` in ``tmp_path`` if the body fails."""
    with Chromium(tmp_path / "chromium") as page:
        try:
            yield page
        except BaseException:
            try:
                print(f"screenshot: {page.screenshot(tmp_path / 'failure.png')}")
            except Exception as error:  # a blank page has no size: keep the first error
                print(f"no screenshot: {error}")
            raise


def test_report_is_attached_to_the_top_level_train_run(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    run = trained["run"]
    assert run["parent_task_run_id"] is None and run["state_type"] == "COMPLETED", run
    assert report_artifact(trained)["type"] == "markdown"
    with browser(tmp_path) as page:  # the run page's Artifacts tab lists the report
        page.navigate(f"{trained['ui']}/v2/runs/flow-run/{run['id']}?tab=Artifacts")
        page.wait_for(f"document.body?.innerText.includes({json.dumps(REPORT_KEY)})", 30)


@pytest.mark.parametrize("ui", ["/v2", ""], ids=["ui-v2", "ui-v1"])
def test_report_renders_with_its_plots(trained: dict[str, Any], tmp_path: Path, ui: str) -> None:
    artifact = report_artifact(trained)
    work = trained["work"]
    plots = json.loads(next(work.glob("artifacts/diagnostics/*/diagnostics.json")).read_text())
    p_at_1 = sorted(
        f"{100 * json.loads(f.read_text())['P@1']:.2f}"
        for f in work.glob("artifacts/evaluation/*/metrics.json")
    )
    assert len(p_at_1) == 2 and sorted(plots["plots"]) == [
        "beam_recall", "k_curves", "recall_by_frequency", "training_loss",
    ]  # fmt: skip
    with browser(tmp_path) as page:
        page.navigate(f"{trained['ui']}{ui}/artifacts/artifact/{artifact['id']}")
        state = page.wait_for(
            f"(s => s?.title && s.images.every(i => i.complete) ? s : null)({REPORT_STATE})", 30
        )
        assert state["title"].startswith(TITLE), state["title"]
        rows = {row[0]: row[1:] for row in state["rows"] if row}
        assert rows["metric (%)"][:2] == ["train", "test"], rows
        assert sorted(rows["P@1"][:2]) == p_at_1, rows  # train and test, as in metrics.json
        images = {i["alt"]: i for i in state["images"]}
        # one image per plot, its alt text the plot's title
        assert sorted(images) == sorted(TITLES[name] for name in plots["plots"]), state["images"]
        for name, image in images.items():
            assert image["scheme"] == "data" and image["shown"], (name, image)
            assert image["complete"] and image["width"] > 0, (name, image)
        assert "mlflow-artifacts:/" not in state["text"]
