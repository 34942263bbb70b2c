"""The Airflow UI, driven in a real browser: login, trigger with the form, the run, the report.

Airflow (`tests/airflow_server.py`) runs on loopback with its own home and one tiny pipeline;
Playwright drives Debian's Chromium (`make test` installs it with `scripts/install-test-tools.sh`).
Each step leaves a screenshot in `docs/screenshots/`, which the guide shows (docs/airflow.md).
"""

from __future__ import annotations

import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.airflow_server import REPO, AirflowServer, AirflowStartError, start_airflow, stop_airflow
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse, fk_join_oracle

pytestmark = [pytest.mark.airflow, pytest.mark.browser, pytest.mark.timeout(1800)]

SCREENSHOTS = REPO / "docs" / "screenshots"
PIPELINE, VIEW = "shop", "display_products"
DAG_ID = f"lakejoin_{PIPELINE}"
USER, PASSWORD = "admin", "lakejoin-ui-test"
STARTUP_SECONDS, RUN_SECONDS = 300, 900


def _spec(lake: Lakehouse) -> str:
    return f"""\
pipeline: {PIPELINE}
storage: {lake.root / "store"}
sources:
  products:  {{path: {lake.path("products")},  key: product_id}}
  merchants: {{path: {lake.path("merchants")}, key: merchant_id}}
views:
  {VIEW}:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name]}}
"""


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory) -> tuple[Lakehouse, Path]:
    """Two tiny source tables and the spec of one view over them, in the pipelines folder."""
    root = tmp_path_factory.mktemp("airflow_ui")
    lake = Lakehouse(spark, root / "lake")
    products = [("p1", "Bolt", 1.5, "m1"), ("p2", "Nut", 0.5, "m2"), ("p3", "Gear", 9.0, "m9")]
    lake.create("products", PRODUCTS, products)
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt & Nut Co.", "b.png")])
    spec_file = root / "pipelines" / f"{PIPELINE}.yaml"
    spec_file.parent.mkdir()
    spec_file.write_text(_spec(lake))
    return lake, spec_file


@pytest.fixture(scope="module")
def airflow(shop):
    _, spec_file = shop
    root = spec_file.parent.parent
    try:
        server = start_airflow(
            root, pipelines=spec_file.parent, user=USER, password=PASSWORD, startup_seconds=STARTUP_SECONDS
        )
    except AirflowStartError as error:
        pytest.fail(str(error), pytrace=False)
    yield server
    survivors = stop_airflow(server)
    assert not survivors, f"Airflow processes still alive after SIGKILL: {survivors}"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import expect, sync_playwright

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("no Chromium on PATH: run scripts/install-test-tools.sh (make test does)", pytrace=False)
    # Assertions wait as long as page actions do: on two busy cores the SPA can take more than
    # Playwright's default 5 s to render a page (stop 28's CI run failed on a run page still loading).
    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=binary, headless=True)
        yield playwright, chromium
        chromium.close()


# --- the steps ------------------------------------------------------------------------------


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def _api(playwright, ui: AirflowServer):
    """A REST client authenticated with a token from the simple auth manager's /auth/token."""
    anonymous = playwright.request.new_context(base_url=ui.url)
    answer = anonymous.post("/auth/token", data={"username": USER, "password": PASSWORD})
    assert answer.ok, f"POST /auth/token: {answer.status} {answer.text()}"
    token = answer.json()["access_token"]
    anonymous.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    return playwright.request.new_context(base_url=ui.url, extra_http_headers=headers)


def _wait_for_dag(api, ui: AirflowServer) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if api.get(f"/api/v2/dags/{DAG_ID}").ok:
            return
        time.sleep(1)
    pytest.fail(f"{DAG_ID} was not parsed in {STARTUP_SECONDS} s\n{ui.logs()}", pytrace=False)


def _wait_for_run(api, ui: AirflowServer) -> dict:
    """The DAG's only run once it has finished (the scheduler moves it; the UI just shows it)."""
    deadline = time.monotonic() + RUN_SECONDS
    runs: list[dict] = []
    while time.monotonic() < deadline:
        runs = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns").json()["dag_runs"]
        if runs and runs[0]["state"] in ("success", "failed"):
            return runs[0]
        time.sleep(2)
    pytest.fail(f"no finished run of {DAG_ID} after {RUN_SECONDS} s: {runs}\n{ui.logs()}", pytrace=False)


def _anonymous_is_refused(playwright, page, ui: AirflowServer) -> None:
    from playwright.sync_api import expect

    anonymous = playwright.request.new_context(base_url=ui.url)
    refused = anonymous.get("/api/v2/dags")
    anonymous.dispose()
    assert refused.status in (401, 403), f"anonymous GET /api/v2/dags answered {refused.status}"
    page.goto("/dags")
    expect(page, "an anonymous visit to /dags must land on the login page").to_have_url(
        re.compile(r"/auth/login")
    )
    expect(page.get_by_label("Username")).to_be_visible()
    _shot(page, "01-login-required")


