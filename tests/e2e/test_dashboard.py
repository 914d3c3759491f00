"""Issue 27 part 3: `koordqueue dashboard` in a real browser, against the real API server.

The dashboard runs as an operator starts it (`koordqueue dashboard --kubeconfig K --port 0`,
a process of its own) with a ServiceAccount's token bound to deploy/dashboard-viewer.yaml
only (read RBAC: it cannot write, and needs nothing more); Debian's headless Chromium, driven
by chromedriver, opens the page. The test checks what a person sees: the quota tree's rows and
numbers against the Queues' usage annotations, the pending units in the order of the
controller's own round (the visibility API, as `kubectl get --raw` answers it) with their
reasons, explain, and a quota edit arriving on the open page without a reload. Screenshots are
kept as artefacts ($KOORDQUEUE_ARTEFACTS, default build/artefacts/).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain import names
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.visibility_served import BASE, queue_unit, serving

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000")
VIEWER_ROLE = "koordqueue-dashboard-viewer"


def artefacts() -> Path:
    path = Path(os.environ.get("KOORDQUEUE_ARTEFACTS") or ROOT / "build" / "artefacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def served(kubectl: Any, kubeconfig: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningController]:
    with serving(kubectl, kubeconfig, tmp_path_factory.mktemp("visibility")) as rc:
        yield rc


@pytest.fixture(scope="module")
def viewer_kubeconfig(kubectl: Any, kubeconfig: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admin kubeconfig with a ServiceAccount's token bound to the viewer role only."""
    ns, account = names.QUEUE_NAMESPACE, kq.unique("dashboard-viewer")
    kubectl("apply", "-f", str(ROOT / "deploy" / "dashboard-viewer.yaml"))
    kubectl("create", "serviceaccount", account, "-n", ns)
    kubectl("create", "clusterrolebinding", account, f"--clusterrole={VIEWER_ROLE}",
            f"--serviceaccount={ns}:{account}")
    token = kubectl("create", "token", account, "-n", ns, "--duration=1h").stdout.strip()
    config = yaml.safe_load(kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path = tmp_path_factory.mktemp("viewer") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def dashboard(served: RunningController, viewer_kubeconfig: Path) -> Iterator[str]:
    """`koordqueue dashboard` as a process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "koordqueue.cli.main", "dashboard", "--kubeconfig",
         str(viewer_kubeconfig), "--port", "0", "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        deadline, line = time.monotonic() + 30, ""
        while "serving http://" not in line and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
            line = proc.stdout.readline() if ready else ""
            assert ready and line, f"no URL from the dashboard (exit {proc.poll()})"
        yield line.split("serving ", 1)[1].split()[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        err = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium through its chromedriver (.ci/run installs both)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{missing} missing: apt-get install -y chromium chromium-driver"
    profile = tempfile.mkdtemp(prefix="kq-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def cells(driver: Any, selector: str) -> list[list[str]]:
    """The text of each cell of each row `selector` matches, as the page shows them."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map("
        "r => [...r.cells].map(c => c.textContent.trim()))", selector)
    return rows


