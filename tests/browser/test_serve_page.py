#!/usr/bin/env python3
"""Browser test of the page `attn serve` serves at /: a person types a text, presses the button and
sees the model's attention in the viewer. In headless Chromium (Selenium, the Debian chromedriver),
against the built binary on an ephemeral loopback port; what the viewer says it drew
(window.attnViewer.state()) is compared with the export of POST /v1/attention for the same text.

usage: test_serve_page.py ATTN_BINARY [ARTIFACT_DIR]
Exits 77 (skipped) without selenium, chromium or chromedriver, or without all-MiniLM-L6-v2.
"""
import json
import os
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_env import CHROMEDRIVER, CHROMIUM, require_browser, skip  # noqa: E402

ATTN, ARTIFACTS = require_browser()
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from serve_process import ServeProcess  # noqa: E402

TEXT = "The cat sat on the mat because it was warm."


class ServePageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            cls.server = ServeProcess(ATTN, ["--embed", "minilm"])
        except RuntimeError as e:
            if "not installed" in str(e) or "not found" in str(e):
                skip("all-MiniLM-L6-v2 is not installed: %s" % e)
            raise
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1400,1000", "--force-device-scale-factor=1"):
            opts.add_argument(a)
        cls.d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
        cls.d.set_page_load_timeout(60)

    @classmethod
    def tearDownClass(cls):
        cls.d.quit()
        status = cls.server.stop()
        assert status == 0, "".join(cls.server.stderr_lines)

    def shot(self, name):
        if ARTIFACTS:
            os.makedirs(ARTIFACTS, exist_ok=True)
            self.d.save_screenshot(os.path.join(ARTIFACTS, name + ".png"))

    def test_typing_a_text_shows_its_attention(self):
        d = self.d
        d.get(self.server.url + "/")
        self.assertIn("attention", d.title)
        Select(d.find_element("id", "model")).select_by_value("all-MiniLM-L6-v2")
        box = d.find_element("id", "text")
        box.send_keys(TEXT)
        self.shot("serve_index")
        d.find_element("id", "show").click()
        WebDriverWait(d, 60).until(lambda drv: drv.execute_script(
            "return !!(window.attnViewer && window.attnViewer.state())"))
        st = d.execute_script("return window.attnViewer.state()")
        self.assertIsNone(st["error"])
        req = urllib.request.Request(self.server.url + "/v1/attention",
                                     data=json.dumps({"model": "all-MiniLM-L6-v2", "input": TEXT}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            exp = json.loads(r.read())
        self.assertEqual(st["rows"], exp["tokens"])
        self.assertEqual(st["rows"][0], "[CLS]")
        self.assertEqual(st["layers"], 6)
        self.assertEqual(st["heads"], 12)
        # The lines drawn for the layer and head shown are the export's weights.
        layer = exp["attention"][st["layer"]][0]
        heads = range(st["heads"]) if st["head"] == "all" else [st["head"]]
        expected = {(h, q, k): w for h in heads for q, row in enumerate(layer[h]) for k, w in enumerate(row)
                    if w > 0}
        got = {(ln["head"], ln["query"], ln["key"]): ln["weight"] for ln in st["lines"]}
        self.assertTrue(got)
        for key, w in got.items():
            self.assertIn(key, expected)
            self.assertAlmostEqual(w, expected[key], places=12)
        self.shot("serve_view")


if __name__ == "__main__":
    if not ATTN or not os.access(ATTN, os.X_OK):
        print("usage: test_serve_page.py ATTN_BINARY [ARTIFACT_DIR]")
        sys.exit(2)
    unittest.main(verbosity=2)
