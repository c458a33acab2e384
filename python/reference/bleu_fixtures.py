#!/usr/bin/env python3
"""Writes tests/text/data/bleu_cases.json: corpus BLEU by the sacrebleu package
on fixed hypotheses and references, for tests/text/bleu_test.cc.

Each case holds the hypotheses, one or more reference streams, the tokenizer
("zh", "13a", "none"), lowercase, sacreBLEU's score, counts and precisions, and
the tokenised form of every hypothesis. The C++ test requires the score within
1e-6 and the counts and tokenisation exactly.

Texts are written here (no corpus data is committed); the "perturbed" cases
derive hypotheses from the references by seeded random edits.

  pip install sacrebleu        (tested with 2.6.0)
  python3 python/reference/bleu_fixtures.py
"""
import json
import os
import random

import sacrebleu
from sacrebleu.metrics import BLEU

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "text", "data",
                   "bleu_cases.json")

ZH_REFS = [
    "我今天没带伞，因为下雨了。",
    "他每天早上七点起床。",
    "这本书很有意思！",
    "你叫什么名字？",
    "我们明天去北京吧。",
    "她会说三种语言：中文、英文和法文。",
    "请给我一杯水。",
    "汤姆在 2019 年买了一辆车。",
    "天气太热了……我不想出去。",
    "“你好”，他说。",
    "这个手机 3.5 寸，价格是 1,200 元。",
    "我的电话号码是 555-1234。",
    "他们在学习 Python 和 C++。",
    "𠀀是扩展B的字。",
    "今天是星期五。",
    "我昨天晚上看了一部电影。",
    "你能帮我一个忙吗？",
    "她很喜欢猫和狗。",
    "我们应该早点儿回家。",
    "这是我第一次来中国。",
]

EN_REFS = [
    "I didn't bring an umbrella because it was raining.",
    "He gets up at seven every morning.",
    "This book is very interesting!",
    "What's your name?",
    "Let's go to Beijing tomorrow.",
    "She speaks three languages: Chinese, English and French.",
    "The price is $1,200.50 (about 8,000 yuan).",
    "Call me at 555-1234 &amp; ask for Tom.",
    "E-mail: tom@example.com / web: https://example.org/a?b=1",
    "It's a state-of-the-art 3-4 hour trip.",
]


def perturb(text, rng, rate):
    """Seeded character edits: delete, duplicate, substitute from the text, swap."""
    chars = list(text)
    out = []
    i = 0
    while i < len(chars):
        r = rng.random()
        if r < rate / 4:
            i += 1
            continue
        if r < rate / 2:
            out.append(chars[i])
            out.append(chars[i])
        elif r < 3 * rate / 4:
            out.append(rng.choice(chars))
        elif r < rate and i + 1 < len(chars):
            out.append(chars[i + 1])
            out.append(chars[i])
            i += 1
        else:
            out.append(chars[i])
        i += 1
    return "".join(out)


def case(name, hyps, refs, tokenize, lowercase=False):
    assert all(isinstance(stream, list) and len(stream) == len(hyps) for stream in refs), name
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    s = bleu.corpus_score(hyps, refs)
    return {
        "name": name,
        "tokenize": tokenize,
        "lowercase": lowercase,
        "hypotheses": hyps,
        "references": refs,
        "score": s.score,
        "bp": s.bp,
        "sys_len": s.sys_len,
        "ref_len": s.ref_len,
        "counts": list(s.counts),
        "totals": list(s.totals),
        "precisions": list(s.precisions),
        "tokenized_hypotheses": [bleu._preprocess_segment(h) for h in hyps],  # lower-cased (if), tokenised
        "signature": str(bleu.get_signature()),
    }


def main():
    rng = random.Random(2017)
    cases = []
    cases.append(case("zh_identical", ZH_REFS, [ZH_REFS], "zh"))
    for rate in (0.05, 0.15, 0.4):
        hyps = [perturb(r, rng, rate) for r in ZH_REFS]
        cases.append(case(f"zh_perturbed_{rate}", hyps, [ZH_REFS], "zh"))
    hyps = [perturb(r, rng, 0.1) for r in ZH_REFS]
    refs2 = [perturb(r, rng, 0.1) for r in ZH_REFS]
    cases.append(case("zh_two_references", hyps, [ZH_REFS, refs2], "zh"))
    cases.append(case("zh_short_hypotheses", [r[:3] for r in ZH_REFS], [ZH_REFS], "zh"))
    cases.append(case("zh_one_char", ["我"], [["我"]], "zh"))
    cases.append(case("zh_no_match", ["你好"], [["我们"]], "zh"))
    cases.append(case("zh_empty_hypothesis", ["", "我今天没带伞。"], [["他来了。", "我今天没带伞。"]], "zh"))
    cases.append(case("zh_symbols", ["A–B … ’s ★ ← ☺ ⺀ ㈠ ㌀ ﹐ ︰ 　x", "ＡＢＣ１２３ｱｲｳ"],
                      [["A–B…’s ★ ← ☺ ⺀ ㈠ ㌀ ﹐ ︰x", "ＡＢＣ１２３"]], "zh"))
    en_hyps = [perturb(r, rng, 0.1) for r in EN_REFS]
    cases.append(case("13a_perturbed", en_hyps, [EN_REFS], "13a"))
    cases.append(case("13a_lowercase", [h.upper() for h in en_hyps], [EN_REFS], "13a", lowercase=True))
    cases.append(case("none_perturbed", en_hyps, [EN_REFS], "none"))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"sacrebleu_version": sacrebleu.__version__, "cases": cases}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    for c in cases:
        print(f"{c['name']:24s} {c['score']:.6f}")


if __name__ == "__main__":
    main()
