#!/usr/bin/env python3
"""Browser test of the explainer page (issue 41, docs/explainer.md): `attn serve --explain e5,smollm2`
serves /explain; in headless Chromium a learner types a Chinese sentence, picks a model, a layer and a
head, and steps through every stage. The numbers the page shows (its table cells, 4 decimals) are
compared with the engine's capture (POST /v1/attention of the same text on the same e5 model), with
`attn explain --stages --json` for the same input, and with Q·Kᵀ of the Q and K shown. Then: the English
switch, the causal mask on a decoder (SmolLM2), the SVG and PNG exports from the page and from the CLI
(`attn explain --stages --export`), the page without a CJK font, and each stage's time to appear for a
32-token sentence (printed and written to ARTIFACT_DIR/explain_timings.json; docs/benchmarks.md).
Then the padding mask (the pad box: the padded row's weights, exactly 0 on the padded columns, equal
to the unpadded run's on the real ones) and "attention is not causality": a classifier fine-tuned here
from the io tests' tiny e5 container (about a second) is served with --classify; the panel's
attention, integrated gradients and rank correlation are compared with `attn explain --stages
--classifier FILE --json`.

usage: test_explain_page.py ATTN_BINARY [ARTIFACT_DIR]
Exits 77 (skipped) without selenium, chromium or chromedriver, or without multilingual-e5-small.
"""
import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_env import CHROMEDRIVER, CHROMIUM, require_browser, skip  # noqa: E402

ATTN, ARTIFACTS = require_browser()
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from serve_process import ServeProcess  # noqa: E402

TEXT = "今天下雨，我没带伞。"
# About 32 e5 tokens (checked below): the speed measurement's sentence.
LONG = "我们今天在学校里学习了注意力机制，老师说模型读一句话时会同时看所有的词并给它们打分，很有意思。"
STAGES = ["tokens", "x", "qkv", "scores", "scaled", "mask", "softmax", "wv", "heads", "concat", "residual"]
CJK = re.compile(r"[\u3400-\u9fff]")
# The causality panel's text and classifier: the tiny e5 container of the io tests knows ▁a ▁ab ▁b ▁bb.
PANEL_TEXT = "a ab b"
TINY_E5 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io", "data", "e5_tiny.bin")


def chrome(env=None):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    service = Service(executable_path=CHROMEDRIVER, env=env) if env else Service(executable_path=CHROMEDRIVER)
    d = webdriver.Chrome(service=service, options=opts)
    d.set_page_load_timeout(60)
    d.set_script_timeout(60)
    return d