def unless_stale(read: Callable[[], Any]) -> Callable[[], Any]:
    """`read`, answering None when the element it found was replaced before it was used (the
    page re-renders as the watch pushes: StaleElementReferenceException); for kq.wait_for."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt() -> Any:
        try:
            return read()
        except StaleElementReferenceException:
            return None

    return attempt


def quota_cells(driver: Any, quota: str) -> dict[str, str]:
    header = ["quota", "resource", "min", "max", "used", "bar", "split", "kind", "pending",
              "queue"]
    found = cells(driver, f'#quota-tree tr[data-quota="{quota}"][data-resource="cpu"]')
    return dict(zip(header, found[0], strict=True)) if found else {}


def usage(kubectl: Any, quota: str, key: str) -> int:
    queue = kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, names.QUEUE_NAMESPACE) or {}
    annotations = (queue.get("metadata") or {}).get("annotations") or {}
    return int(json.loads(annotations.get(key) or "{}").get("cpu", 0))


def test_the_page_shows_the_tree_the_order_and_a_quota_edit_live(
    kubectl: Any, dashboard: str, browser: Any
) -> None:
    ns = kq.namespace(kubectl, kq.unique("dash"))
    org, team = kq.unique("dash-org"), kq.unique("dash-team")
    kubectl.apply(kq.quota(org, min_={"cpu": "2"}, max_={"cpu": "4"},
                           labels={names.QUOTA_IS_PARENT_LABEL: "true"}))
    kubectl.apply(kq.quota(team, min_={"cpu": "1"}, max_={"cpu": "2"}, parent=org))
    kubectl.apply(queue_unit("running", ns, team, "2"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "running") == "Dequeued", what="running admitted")
    # two that do not fit, the lower priority one named first: the page must not sort by name
    kubectl.apply(queue_unit("alpha", ns, team, "1", priority=1))
    kubectl.apply(queue_unit("zeta", ns, team, "1", priority=5))

    def round_order() -> list[str] | None:
        doc = json.loads(kubectl("get", "--raw", f"{BASE}/queues/{team}/queueunits").stdout)
        order = [i["metadata"]["name"] for i in doc["items"]]
        return order if len(order) == 2 else None

    assert kq.wait_for(round_order, what="both pending in the round") == ["zeta", "alpha"]

    started = time.monotonic()
    browser.get(dashboard)

    def shown() -> dict[str, str] | None:
        row = quota_cells(browser, team)
        pending = cells(browser, f'[data-queue="{team}"] tr[data-unit]')
        return row if row.get("used") == "2" and len(pending) == 2 else None

    row = kq.wait_for(shown, timeout=20, what="the team's row and its pending units")
    assert (row["quota"], row["min"], row["max"], row["used"], row["pending"]) == (
        team, "1", "2", "2", "2")
    guaranteed = usage(kubectl, team, names.QUEUE_GUARANTEED_USED_ANNOTATION)
    assert row["kind"] == f"{guaranteed} / {2 - guaranteed}"  # the Queue's own split
    parent = quota_cells(browser, org)
    assert (parent["min"], parent["max"], parent["used"], parent["split"], parent["pending"]) == (
        "2", "4", "2", "0 / 2", "2")  # nothing of its own, all its child's
    tree = [r[0] for r in cells(browser, "#quota-tree tr[data-quota]") if r[0]]
    assert tree.index(org) + 1 == tree.index(team)  # the child right under its parent

    pending = cells(browser, f'[data-queue="{team}"] tr[data-unit]')
    assert [(r[0], r[2], r[6]) for r in pending] == [
        ("1", "zeta", "QuotaExceeded"), ("2", "alpha", "QuotaExceeded")]
    admitted = cells(browser, "#admitted-units tr[data-unit]")
    assert [ns, "running", team] in [r[:3] for r in admitted]

    explain = f'tr[data-unit="{ns}/zeta"] button.explain'
    kq.wait_for(unless_stale(
        lambda: browser.find_element("css selector", explain).click() or True),
        timeout=10, what="zeta's explain clicked")
    def explained() -> str | None:
        shown = str(browser.find_element("id", "explain-text").text)
        return shown if "zeta" in shown else None

    text = kq.wait_for(unless_stale(explained), timeout=10, what="zeta explained")
    assert "QuotaExceeded" in text
    browser.save_screenshot(str(artefacts() / "dashboard.png"))

    browser.execute_script("window.notReloaded = true;")
    kubectl("patch", "elasticquotas.scheduling.sigs.k8s.io", team, "-n", "default",
            "--type=merge", "-p", json.dumps({"spec": {"max": {"cpu": "4"}}}))

    def edited() -> dict[str, str] | None:
        row = quota_cells(browser, team)
        left = cells(browser, f'[data-queue="{team}"] tr[data-unit]')
        return row if (row.get("max"), row.get("used"), left) == ("4", "4", []) else None

    kq.wait_for(edited, timeout=20, what="the edit and its admissions on the page")
    assert browser.execute_script("return window.notReloaded === true")  # same page, no reload
    admitted_names = {r[1] for r in cells(browser, "#admitted-units tr[data-unit]")
                      if r[0] == ns}
    assert admitted_names == {"running", "zeta", "alpha"}
    assert kq.wait_for(unless_stale(lambda: browser.find_element("id", "status").text),
                       timeout=5, what="the status line") == "live"
    browser.save_screenshot(str(artefacts() / "dashboard-after-edit.png"))
    print(f"dashboard seen and updated in {time.monotonic() - started:.1f} s")