def _log_in_and_open_the_dag(page) -> None:
    from playwright.sync_api import expect

    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page, "the login was not accepted").not_to_have_url(re.compile(r"/auth/login"))
    page.goto("/dags")
    page.get_by_placeholder(re.compile("Search Dags")).fill(DAG_ID)
    dag_link = page.get_by_role("link", name=DAG_ID, exact=True)
    expect(dag_link, f"{DAG_ID} is not in the DAG list").to_be_visible()
    _shot(page, "02-dags")
    dag_link.click()
    # The list has "Trigger Dag" buttons too: wait for the DAG page's own tabs, or a click can
    # open the list's dialog just before the DAG page replaces it.
    expect(page.get_by_role("link", name="Overview", exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/dags/{DAG_ID}"))
    task_link = page.get_by_role("link", name=VIEW, exact=True)
    expect(task_link, f"the DAG page does not show task {VIEW}").to_be_visible()
    expect(page.get_by_text("Failed Runs")).to_be_visible()


def _turn_on(dialog, name: str | re.Pattern) -> None:
    """Check the form's checkbox `name`: the input is hidden under its styled label, which takes
    the click (Playwright's `check()` sees the overlay intercept it)."""
    from playwright.sync_api import expect

    exact = isinstance(name, str)
    checkbox = dialog.get_by_role("checkbox", name=name, exact=exact)
    if not checkbox.is_checked():
        # `has=` is matched inside each label, so it must not start from the dialog again.
        dialog.locator("label", has=dialog.page.get_by_role("checkbox", name=name, exact=exact)).click()
    expect(checkbox).to_be_checked()


def _click_until_posted(page, button, path: str, tries: int = 3) -> None:
    """Click `button` until the page sends a POST to `path`, then wait for the API server's
    answer. A click that lands while the form's script is still loading on two busy cores is
    dropped, with no request at all (CI at 9100463: no POST reached the API server in 30 s); a
    click that did send one is never repeated, so no second run is created. The answer itself
    can take longer than 30 s while two Spark JVMs share the cores (session 37: the request
    left the page, the dialog was still open 30 s later, and the server had not logged it)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    def posted(r) -> bool:  # noqa: ANN001 - a playwright Request
        return r.method == "POST" and path in r.url

    for attempt in range(tries):
        try:
            with page.expect_request(posted, timeout=10_000) as sent:
                button.click()
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            continue
        answer = sent.value.response()  # waits for the server, however long it takes
        assert answer is not None and answer.ok, (
            f"the API server refused the trigger: {answer and answer.status}"
        )
        return


def _trigger_with_full_refresh(page) -> None:
    """The trigger form is built from the DAG's Params: fields are found by their names."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name=re.compile(DAG_ID))).to_be_visible()
    _turn_on(dialog, "full_refresh")
    # A new DAG is paused; the form unpauses it on trigger (the default, made sure of here).
    unpause = re.compile(f"Unpause {DAG_ID}")
    if dialog.get_by_role("checkbox", name=unpause).count():
        _turn_on(dialog, unpause)
    _shot(page, "04-trigger-form")
    _click_until_posted(page, dialog.get_by_role("button", name="Trigger", exact=True), "/dagRuns")
    # The dialog closes once the API server has created the run: on two busy cores that can take
    # longer than an assertion's default 5 s (CI, stop 27: the run was created, the check gave up).
    expect(dialog, "the trigger dialog did not close: the form was refused").to_be_hidden()


def _assert_the_view_was_built(lake: Lakehouse, spec_file: Path, ui: AirflowServer) -> int:
    """The output equals a from-scratch join at the pinned versions; return the batch id."""
    from lakejoin.engine.batch import batch_log
    from lakejoin.spec.parse import load_spec

    spec = load_spec(spec_file)
    record = batch_log(spec).last_committed(VIEW)
    assert record is not None, f"no committed batch of {VIEW}\n{ui.logs()}"
    expected = fk_join_oracle(
        lake.rows_at("products", record.pinned_versions["products"]),
        lake.rows_at("merchants", record.pinned_versions["merchants"]),
        join=spec.views[VIEW].fk_join,
        left_key="product_id",
        right_key="merchant_id",
    )
    assert lake.output(spec, VIEW) == expected
    return record.batch_id


def _open_the_quality_report(playwright, page, ui: AirflowServer, batch_id: int) -> None:
    """The reports plugin (plugins/lakejoin_reports.py): the pipeline's index links to the
    view's page, which lists the batch, whose report shows its checks. Anonymous is refused."""
    from playwright.sync_api import expect

    index = f"/lakejoin/reports/{PIPELINE}/"
    page.goto(index)
    view_link = page.get_by_role("link", name=VIEW, exact=True).first
    expect(view_link, f"no link to {VIEW}'s report on {index}: is the reports plugin loaded?").to_be_visible()
    _shot(page, "06-quality-index")
    _open_the_plan(page, index)
    view_link = page.get_by_role("link", name=VIEW, exact=True).first
    view_link.click()
    batch_row = page.get_by_role("row").filter(has=page.get_by_role("cell", name=str(batch_id), exact=True))
    expect(batch_row, f"{VIEW}'s report page does not list batch {batch_id}").to_be_visible()
    expect(batch_row, "the batch was not a full refresh").to_contain_text(re.compile("full.refresh"))
    _shot(page, "07-quality-view")
    batch_row.get_by_role("link").first.click()
    batch = re.compile(rf"batch\W*0*{batch_id}\b", re.IGNORECASE)
    expect(page.get_by_role("heading", name=batch), f"no report page of batch {batch_id}").to_be_visible()
    expect(page.get_by_text(re.compile("passed")).first, "the batch's checks did not pass").to_be_visible()
    _shot(page, "08-quality-batch")

    anonymous = playwright.request.new_context(base_url=ui.url)
    for url in (index, page.url):
        answer = anonymous.get(url, max_redirects=0)
        location = answer.headers.get("location", "")
        to_login = answer.status in (302, 303, 307) and "/auth/login" in location
        assert answer.status in (401, 403) or to_login, (
            f"anonymous GET {url} answered {answer.status}: the report must require a login"
        )
    anonymous.dispose()


def _open_the_plan(page, index: str) -> None:
    """The index links to the plan page (issue 54), which says what the view's next batch would
    do and why: after the run that built it, with no source changed since, nothing new."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="Plan", exact=True).click()
    heading = page.get_by_role("heading", name=re.compile(rf"^Plan\W+pipeline {PIPELINE}$"))
    expect(heading, "the pipeline's index links to no plan page").to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=VIEW, exact=True))
    expect(row, f"the plan does not say that {VIEW} has nothing new").to_contain_text("nothing new")
    expect(page.get_by_text(re.compile(r"no new versions since batch \d+")).first).to_be_visible()
    _shot(page, "10-plan")
    page.goto(index)


def _open_data_docs_offline(chromium, spec_file: Path, batch_id: int) -> None:
    """GE's Data Docs index, opened from its files with the network cut off, lists the batch's
    validations and is styled: every script and style comes with the site (issue 40)."""
    from playwright.sync_api import expect

    from lakejoin.spec.layout import reports_root
    from lakejoin.spec.parse import load_spec

    index = reports_root(load_spec(spec_file)) / "data_docs" / "index.html"
    context = chromium.new_context(offline=True, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    remote: list[str] = []
    page.on("request", lambda asked: None if asked.url.startswith("file:") else remote.append(asked.url))
    page.goto(index.as_uri())
    run = page.get_by_role("cell", name=re.compile(rf"batch-0*{batch_id}$")).first
    expect(run, f"Data Docs offline list no validation of batch {batch_id}").to_be_visible()
    assert remote == [], f"Data Docs asked the network for {remote}"
    font = page.evaluate("() => getComputedStyle(document.body).fontFamily")
    assert "Segoe UI" in font, f"Data Docs are not styled by their bootstrap (body font: {font})"
    _shot(page, "09-data-docs-offline")
    context.close()


@contextmanager
def _explained_failures(page, ui: AirflowServer):
    """A failing step keeps the page (screenshot and HTML) and shows the Airflow logs' tails."""
    try:
        yield
    except Exception as error:
        shot, html = ui.root / "failure.png", ui.root / "failure.html"
        page.screenshot(path=str(shot))
        html.write_text(page.content())
        raise AssertionError(f"{error}\nat {page.url}; the page: {shot}, {html}\n{ui.logs()}") from error


def test_the_ui_runs_a_pipeline_and_shows_its_quality_report(shop, airflow, browser):
    """Login required; trigger with full_refresh from the form; the run succeeds and builds the
    view; the data-quality report shows the batch."""
    from playwright.sync_api import expect

    playwright, chromium = browser
    api = _api(playwright, airflow)
    _wait_for_dag(api, airflow)
    context = chromium.new_context(base_url=airflow.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    with _explained_failures(page, airflow):
        _anonymous_is_refused(playwright, page, airflow)
        _log_in_and_open_the_dag(page)
        _trigger_with_full_refresh(page)

        run = _wait_for_run(api, airflow)
        assert run["state"] == "success", f"run {run['dag_run_id']}: {run['state']}"
        assert run["conf"].get("full_refresh") is True, f"the form did not set full_refresh: {run['conf']}"
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run['dag_run_id'], safe='')}")
        expect(page.get_by_text(re.compile(r"^success$", re.IGNORECASE)).first).to_be_visible()
        _shot(page, "05-run-succeeded")
        batch_id = _assert_the_view_was_built(*shop, airflow)
        page.goto(f"/dags/{DAG_ID}")  # the DAG with its run, for the guide
        expect(page.get_by_role("link", name=VIEW, exact=True)).to_be_visible()
        _shot(page, "03-dag")

        _open_the_quality_report(playwright, page, airflow, batch_id)
        _open_data_docs_offline(chromium, shop[1], batch_id)
    api.dispose()
    context.close()
