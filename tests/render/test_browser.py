"""The report in a real browser: headless Chromium opens it from file:// with networking off.

Skipped when Chromium is missing, unless BITCASE_REQUIRE_CHROMIUM=1 (then it fails). The
screenshot is saved under test-artifacts/.
"""

import base64
import os
from pathlib import Path

import pytest

from assurance.render.html import RenderOptions, write_report
from tests.render.cdp import Browser, find_chromium
from tests.render.conftest import HOSTILE, make_model

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = find_chromium()
if CHROMIUM is None and os.environ.get("BITCASE_REQUIRE_CHROMIUM") == "1":
    pytest.fail("BITCASE_REQUIRE_CHROMIUM=1 but no chromium binary is installed (apt-get install chromium)",
                pytrace=False)
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium); "
                             "set BITCASE_REQUIRE_CHROMIUM=1 to fail instead")]

VISIBLE_NODES = ("Array.from(document.querySelectorAll('ol.tree > li.node'))"
                 ".filter(e => getComputedStyle(e).display !== 'none').map(e => e.dataset.kind + ':' + "
                 "e.querySelector('.nid').textContent)")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    report = write_report(make_model(hostile=True), out, RenderOptions())
    with Browser(CHROMIUM, tmp_path_factory.mktemp("profile")) as browser:
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.send(f"{domain}.enable")
        browser.send("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1,
                     uploadThroughput=-1)
        browser.send("Page.navigate", url=report.as_uri())
        browser.wait_for("document.readyState === 'complete' && document.documentElement.dataset.reportReady")
        yield browser, report


def test_verdict_and_node_count(page):
    browser, _ = page
    assert browser.evaluate("document.querySelector('.verdict-label').textContent") == "Supported under trust"
    assert browser.evaluate("document.querySelectorAll('ol.tree > li.node:not(.ref)').length") == 8
    assert browser.evaluate("document.querySelector('td[data-metric=nodes]').textContent") == "8"
    assert browser.evaluate("document.querySelector('figure.svg svg') !== null")  # diagram inline


def test_hostile_payload_did_not_run(page):
    browser, _ = page
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.title") == HOSTILE.replace("\x00", "\\x00").replace("\x07", "\\x07") \
        .replace("\u202e", "\\u202e").replace("\ud800", "\\ud800")
    assert browser.evaluate("document.querySelectorAll('script').length") == 3  # data, index data, our script
    assert browser.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0


def test_status_filter_search_collapse_and_deep_link(page):
    browser, _ = page
    browser.evaluate("const s = document.getElementById('f-status'); s.value = 'trusted-unreviewed';"
                     "s.dispatchEvent(new Event('change'))")
    assert browser.evaluate(VISIBLE_NODES) == ["goal:G1", "strategy:S1", "solution:T-gpu"]  # the hit and its path
    assert browser.evaluate("document.documentElement.dataset.visibleNodes") == "1"
    browser.evaluate("document.getElementById('f-clear').click()")
    assert len(browser.evaluate(VISIBLE_NODES)) == 8

    browser.evaluate("const t = document.getElementById('f-text'); t.value = 'SEALED plan';"
                     "t.dispatchEvent(new Event('input'))")
    browser.wait_for("document.documentElement.dataset.visibleNodes === '1'")
    assert browser.evaluate(VISIBLE_NODES)[-1] == "solution:Sn-plan"
    browser.evaluate("document.getElementById('f-clear').click()")

    browser.evaluate("document.querySelector('#n-G1 .tog').click()")
    assert browser.evaluate(VISIBLE_NODES) == ["goal:G1"]
    browser.evaluate("location.hash = '#n-T-gpu'")
    browser.wait_for("getComputedStyle(document.getElementById('n-T-gpu')).display !== 'none'")
    assert "solution:T-gpu" in browser.evaluate(VISIBLE_NODES)

    more = "document.querySelector('#n-T-gpu > div.more')"
    assert browser.evaluate(f"{more}.hidden")
    browser.evaluate("document.querySelector('#n-T-gpu .more-tog').click()")
    assert not browser.evaluate(f"{more}.hidden") and "Rationale" in browser.evaluate(f"{more}.textContent")
    # The hostile summary is 20,000 characters: cut, with the whole text one click away, as text.
    long_summary = "Array.from(document.querySelectorAll('li.problem .long')).find(e => e.textContent.length > 20000)"
    browser.evaluate(f"{long_summary}.querySelector('.more-tog').click()")
    assert browser.evaluate(f"!{long_summary}.querySelector('.full').hidden")
    assert browser.evaluate(f"{long_summary}.querySelector('.full').textContent.endsWith('L'.repeat(20000))")


def test_evidence_index_draws_rows_as_text_pages_and_deep_links(page):
    browser, _ = page
    browser.evaluate("document.getElementById('e-index').open = true")
    browser.wait_for("document.querySelectorAll('#e-index tbody tr').length === 7")
    hostile_ids = browser.evaluate("Array.from(document.querySelectorAll('#e-index tbody code')).map(c => c.textContent)")
    assert any(i.startswith("</script><script>") for i in hostile_ids)  # shown as text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    browser.evaluate("const c = document.getElementById('f-category'); c.value = 'kernel_proof';"
                     "c.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.querySelectorAll('#e-index tbody tr').length") == 2
    browser.evaluate("document.getElementById('f-clear').click(); document.getElementById('e-index').open = false")
    browser.evaluate("location.hash = '#e-cmp-2'")
    browser.wait_for("document.getElementById('e-cmp-2') !== null && document.getElementById('e-index').open")


def test_no_console_errors_no_network_and_a_screenshot(page):
    browser, report = page
    ARTIFACTS.mkdir(exist_ok=True)
    shot = browser.send("Page.captureScreenshot", format="png")
    (ARTIFACTS / "report.png").write_bytes(base64.b64decode(shot["data"]))
    errors = [e for e in browser.events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
    urls = [e["params"]["request"]["url"] for e in browser.events if e["method"] == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(report.as_uri()) for u in urls), urls
