#!/usr/bin/python3
"""The job report in a real browser: headless Chromium (Debian's chromium).

Renders the demo job (testdata/demo_job.json: stories260K, W8A8 static with
SmoothQuant, saved with `quantctl -o json get`) to HTML, then checks that
Chromium's DOM holds every chart with its marks, and that its screenshot
shows them: the bar, range and heatmap colours are on the page. The same for
an auto-precision search (testdata/auto_precision_job.json: stories260K,
{uint4 g32, int8 per channel, float} within +2% perplexity, saved with
`quantd-quantize -o json`): its Pareto chart has a point per round, the
frontier, the chosen round and the reference lines. And a classifier's
search with a cost table (testdata/auto_precision_classifier_job.json: the
digits CNN, the same candidates within one point of top-1 accuracy, costs in
ns per weight): its chart plots the top-1 accuracy drop by cost, with the
float accuracy and the budget as its reference lines.
"""

import html.parser
import os
import subprocess
import unittest

from PIL import Image

RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "quantd"))
TMP = os.environ["TEST_TMPDIR"]
# A ceiling for a hang, not a budget: Chromium starts slowly on a loaded machine.
BROWSER_TIMEOUT_S = 300


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
         "--disable-dev-shm-usage", "--hide-scrollbars",
         f"--user-data-dir={os.path.join(TMP, 'profile')}", *args],
        capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S,
        env={**os.environ, "HOME": TMP},
    )  # fmt: skip


class ChartMarks(html.parser.HTMLParser):
    """The marks (rect.bar, rect.cell, rect.range) inside each svg.chart,
    and the text of its labels (text.label: axes, legend, references)."""

    def __init__(self):
        super().__init__()
        self.series = None
        self.marks = {}
        self.labels = {}
        self.in_label = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "chart" in a.get("class", "").split():
            self.series = a["data-series"]
            self.marks[self.series] = 0
            self.labels[self.series] = []
        elif tag == "text" and self.series and a.get("class") == "label":
            self.in_label = True
        elif tag == "rect" and self.series and a.get("class") in ("bar", "cell", "range"):
            self.marks[self.series] += 1
        elif (tag == "circle" and self.series and "data-round" in a
              and "point" in a.get("class", "").split()):  # a round, not the legend's
            self.marks[self.series] += 1
        elif self.series and a.get("data-series"):  # a named line or ring inside a chart
            self.marks[self.series + "/" + a["data-series"]] = 1

    def handle_data(self, data):
        if self.in_label:
            self.labels[self.series].append(data)

    def handle_endtag(self, tag):
        if tag == "svg":
            self.series = None
        elif tag == "text":
            self.in_label = False


def pixels_near(image: Image.Image, rgb: tuple, tolerance: int = 8) -> int:
    return sum(
        count
        for count, colour in image.getcolors(maxcolors=1 << 24)
        if all(abs(c - t) <= tolerance for c, t in zip(colour, rgb))
    )


def render_report(job: str) -> str:
    """testdata/<job>.json rendered to an HTML file; its path."""
    render = os.path.join(RUNFILES, "client/report/render_job_report")
    path = os.path.join(RUNFILES, f"client/report/testdata/{job}.json")
    r = subprocess.run([render, path, "html"], capture_output=True, text=True, check=True)
    report = os.path.join(TMP, job + ".html")
    with open(report, "w") as f:
        f.write(r.stdout)
    return report


class ReportScreenshotTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.report = render_report("demo_job")

    def test_the_browser_dom_holds_every_chart_with_its_marks(self):
        r = chromium("--dump-dom", "file://" + self.report)
        self.assertEqual(r.returncode, 0, r.stderr)
        parser = ChartMarks()
        parser.feed(r.stdout)
        # stories260K: 5 blocks of 7 linears; 12 widest input ranges; 4 stages.
        self.assertEqual(
            parser.marks,
            {
                "block-output-error": 5,
                "block-seconds": 5,
                "layer-sqnr": 35,
                "activation-ranges": 12,
                "stage-seconds": 4,
            },
        )

    def test_the_screenshot_shows_the_charts(self):
        png = os.path.join(TMP, "report.png")
        r = chromium("--window-size=1000,2600", f"--screenshot={png}", "file://" + self.report)
        self.assertEqual(r.returncode, 0, r.stderr)
        image = Image.open(png).convert("RGB")
        self.assertEqual(image.size, (1000, 2600))
        self.assertGreater(pixels_near(image, (0x2E, 0x86, 0xC1)), 20000)  # bars
        self.assertGreater(pixels_near(image, (0xAF, 0x7A, 0xC5)), 5000)  # ranges
        # The heatmap's warm end (low SQNR) and cool end (high SQNR).
        self.assertGreater(pixels_near(image, (0xC0, 0x39, 0x2B), 24), 100)
        self.assertGreater(pixels_near(image, (0x27, 0xAE, 0x60), 24), 100)


class AutoPrecisionReportScreenshotTest(unittest.TestCase):
    def check_pareto_chart(self, job: str, float_series: str, labels: tuple) -> None:
        """testdata/<job>.json's report in the browser: three measured rounds,
        the frontier, the chosen ring, the float and budget lines, and
        `labels` (the axes', the lines'); its screenshot shows the frontier
        points."""
        report = render_report(job)
        r = chromium("--dump-dom", "file://" + report)
        self.assertEqual(r.returncode, 0, r.stderr)
        parser = ChartMarks()
        parser.feed(r.stdout)
        for series, marks in (("auto-precision-rounds", 3),
                              ("auto-precision-rounds/pareto-frontier", 1),
                              ("auto-precision-rounds/chosen", 1),
                              ("auto-precision-rounds/" + float_series, 1),
                              ("auto-precision-rounds/budget", 1)):
            self.assertEqual(parser.marks.get(series), marks, (series, parser.marks))
        for label in labels:
            self.assertIn(label, parser.labels["auto-precision-rounds"])
        png = os.path.join(TMP, job + ".png")
        r = chromium("--window-size=1000,2600", f"--screenshot={png}", "file://" + report)
        self.assertEqual(r.returncode, 0, r.stderr)
        image = Image.open(png).convert("RGB")
        self.assertGreater(pixels_near(image, (0x2E, 0x86, 0xC1)), 100)  # frontier points

    def test_the_pareto_chart_is_drawn(self):
        self.check_pareto_chart("auto_precision_job", "float-perplexity",
                                ("bits per weight (searched linears)", "perplexity"))

    def test_a_classifiers_chart_plots_the_top1_drop_by_cost(self):
        self.check_pareto_chart("auto_precision_classifier_job", "float-accuracy",
                                ("cost (user table)", "top-1 accuracy drop (points)",
                                 "float 98.06%", "budget 1.00 points"))


if __name__ == "__main__":
    unittest.main()
