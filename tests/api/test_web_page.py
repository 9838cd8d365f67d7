"""The web page at / in real headless Chromium, against `ocrq serve` on the embedded default."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.documents.hostile import pdf_of, text_page
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.pages import PARAGRAPHS, column_page
from tests.support.pdf_checks import poppler_text
from tests.support.stack import ROOT
from tests.support.text import cer

ARTIFACTS = ROOT / ".artifacts"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium", pytrace=False)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1280, "height": 900}, accept_downloads=True,
        )
        yield context
        context.close()


@pytest.fixture()
def page(browser, embedded_server):
    page = browser.new_page()
    page.goto(embedded_server.url + "/")
    yield page
    page.close()


def test_upload_a_scan_and_read_its_text(page, embedded_server, samples):
    page.get_by_label("API key").fill(embedded_server.key)
    page.get_by_label("choose files").set_input_files(str(samples / "linn.png"))

    result = page.get_by_label("Text of linn.png", exact=True)
    # Generous: on 2 busy cores one page has taken 20 s, and the first also loads the models.
    result.get_by_text("LinnSequencer").first.wait_for(timeout=240_000)
    assert "LinnSequencer" in result.inner_text()
    assert page.locator(".status").inner_text() == "succeeded"
    progress = page.get_by_label("Pages read of linn.png")
    assert progress.evaluate("p => [p.value, p.max]") == [1, 1]
    assert page.locator(".count").inner_text() == "1 / 1 pages"
    # The page image beside the text is the uploaded file, decoded by the browser.
    assert page.get_by_alt_text("Page image of linn.png").evaluate("img => img.naturalWidth") > 500

    with page.expect_download() as download:
        page.get_by_role("button", name="Download text of linn.png").click()
    assert download.value.suggested_filename == "linn.txt"
    assert "LinnSequencer" in Path(download.value.path()).read_text()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download JSON of linn.png").click()
    assert '"pages"' in Path(download.value.path()).read_text()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download searchable PDF of linn.png").click()
    assert download.value.suggested_filename == "linn.pdf"
    assert "LinnSequencer" in poppler_text(Path(download.value.path()))

    storage = page.evaluate("() => [sessionStorage.getItem('ocrq.apiKey'), localStorage.length, document.cookie]")
    assert storage == [embedded_server.key, 0, ""]

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web.png"), full_page=True)


def test_pages_show_as_they_are_read_and_your_jobs_lists_them(page, embedded_server, tmp_path):
    # Full pages of scanned text: three strips were read within one 0.7 s poll on a fast CPU, and the job ended
    # before the page had shown any page on its own; a text layer would be read at once, so these are pictures.
    body = "\n".join(PARAGRAPHS)
    pdf = pdf_of([text_page(f"Page number {n} of four.\n{body}", font_size=24) for n in (1, 2, 3, 4)],
                 tmp_path / "four-pages.pdf")
    page.get_by_label("API key").fill(embedded_server.key)
    page.get_by_label("choose files").set_input_files(str(pdf))
    result = page.get_by_label("Text of four-pages.pdf", exact=True)
    # The first page's text is shown on its own, before the job has read the other three.
    first = result.locator('section.page-text[data-page="1"]')
    first.wait_for(timeout=240_000)
    assert page.locator(".status").first.inner_text() == "running"
    assert first.inner_text().strip()
    page.locator(".status", has_text="succeeded").first.wait_for(timeout=240_000)
    recent = page.get_by_role("table")
    row = recent.get_by_role("row").filter(has_text="four-pages.pdf").first
    # The list is fetched again once the job ends; until that answer comes, the row still says "queued 0 / 4".
    expect(row).to_contain_text("4 / 4", timeout=30_000)
    page.get_by_role("button", name="Refresh the list").click()
    row.filter(has_text="succeeded").wait_for(timeout=30_000)
    with page.expect_download() as download:
        row.get_by_role("button", name="Download markdown of four-pages.pdf").click()
    assert download.value.suggested_filename == "four-pages.md"


def test_a_two_column_page_reads_in_order(page, embedded_server, tmp_path):
    laid_out = column_page(2, header="Harbour Review, No. 12", footer="Page 3 of 9")
    laid_out.image.save(tmp_path / "two-columns.png")
    page.get_by_label("API key").fill(embedded_server.key)
    page.get_by_label("choose files").set_input_files(str(tmp_path / "two-columns.png"))

    result = page.get_by_label("Text of two-columns.png", exact=True)
    result.locator("h1").wait_for(timeout=240_000)
    # The title is a heading; each paragraph is one <p>, in the order of the columns, whole across a column break.
    assert result.locator("h1").inner_text() == "The Northern Quay"
    paragraphs = result.locator("p:not(.page-marker)").all_inner_texts()
    assert paragraphs[0] == "Harbour Review, No. 12" and paragraphs[-1] == "Page 3 of 9"
    assert len(paragraphs) == len(PARAGRAPHS) + 2
    for shown, drawn in zip(paragraphs[1:-1], PARAGRAPHS, strict=True):
        assert cer(drawn, shown) <= 0.02, shown
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "two-columns.png"), full_page=True)


def test_a_refused_key_is_explained(page, samples):
    page.get_by_label("API key").fill("ocrq_not_a_key")
    page.get_by_label("choose files").set_input_files(str(samples / "linn.png"))
    error = page.locator(".job .error")
    error.wait_for(timeout=10_000)
    assert "API key was refused" in error.inner_text()


def test_a_rejected_file_says_why_and_waits_for_nothing(page, embedded_server, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a document")
    page.get_by_label("API key").fill(embedded_server.key)
    page.get_by_label("choose files").set_input_files(str(notes))
    error = page.locator(".job .error")
    error.wait_for(timeout=10_000)
    assert error.inner_text().startswith("Not accepted: ") and "(415)" not in error.inner_text()
    assert page.locator(".job .status").inner_text() == "rejected"
    assert page.get_by_label("Text of notes.txt", exact=True).inner_text() == "Nothing will be read from this file."
    assert not page.get_by_role("group", name="Downloads for notes.txt").is_visible()
    assert "Waiting" not in page.locator(".job").inner_text()


def test_without_a_key_nothing_is_sent(page, samples):
    page.get_by_label("choose files").set_input_files(str(samples / "linn.png"))
    assert "Paste an API key" in page.get_by_role("alert").first.inner_text()
    assert page.locator(".job").count() == 0


HOSTILE = """# Title <script>alert(1)</script>
<img src=x onerror="alert(2)"> and <b onclick="x()">bold?</b>
[click](javascript:alert(3)) [ok](https://example.org/?a=1&b="2") ![pic](https://example.org/p.png)
<table onclick="x()"><tr><td colspan="2" style="color:red">cell</td></tr></table>
<iframe src="https://example.org"></iframe><svg onload=alert(4)>
**strong** *em* `<code>` ~~gone~~

<!-- ocrq:page 2 -->
| a | b |
|---|---|
| 1 | <i>2</i> |

<!-- ocrq:page 3 failed: engine <busy> -->
"""


def test_the_markdown_renderer_only_emits_its_own_tags(page):
    report = page.evaluate("""text => {
        const box = document.createElement('div');
        box.innerHTML = window.ocrqMarkdown.render(text);
        const all = [...box.querySelectorAll('*')];
        return {
            tags: [...new Set(all.map(e => e.tagName.toLowerCase()))].sort(),
            attrs: [...new Set(all.flatMap(e => [...e.attributes].map(a => a.name)))].sort(),
            hrefs: [...box.querySelectorAll('a')].map(a => a.getAttribute('href')),
            td: [...box.querySelectorAll('td')].map(td => [td.getAttribute('colspan'), td.textContent]),
            text: box.textContent,
            h1: box.querySelector('h1').textContent,
        };
    }""", HOSTILE)
    assert set(report["tags"]) <= {"h1", "p", "a", "strong", "em", "code", "del", "div", "table", "thead", "tbody",
                                   "tr", "th", "td"}
    assert set(report["attrs"]) <= {"href", "rel", "target", "class", "colspan"}
    assert report["hrefs"] == ['https://example.org/?a=1&b="2"', "https://example.org/p.png"]
    assert report["h1"] == "Title <script>alert(1)</script>"
    assert ["2", "cell"] in report["td"] and [None, "<i>2</i>"] in report["td"]
    # The table's own attributes are dropped, not shown; the <b onclick> stays visible text.
    assert "color:red" not in report["text"] and report["text"].count("onclick") == 1
    assert "<img src=x onerror" in report["text"] and "Page 2" in report["text"]
    assert "Page 3 could not be read: engine <busy>" in report["text"]


def test_every_control_has_a_label_and_the_page_sets_a_csp(page, embedded_server):
    unnamed = page.evaluate("""() => [...document.querySelectorAll('input, select, button')]
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
        .map(e => e.outerHTML)""")
    assert unnamed == []
    assert page.evaluate("document.documentElement.lang") == "en"
    response = httpx.get(embedded_server.url + "/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert httpx.get(embedded_server.url + "/static/markdown.js").headers["content-type"].startswith(
        ("text/javascript", "application/javascript"))



def _offline(page) -> list[str]:
    """Refuse every request that leaves loopback, and list them."""
    left: list[str] = []

    def route(route):
        if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()
    page.route("**/*", route)
    return left


def test_swagger_ui_and_redoc_work_offline(browser, embedded_server):
    page = browser.new_page()
    left = _offline(page)
    page.goto(embedded_server.url + "/docs")
    page.locator(".opblock-summary-path", has_text="/jobs/{job_id}/result").first.wait_for(timeout=30_000)
    assert page.locator(".opblock").count() >= 10
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs.png"))
    assert left == []

    page.goto(embedded_server.url + "/redoc")
    page.get_by_role("heading", name="Create Job").first.wait_for(timeout=30_000)
    page.close()
    # ReDoc's own "powered by" badge is the one thing it may fetch from outside (whether it has asked by the time
    # the heading shows varies); offline it just does not show.
    assert set(left) <= {"https://cdn.redoc.ly/redoc/logo-mini.svg"}, left
    icon = httpx.get(embedded_server.url + "/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"


def test_a_pages_table_shows_as_a_table_and_downloads_as_xlsx(page, embedded_server, tmp_path):
    from openpyxl import load_workbook

    from tests.support.table_pages import INVOICE, draw_table

    image, _ = draw_table(INVOICE)
    image.save(tmp_path / "invoice.png")
    page.get_by_label("API key").fill(embedded_server.key)
    page.get_by_label("choose files").set_input_files(str(tmp_path / "invoice.png"))
    result = page.get_by_label("Text of invoice.png", exact=True)
    cell = result.locator("table td", has_text="Granite blocks")
    cell.first.wait_for(timeout=240_000)
    assert result.locator("table tr").count() == len(INVOICE)
    expect(page.get_by_role("button", name="Download tables (XLSX) of invoice.png")).to_be_enabled(timeout=60_000)
    with page.expect_download() as download:
        page.get_by_role("button", name="Download tables (XLSX) of invoice.png").click()
    assert download.value.suggested_filename == "invoice.xlsx"
    sheet = load_workbook(io.BytesIO(Path(download.value.path()).read_bytes())).active
    assert [c.value for c in sheet[5]] == ["Iron rings", 6, 31.75, 190.5]
    with page.expect_download() as download:
        page.get_by_role("button", name="Download tables (CSV) of invoice.png").click()
    assert download.value.suggested_filename == "invoice.csv"