def png_pixels(data):
    """Decodes an 8-bit RGB or RGBA PNG (no interlace): (width, height, rows of bytes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def ink(rows, bpp):
    """Pixels that are not white."""
    return sum(1 for r in rows for i in range(0, len(r), bpp) if r[i:i + 3] != b"\xff\xff\xff")


class ExplainPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="attn_explain_browser_")
        cls.art = ARTIFACTS or os.path.join(cls.tmp, "artifacts")
        os.makedirs(cls.art, exist_ok=True)
        # One run of the CLI for all it is compared on: the stages as JSON, the offline page (the
        # no-font test opens it) and every stage as SVG and PNG.
        cls.page = os.path.join(cls.tmp, "explain.html")
        cls.export = os.path.join(cls.tmp, "export")
        r = subprocess.run([ATTN, "explain", "--stages", TEXT, "--layer", "2", "--head", "3", "--pad", "4", "--json",
                            "--html", cls.page, "--export", cls.export], capture_output=True, text=True)
        if r.returncode != 0 and ("not installed" in r.stderr or "not found" in r.stderr):
            skip("multilingual-e5-small is not installed: %s" % r.stderr)
        assert r.returncode == 0, r.stderr
        cls.cli, cls.cli_err = json.loads(r.stdout), r.stderr
        # The causality panel's classifier: a fine-tune of the tiny e5 container of the io tests (about a
        # second; a real review classifier costs a minute of CI here: the C++ tests and docs cover it).
        cls.classifier = cls.train_classifier()
        cls.export_causality = os.path.join(cls.tmp, "export_causality")
        r = subprocess.run([ATTN, "explain", "--stages", PANEL_TEXT, "--model-file", TINY_E5, "--classifier",
                            cls.classifier, "--json", "--export", cls.export_causality], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cls.cli_causality = json.loads(r.stdout)
        cls.have_smollm2 = True
        extra = ["--classify", cls.classifier]
        try:
            cls.server = ServeProcess(ATTN, ["--embed", "e5", "--explain", "e5,smollm2"] + extra)
        except RuntimeError as e:
            if "SmolLM2" not in str(e) and "smollm2" not in str(e):
                raise
            cls.have_smollm2 = False
            cls.server = ServeProcess(ATTN, ["--embed", "e5", "--explain", "e5"] + extra)
        cls.d = chrome()

    @classmethod
    def tearDownClass(cls):
        cls.d.quit()
        status = cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert status == 0, "".join(cls.server.stderr_lines)

    @classmethod
    def train_classifier(cls):
        """Two classes of the tiny container's pieces (▁a / ▁ab against ▁b / ▁bb), as tests/tasks/tiny_e5_run.h."""
        pos, neg = [], []
        for i in range(30):
            pos.append(" ".join(["a"] * (1 + i % 5) + ["ab"] * (i // 5)))
            neg.append(" ".join(["b"] * (1 + i % 5) + ["bb"] * (i // 5)))
        for name, lines in (("pos.txt", pos), ("neg.txt", neg)):
            with open(os.path.join(cls.tmp, name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        out = os.path.join(cls.tmp, "clf")
        r = subprocess.run([ATTN, "train", "classify", "--encoder", "e5", "--encoder-file", TINY_E5, "--pos",
                            os.path.join(cls.tmp, "pos.txt"), "--neg", os.path.join(cls.tmp, "neg.txt"), "--out", out,
                            "--epochs", "4", "--freeze-layers", "0", "--lr", "3e-2", "--batch-size", "8", "--quiet"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return os.path.join(out, "model.attn")

    # ---- helpers ------------------------------------------------------------------------
    def shot(self, d, name):
        d.save_screenshot(os.path.join(self.art, name + ".png"))

    def state(self, d=None):
        return (d or self.d).execute_script("return window.attnExplain.state()")

    def compute(self, text, model="e5", layer=0, head=0, d=None, pad=0):
        d = d or self.d
        d.get(self.server.url + "/explain")
        Select(d.find_element("id", "model")).select_by_value(model)
        for elem_id, value in (("text", text), ("layer", str(layer)), ("head", str(head)), ("pad", str(pad))):
            box = d.find_element("id", elem_id)
            box.clear()
            box.send_keys(value)
        d.execute_script("window.attnExplain.go(0)")
        d.find_element("id", "run").click()
        WebDriverWait(d, 60).until(lambda drv: drv.execute_script(
            "var s = window.attnExplain.state(); return s.loaded && s.n > 0"))
        self.assertEqual(d.find_element("id", "error").text, "")
        return self.state(d)

    def cells(self, key, d=None):
        """The numbers a table shows: rows of floats (None for −∞, True/False for ✓/✗)."""
        rows = (d or self.d).execute_script("""
            var t = document.querySelector('table.m[data-key="' + arguments[0] + '"]');
            if (!t) return null;
            return Array.from(t.querySelectorAll('tr')).slice(1).map(function (tr) {
              return Array.from(tr.querySelectorAll('td[data-i]')).map(function (td) { return td.textContent; }); });
            """, key)
        self.assertIsNotNone(rows, "no table %s" % key)
        conv = {"−∞": None, "✓": True, "✗": False}
        return [[conv[c] if c in conv else float(c) for c in r] for r in rows]

    def row_sums(self):
        return [float(t) for t in self.d.execute_script(
            "return Array.from(document.querySelectorAll('table.m[data-key=weights] td.sum')).map(e => e.textContent)")]

    def assert_shown(self, shown, exact, what, tol=5.1e-5):
        self.assertEqual(len(shown), len(exact), what)
        for i, (rs, re_) in enumerate(zip(shown, exact)):
            for j, (a, b) in enumerate(zip(rs, re_)):
                if b is None:
                    self.assertIsNone(a, "%s[%d][%d]" % (what, i, j))
                else:
                    self.assertLessEqual(abs(a - b), tol, "%s[%d][%d]: shown %s, exact %s" % (what, i, j, a, b))

    def assert_steps_box(self, st, i, title, where):
        """The steps box lists every stage, marks stage i (and only it) as where the learner is, names it
        as the title does, and the bar says which step of how many."""
        box = st["steps"]
        self.assertEqual(box["total"], len(STAGES))
        self.assertEqual(box["current"], i, box)
        self.assertEqual(box["items"][i], "▶" + title)
        self.assertEqual(box["where"], where)
        self.assertEqual(self.d.find_element("css selector", '#steps li[aria-current="step"]').get_attribute("data-stage"),
                         str(i))
        self.assertTrue(self.d.find_element("id", "steps-box").is_displayed())

    # ---- the tests --------------------------------------------------------------------------
    def test_chinese_sentence_every_stage_equals_the_engine(self):
        d = self.d
        st = self.compute(TEXT, "e5", layer=2, head=3)
        self.assertEqual(st["lang"], "zh")
        self.assertEqual(d.find_element("css selector", '[data-i18n="layer"]').text, "层")
        # The engine's capture of the same text on the same model, and `attn explain --stages --json`.
        status, exp = self.server.post("/v1/attention", {"model": "multilingual-e5-small", "input": TEXT})
        self.assertEqual(status, 200, exp)
        captured = exp["attention"][2][0][3]
        cli = self.cli  # `attn explain --stages TEXT --layer 2 --head 3 --json`
        page = d.execute_script("return window.attnExplain.data()")
        self.assertEqual(page["tokens"], exp["tokens"])
        self.assertEqual(cli["tokens"], exp["tokens"])
        for key in ("q", "k", "v", "scores", "weights", "out"):
            self.assertEqual(len(page[key]), len(cli[key]))
            for a, b in zip(page[key], cli[key]):
                for x, y in zip(a, b):
                    self.assertAlmostEqual(x, y, delta=1e-9 * (1 + abs(y)), msg=key)
        # Words: jieba's cut (where installed) groups the pieces; every piece is in one word.
        words = d.execute_script("return Array.from(document.querySelectorAll('.words .w')).map(e => e.firstChild.textContent)")
        self.assertEqual("".join(words).replace("<s>", "").replace("</s>", ""), TEXT)
        self.shot(d, "explain_tokens_zh")
        seen = []
        for i, name in enumerate(STAGES):
            if i:
                d.find_element("id", "next").click()
            st = self.state()
            self.assertEqual(st["name"], name)
            seen.append(d.find_element("id", "stage-title").text)
            self.assert_steps_box(st, i, seen[-1], "第 %d / %d 步" % (i + 1, len(STAGES)))
            if name == "qkv":
                self.assert_shown(self.cells("q"), [r[:16] for r in cli["q"]], "Q")
                self.assert_shown(self.cells("k"), [r[:16] for r in cli["k"]], "K")
                self.assertIn("[%d, 32]" % len(exp["tokens"]), d.find_element("css selector", '.mat[data-key="q"] .shape').text)
            if name == "scores":
                qk = [[sum(a * b for a, b in zip(q, k)) for k in cli["k"]] for q in cli["q"]]
                self.assert_shown(self.cells("scores"), qk, "QKᵀ")
                hover = d.execute_script("return window.attnExplain.hover('scores', 1, 2)")
                self.assertIn("q_1 · k_2", hover)
            if name == "scaled":
                self.assert_shown(self.cells("scaled"), [[x / (32 ** 0.5) for x in r] for r in cli["scores"]], "÷√d_k",
                                  tol=5.1e-5 + 1e-9)
            if name == "mask":
                self.assertTrue(all(all(r) for r in self.cells("allow")))  # an encoder sees every key
            if name == "softmax":
                self.assert_shown(self.cells("weights"), captured, "softmax (the engine's capture)")
                for s in self.row_sums():
                    self.assertEqual(s, 1.0)
                self.assertIn("不是 softmax", d.find_element("id", "tutorial-note").text)
                self.shot(d, "explain_softmax_zh")
            if name == "wv":
                self.assert_shown(self.cells("out"), [r[:16] for r in cli["out"]], "weights × V")
            if name == "heads":
                n = d.execute_script("return document.querySelectorAll('.heads figure').length")
                self.assertEqual(n, 12)
            if name == "residual":
                self.assert_shown(self.cells("x_after"), cli["x_after"]["rows"], "residual")
        self.assertTrue(all(CJK.search(t) for t in seen), seen)
        self.assertTrue(d.find_element("id", "next").get_attribute("disabled"))
        d.find_element("id", "prev").click()
        self.assertEqual(self.state()["name"], "concat")
        # The steps box: a click on a listed step goes there; the arrow keys step back and forth (not
        # while typing in the sentence box).
        d.find_element("css selector", '#steps li[data-stage="3"]').click()
        st = self.state()
        self.assertEqual(st["name"], STAGES[3])
        self.assert_steps_box(st, 3, d.find_element("id", "stage-title").text, "第 4 / %d 步" % len(STAGES))
        self.assertTrue(all(st["steps"]["done"][j] for j in range(len(STAGES)) if j != 3), st["steps"])
        body = d.find_element("tag name", "body")
        body.send_keys(Keys.ARROW_RIGHT)
        self.assertEqual(self.state()["name"], STAGES[4])
        body.send_keys(Keys.ARROW_LEFT)
        body.send_keys(Keys.ARROW_LEFT)
        self.assertEqual(self.state()["name"], STAGES[2])
        d.find_element("id", "text").send_keys(Keys.ARROW_RIGHT)
        self.assertEqual(self.state()["name"], STAGES[2])
        self.shot(d, "explain_steps_box_zh")
        # Pieces instead of words.
        d.execute_script("window.attnExplain.go(0)")
        d.find_element("id", "pieces").click()
        n = d.execute_script("return document.querySelectorAll('.words .w').length")
        self.assertEqual(n, len(exp["tokens"]))

    def test_english_switch_keeps_the_numbers(self):
        d = self.d
        self.compute(TEXT, "e5", layer=0, head=1)
        d.execute_script("window.attnExplain.go(6)")
        zh_cells = self.cells("weights")
        Select(d.find_element("id", "lang")).select_by_value("en")
        st = self.state()
        self.assertEqual(st["lang"], "en")
        self.assertEqual(d.find_element("css selector", '[data-i18n="layer"]').text, "layer")
        self.assertEqual(d.find_element("id", "stage-title").text, "7 softmax row by row")
        self.assertIn("is not a softmax", d.find_element("id", "tutorial-note").text)
        self.assertFalse(CJK.search(d.find_element("id", "stage-text").text))
        self.assertEqual(self.cells("weights"), zh_cells)
        self.assert_steps_box(st, 6, "7 softmax row by row", "step 7 of %d" % len(STAGES))
        self.assertFalse(any(CJK.search(t) for t in st["steps"]["items"]), st["steps"])
        self.assertEqual(d.find_element("css selector", '[data-i18n="steps"]').text, "Steps")
        self.shot(d, "explain_softmax_en")
        Select(d.find_element("id", "lang")).select_by_value("zh")

    def test_decoder_causal_mask(self):
        if not self.have_smollm2:
            self.skipTest("SmolLM2-135M-Instruct is not installed")
        d = self.d
        self.compute(TEXT, "smollm2", layer=3, head=2)
        status, cli = self.server.post("/v1/explain", {"model": "smollm2", "input": TEXT, "layer": 3, "head": 2})
        self.assertEqual(status, 200, cli)
        d.execute_script("window.attnExplain.go(5)")
        self.assertIn("因果掩码", d.find_element("id", "stage-text").text)
        allow, masked = self.cells("allow"), self.cells("masked")
        for i, row in enumerate(allow):
            self.assertEqual(row, [j <= i for j in range(len(row))])
            for j, v in enumerate(masked[i]):
                self.assertEqual(v is None, j > i)
        d.execute_script("window.attnExplain.go(6)")
        w = self.cells("weights")
        self.assert_shown(w, cli["weights"], "causal softmax")
        for i, row in enumerate(w):
            self.assertTrue(all(v == 0.0 for v in row[i + 1:]))
        self.shot(d, "explain_causal_mask")

    def test_exports_from_the_page_and_the_cli(self):
        d = self.d
        self.compute(TEXT, "e5", layer=1, head=0)
        for i, name in enumerate(STAGES):
            d.execute_script("window.attnExplain.go(arguments[0])", i)
            svg = d.execute_script("return window.attnExplain.exportSVG()")
            texts = [t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
            self.assertTrue(any(CJK.search(t) for t in texts), name)
            url = d.execute_script("return window.attnExplain.exportPNG()")
            self.assertTrue(url.startswith("data:image/png;base64,"))
            w, h, rows, bpp = png_pixels(base64.b64decode(url.split(",", 1)[1]))
            self.assertGreater(w * h, 0)
            self.assertGreater(ink(rows, bpp), 100, name)
        out = self.export  # `attn explain --stages TEXT --pad 4 --export DIR` (setUpClass)
        # The page's stages, the padded batch (--pad) and, from the run with --classifier, the causality panel.
        for out, name in [(out, n) for n in STAGES + ["padding"]] + [(self.export_causality, "causality")]:
            with open(os.path.join(out, "stage-%s.svg" % name), encoding="utf-8") as f:
                texts = [t.text or "" for t in ET.fromstring(f.read()).iter("{http://www.w3.org/2000/svg}text")]
            self.assertTrue(any(CJK.search(t) for t in texts), name)
            png = os.path.join(out, "stage-%s.png" % name)
            if "without FreeType" in self.cli_err:
                self.assertFalse(os.path.exists(png))
                continue
            with open(png, "rb") as f:
                w, h, rows, bpp = png_pixels(f.read())
            self.assertGreater(ink(rows, bpp), 100, name)
        shutil.copytree(self.export, os.path.join(self.art, "explain_cli_export"), dirs_exist_ok=True)
        shutil.copy(os.path.join(self.export_causality, "stage-causality.svg"), os.path.join(self.art, "explain_cli_export"))

    def test_speed_of_each_stage_for_32_tokens(self):
        d = self.d
        t0 = time.time()
        st = self.compute(LONG, "e5", layer=5, head=4)
        wall = time.time() - t0
        self.assertGreaterEqual(st["n"], 28)
        self.assertLessEqual(st["n"], 40)
        for i in range(1, len(STAGES)):
            d.find_element("id", "next").click()
        # Lay out and paint each stage once more and time it to the next frame.
        times = {}
        for i, name in enumerate(STAGES):
            times[name] = d.execute_async_script("""
                var done = arguments[arguments.length - 1], t0 = performance.now();
                window.attnExplain.go(arguments[0]); document.body.offsetHeight;
                requestAnimationFrame(function () { done(performance.now() - t0); });""", i)
        report = {"tokens": st["n"], "fetch_ms": st["fetch_ms"], "compute_wall_s": wall, "stage_ms": times,
                  "cores": os.cpu_count()}
        print("explainer timings: " + json.dumps(report))
        with open(os.path.join(self.art, "explain_timings.json"), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


    def test_padding_mask_on_a_padded_batch(self):
        d = self.d
        self.compute(TEXT, "e5", layer=2, head=3, pad=4)
        page = d.execute_script("return window.attnExplain.data()")
        cli = self.cli  # `attn explain --stages TEXT --layer 2 --head 3 --pad 4 --json`
        self.assertEqual(page["padding"]["pad"], 4)
        self.assertEqual(page["padding"]["tokens"][-4:], ["<pad>"] * 4)
        self.assertEqual(cli["padding"]["tokens"], page["padding"]["tokens"])
        for a, b in zip(page["padding"]["weights"], cli["padding"]["weights"]):
            for x, y in zip(a, b):
                self.assertAlmostEqual(x, y, delta=1e-9, msg="padded weights: page and CLI")
        d.execute_script("window.attnExplain.go(5)")
        self.assertIn("填充掩码", d.find_element("id", "stage-text").text)
        n = page["n"]
        allow, masked, w = self.cells("pad_allow"), self.cells("pad_masked"), self.cells("pad_weights")
        unpadded = self.cells("unpadded")
        self.assertEqual(len(w), n)
        for i in range(n):
            self.assertEqual(allow[i], [j < n for j in range(n + 4)])
            self.assertEqual([v is None for v in masked[i]], [j >= n for j in range(n + 4)])
            self.assertEqual(w[i][n:], [0.0] * 4)  # the padded columns: exactly 0 (shown 0.0000)
            self.assertEqual(page["padding"]["weights"][i][n:], [0.0] * 4)  # exactly, in the document
        self.assert_shown(w, page["padding"]["weights"], "padded weights")
        self.assert_shown(unpadded, page["weights"], "unpadded weights")
        self.assert_shown([r[:n] for r in w], unpadded, "padded = unpadded on the real tokens", tol=1.01e-4)
        self.shot(d, "explain_padding_mask")
        # Bad requests get 400 naming what was expected.
        for body, word in (({"model": "e5", "input": TEXT, "pad": 60}, "pad: expected 1.."),
                           ({"model": "e5", "input": TEXT, "causality": True, "baseline": "ones"}, "baseline"),
                           ({"model": "e5", "input": TEXT, "causality": True, "steps": 0}, "steps")):
            status, err = self.server.post("/v1/explain", body)
            self.assertEqual(status, 400, err)
            self.assertIn(word, err["error"]["message"])
        if self.have_smollm2:
            status, err = self.server.post("/v1/explain", {"model": "smollm2", "input": TEXT, "pad": 2})
            self.assertEqual(status, 400, err)
            self.assertIn("encoder (e5)", err["error"]["message"])

    def test_attention_is_not_causality_panel(self):
        d = self.d
        self.compute(PANEL_TEXT, "e5", layer=0, head=0)
        self.assertFalse(d.find_element("id", "causality").is_displayed())
        d.find_element("id", "causality-run").click()
        WebDriverWait(d, 120).until(lambda drv: drv.execute_script("return window.attnExplain.causality() !== null"))
        self.assertEqual(d.find_element("id", "error").text, "")
        shown = d.execute_script("return window.attnExplain.causality()")
        page = d.execute_script("return window.attnExplain.data()")["causality"]
        cli = self.cli_causality["causality"]  # `attn explain --stages PANEL_TEXT --classifier FILE --json`
        self.assertEqual(page["tokens"], cli["tokens"])
        self.assertEqual(shown["rows"], len(cli["tokens"]))
        for key in ("attention", "ig"):
            for a, b in zip(page[key], cli[key]):
                self.assertAlmostEqual(a, b, delta=1e-5 * (1 + abs(b)), msg=key)
        # The correlation the page shows is the one computed in C++ (`attn explain --json`), to its 4 decimals.
        self.assertLessEqual(abs(shown["rho"] - cli["spearman"]), 5.1e-5)
        # The completeness line shows the C++ numbers (its convergence is tested in C++: stages_causality_test).
        self.assertIn("%.4f" % cli["ig_sum"], shown["complete"])
        self.assertIn("%.4f" % cli["f_input"], shown["complete"])
        self.assertIn("注意力不是因果", d.find_element("id", "causality").text)
        self.assertIn("ΣIG", shown["complete"])
        self.shot(d, "explain_causality_zh")
        # The panel's own SVG and PNG: the tokens, the note in Chinese, ρ as shown; a PNG with ink.
        svg = d.execute_script("return window.attnExplain.exportCausalitySVG()")
        texts = [t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
        self.assertTrue(any("注意力不是因果" in t for t in texts))
        self.assertTrue(any(("%.4f" % shown["rho"]) in t for t in texts), texts)
        self.assertEqual(sum(1 for t in texts if re.search(r"·\d+$", t)), len(cli["tokens"]))
        url = d.execute_script("return window.attnExplain.exportCausalityPNG()")
        self.assertTrue(url.startswith("data:image/png;base64,"))
        w, h, rows, bpp = png_pixels(base64.b64decode(url.split(",", 1)[1]))
        self.assertGreater(ink(rows, bpp), 100)
        self.assertTrue(d.find_element("id", "cz-svg").is_displayed())
        Select(d.find_element("id", "lang")).select_by_value("en")
        self.assertIn("Attention is not causality", d.find_element("id", "cz-note").text)
        self.assertFalse(CJK.search(d.find_element("id", "cz-note").text))
        svg = d.execute_script("return window.attnExplain.exportCausalitySVG()")
        self.assertIn("Attention is not causality", svg)
        self.shot(d, "explain_causality_en")
        Select(d.find_element("id", "lang")).select_by_value("zh")

    def test_without_a_cjk_font_notice_and_code_points(self):
        """The offline page under a fontconfig that offers only DejaVu: a notice, English, code points."""
        dirs = [p for p in ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")
                if os.path.isdir(p)]
        if not dirs:
            self.skipTest("no DejaVu or Liberation fonts to build a font config without CJK")
        conf = os.path.join(self.tmp, "fonts.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>%s</dir>'
                    '<cachedir>%s</cachedir></fontconfig>\n' % (dirs[0], os.path.join(self.tmp, "fc-cache")))
        d = chrome(dict(os.environ, FONTCONFIG_FILE=conf))
        try:
            d.get("file://" + self.page)
            st = d.execute_script("return window.attnExplain.state()")
            self.assertEqual(st["cjk"], {"available": False, "notice": True})
            self.assertEqual(st["lang"], "en")
            self.assertTrue(d.find_element("id", "cjk-notice").is_displayed())
            self.assertIn("fonts-noto-cjk", d.find_element("id", "cjk-notice").text)
            words = d.find_element("css selector", ".words").text
            self.assertIn("U+4ECA", words)  # 今
            self.assertFalse(CJK.search(words))
            svg = d.execute_script("window.attnExplain.go(6); return window.attnExplain.exportSVG()")
            self.assertIn("U+", svg)
            self.shot(d, "explain_without_cjk_font")
        finally:
            d.quit()


if __name__ == "__main__":
    if not ATTN or not os.access(ATTN, os.X_OK):
        print("usage: test_explain_page.py ATTN_BINARY [ARTIFACT_DIR]")
        sys.exit(2)
    unittest.main(verbosity=2)
