"""The HTML pages in a real browser: Debian's headless Chromium (installed by .ci/run) opens each page;
it must load, its images must load, and the page must log nothing to the console (the pages have no
scripts, so any console message is a failed resource or an error). Also what a reader sees: the table
once, the random floor, readable names and numbers, the command, no absolute paths."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from crosstune.cli import main
from crosstune.report import write_report

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser") if shutil.which(name)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (.ci/run installs Debian's "
                                                           "chromium package: apt-get install -y chromium)")

_CHECKER = """<!doctype html><html><body><pre id="result">not loaded</pre>
<iframe id="page" src="{src}" width="1200" height="900"></iframe>
<script>
document.getElementById("page").addEventListener("load", () => {{
  const doc = document.getElementById("page").contentDocument;
  const images = Array.from(doc.images).map(i => ({{src: i.getAttribute("src"), loaded: i.complete && i.naturalWidth > 0}}));
  document.getElementById("result").textContent = JSON.stringify({{title: doc.title, tables: doc.querySelectorAll("table").length, images}});
}});
</script></body></html>"""


def open_in_browser(page: Path) -> tuple[dict, list[str]]:
    """(what the page showed: title, tables, images and whether each loaded; console lines it logged)."""
    checker = page.parent.parent / f"check-{page.parent.name}.html"  # beside the folder: same origin
    checker.write_text(_CHECKER.format(src=f"{page.parent.name}/{page.name}"))
    result = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", checker.as_uri()],
        capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="result">(.*?)</pre>', result.stdout, flags=re.S)
    assert found, f"Chromium showed no page (exit {result.returncode}): {result.stderr[-2000:]}"
    shown = found.group(1)
    assert shown != "not loaded", "the page never finished loading"
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line and page.name in line]
    return json.loads(shown.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")), console


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory, tiny_dataset) -> Path:
    out = tmp_path_factory.mktemp("pages") / "demo"  # an absolute path, which the page must not show
    assert main(["demo", "--dataset", str(tiny_dataset), "--held-out", "v100", "--epochs", "1", "--quiet",
                 "--out", str(out)]) == 0
    return out / "index.html"


@pytest.fixture(scope="module")
def compare_page(tmp_path_factory, tiny_dataset) -> Path:
    out = tmp_path_factory.mktemp("pages") / "compare"
    assert main(["compare", str(tiny_dataset), "--models", "xgb", "--test-hardware", "v100", "--quiet",
                 "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    return out / "index.html"


def test_demo_page_reads_like_a_report(demo_page):
    page = demo_page.read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    assert page.count("<table>") == 2  # the results once, and the per-operator detail
    assert "random" in text and "top-1 (Σ)" in text and "PCA task mean" in text
    assert "trained on" in text and "v100" in text and "k80" in text  # what on what, what held out
    assert f"crosstune demo --dataset {Path(json.loads((demo_page.parent / 'demo.json').read_text())['dataset']).name} " \
           "--held-out v100 --epochs 1 --quiet --out demo" in text
    assert "What the numbers mean" in text and "peak@k" in text and "random floor" in text
    assert not re.search(r"\d\.\d{5,}", text), "long floats on the page"
    assert str(Path.cwd()) not in page and "/tmp/" not in page, "absolute paths on the page"
    for raw_key in ("train_seconds", "per_operator", "held_out", "top1_sum", "pca_unweighted"):
        assert raw_key not in text


def test_compare_out_is_what_report_needs(compare_page):
    folder = compare_page.parent
    data = json.loads((folder / "compare.json").read_text())
    assert set(data["summary"]) == {"xgb", "random"} and data["command"].startswith("crosstune compare")
    assert (folder / "seed0" / "xgb" / "config.json").is_file()  # the trained model is kept
    page = compare_page.read_text()
    assert "compare.png" in page and "Model comparison" in page and "random" in page


def test_report_of_a_folder_with_nothing_to_report(tmp_path):
    from crosstune.errors import CrosstuneError

    with pytest.raises(CrosstuneError, match="nothing to report"):
        write_report(tmp_path)


@needs_browser
@pytest.mark.parametrize("which", ["demo_page", "compare_page"])
def test_page_opens_in_chromium_with_its_images_and_no_console_messages(which, request):
    page = request.getfixturevalue(which)
    shown, console = open_in_browser(page)
    assert shown["title"] and shown["tables"] >= 1
    assert shown["images"], "no plot on the page"
    assert all(image["loaded"] for image in shown["images"]), shown["images"]
    assert not console, console


@needs_browser
def test_the_browser_check_sees_a_broken_page(tmp_path):
    """The check itself can fail: a missing image and a console message are caught."""
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "index.html").write_text('<!doctype html><title>x</title><img src="missing.png">'
                                       '<script>console.error("boom")</script>')
    shown, console = open_in_browser(folder / "index.html")
    assert shown["images"] == [{"src": "missing.png", "loaded": False}]
    assert any("boom" in line for line in console)
