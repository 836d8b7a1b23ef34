"""report.html in a real browser: headless Chromium decodes every embedded figure.

Skipped when no Chromium is installed. By default the report comes from synthetic results;
set MUTRANSFER_REPORT_RESULTS=results/quickstart to check the report of a real sweep.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from mutransfer.analysis import make_plots
from tests.sweeps import planted_results

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)

pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="no Chromium installed"),
    pytest.mark.slow,
]

# After load, write each image's decoded size into the DOM, where --dump-dom shows it.
PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    img.setAttribute("data-decoded", img.complete ? img.naturalWidth + "x" + img.naturalHeight
                                                  : "incomplete");
  }
  document.body.setAttribute("data-probe", "done");
});
</script>"""


def browser(profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    given = os.environ.get("MUTRANSFER_REPORT_RESULTS")
    if given:
        out = tmp_path_factory.mktemp("report")
        return make_plots(given, out_dir=out)[-1]
    root = planted_results(tmp_path_factory.mktemp("results"), [64, 128, 256])
    return make_plots(root)[-1]


def test_every_figure_decodes_in_chromium(report, tmp_path):
    html = report.read_text(encoding="utf-8")
    n_figures = html.count("<img ")
    assert n_figures >= 3
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = browser(tmp_path / "profile", "--dump-dom", probed.as_uri())
    dom = done.stdout
    assert 'data-probe="done"' in dom, done.stderr[-2000:]
    sizes = re.findall(r'data-decoded="([^"]*)"', dom)
    assert len(sizes) == n_figures
    for size in sizes:
        width, height = (int(v) for v in size.split("x"))  # "incomplete" fails here
        assert width > 300 and height > 200


def test_the_report_renders_to_a_screenshot(report, tmp_path):
    shot = tmp_path / "report.png"
    # the report as it is, opened from disk from another folder: nothing it needs is beside it
    moved = tmp_path / "elsewhere" / "report.html"
    moved.parent.mkdir()
    shutil.copy(report, moved)
    done = browser(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400",
                   moved.as_uri())
    assert shot.is_file(), done.stderr[-2000:]
    img = mpimg.imread(shot)
    assert img.shape[:2] == (2400, 1280)
    # figures are drawn: many distinct colours, not a page of text on white
    colours = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 500
