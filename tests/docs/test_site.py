"""The book in docs/ as `./run docs` serves it: `mkdocs build --strict`, the old README's every section in it,
and its home page and API reference in headless Chromium with nothing fetched from off the machine."""

from __future__ import annotations

import functools
import html
import os
import re
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.stack import ROOT

DOCS = ROOT / "docs"
ARTIFACTS = ROOT / ".artifacts"
# The section headings of README.md before it moved into docs/ (`git show 4f4ed09:README.md`), one a line.
OLD_README_HEADINGS = Path(__file__).with_name("readme_headings.txt")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-5000:]
    return out


def built_page(site: Path, source: Path) -> Path:
    """Where mkdocs writes the page of docs/<source> (directory URLs)."""
    stem = source.relative_to(DOCS).with_suffix("")
    return site / ("index.html" if stem.as_posix() == "index" else stem / "index.html")


def sources() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def headings(page: Path) -> list[str]:
    found = re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", page.read_text(), flags=re.DOTALL)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).replace("¶", "").split()) for _, text in found]


def test_the_site_builds_strict_with_every_page_in_it(site, record_property):
    pages = {source: built_page(site, source) for source in sources()}
    assert [source for source, page in pages.items() if not page.is_file()] == []
    lines = [f"{page.relative_to(site).as_posix():<40} {headings(page)[0]}" for page in pages.values()]
    record_property("summary", f"docs site: {len(lines)} pages built by mkdocs build --strict\n" + "\n".join(lines))


def test_every_section_of_the_old_readme_is_in_the_site(site):
    in_site = {heading for page in site.rglob("*.html") for heading in headings(page)}
    old = [line.replace("`", "") for line in OLD_README_HEADINGS.read_text().splitlines() if line.strip()]
    assert len(old) == 32
    assert [heading for heading in old if heading not in in_site] == []


def test_the_home_page_and_the_api_reference_render_offline_in_chromium(site):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium", pytrace=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    left: list[str] = []

    def route(route):
        if route.request.url.startswith((url, "data:", "blob:")):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route("**/*", route)
            page.goto(url)
            page.get_by_role("heading", name="What is in this book").wait_for(timeout=15_000)
            assert page.locator("nav.md-nav--primary").get_by_text("Getting started").count() >= 1
            assert page.get_by_alt_text("The ocrq web page with linn.png read").evaluate("i => i.naturalWidth") > 500
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "site-home.png"))
            page.goto(url + "api/reference/")
            operations = page.frame_locator("iframe.swagger-ui-iframe").locator(".opblock")
            operations.first.wait_for(timeout=15_000)
            assert operations.count() >= 10
            browser.close()
    finally:
        server.shutdown()
    assert left == []


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass
