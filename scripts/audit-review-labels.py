#!/usr/bin/env python3
"""How well can a careful reader agree with the reviews-zh labels? A blind label audit.

The review corpus (../shared/data/reviews-zh: pos.txt, neg.txt) labels every line with the verdict of the
whole review it was cut from, so some lines carry no sentiment of their own and some say the opposite of
their label. This script measures that on a random sample, so that accuracy targets on the test split can
be read against what a human reaches:

  scripts/audit-review-labels.py sample [--n 200] [--seed 20261202] [--out DIR]
      draws N distinct lines (exact duplicates and texts found in both files dropped, as attn's
      deduplication does) and writes DIR/blind.tsv (id, text: no label, no file) and DIR/key.tsv
      (id, file, line). DIR must be outside the repository: the corpus is not to be copied into it.
  scripts/audit-review-labels.py score [eval/reviews-zh-label-audit.tsv]
      reads a judgement file (file, line, judgement: pos | neg | undecidable), looks each line up in the
      corpus, and prints how often the judgement agrees with the file's label, and the accuracy of a
      reader who is right where the judgement agrees and guesses the undecidable lines (half of them).

The judgements in eval/reviews-zh-label-audit.tsv were made from blind.tsv alone, before key.tsv was read.
"""
import argparse
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ("pos.txt", "neg.txt")


def data_dir():
    for d in (os.environ.get("ATTN_DATA_DIR", ""), os.path.join(ROOT, "..", "shared", "data"),
              os.path.join(ROOT, "data")):
        if d and os.path.isfile(os.path.join(d, "reviews-zh", "pos.txt")):
            return os.path.join(d, "reviews-zh")
    sys.exit("audit-review-labels: reviews-zh/pos.txt not found under $ATTN_DATA_DIR, ../shared/data or data/")


def read_lines(name):
    with open(os.path.join(data_dir(), name), encoding="utf-8", errors="strict") as f:
        return [l.rstrip("\r\n") for l in f]


def sample(args):
    out = os.path.abspath(args.out)
    if out == ROOT or out.startswith(ROOT + os.sep):
        sys.exit(f"audit-review-labels: --out {args.out} is inside the repository; the corpus is not to be "
                 "copied into it (use a folder such as /tmp/audit)")
    rows, labels_of = [], {}
    for name in FILES:
        for number, line in enumerate(read_lines(name), 1):
            text = line.strip()
            if text:
                rows.append((name, number, text))
                labels_of.setdefault(text, set()).add(name)
    seen, distinct = set(), []
    for name, number, text in rows:
        if len(labels_of[text]) > 1 or text in seen:
            continue
        seen.add(text)
        distinct.append((name, number, text))
    if not 0 < args.n <= len(distinct):
        sys.exit(f"audit-review-labels: --n must be in 1..{len(distinct)}; got {args.n}")
    picked = random.Random(args.seed).sample(distinct, args.n)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "blind.tsv"), "w", encoding="utf-8") as b, \
            open(os.path.join(out, "key.tsv"), "w", encoding="utf-8") as k:
        for i, (name, number, text) in enumerate(picked):
            b.write(f"{i}\t{text}\n")
            k.write(f"{i}\t{name}\t{number}\n")
    print(f"{len(distinct)} distinct lines; wrote {args.n} to {out}/blind.tsv (read this first) and key.tsv")


def score(args):
    lines = {name: read_lines(name) for name in FILES}
    counts = {"agree": 0, "opposite": 0, "undecidable": 0}
    by_label = {name: dict(counts) for name in FILES}
    with open(args.judgements, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header != ["file", "line", "judgement"]:
            sys.exit(f"audit-review-labels: {args.judgements}: expected the header 'file<TAB>line<TAB>judgement'; "
                     f"found {header!r}")
        for n, raw in enumerate(f, 2):
            cols = raw.rstrip("\n").split("\t")
            if len(cols) != 3 or cols[0] not in FILES or not cols[1].isdigit() or \
                    cols[2] not in ("pos", "neg", "undecidable"):
                sys.exit(f"audit-review-labels: {args.judgements} line {n}: expected 'pos.txt|neg.txt<TAB>number"
                         f"<TAB>pos|neg|undecidable'; found {raw.rstrip()!r}")
            name, number, judgement = cols[0], int(cols[1]), cols[2]
            if not 1 <= number <= len(lines[name]) or not lines[name][number - 1].strip():
                sys.exit(f"audit-review-labels: {args.judgements} line {n}: {name} has no text at line {number} "
                         f"({len(lines[name])} lines): a different corpus?")
            kind = "undecidable" if judgement == "undecidable" else \
                "agree" if judgement + ".txt" == name else "opposite"
            counts[kind] += 1
            by_label[name][kind] += 1
    total = sum(counts.values())
    if total == 0:
        sys.exit(f"audit-review-labels: {args.judgements} holds no judgements")
    reader = (counts["agree"] + 0.5 * counts["undecidable"]) / total
    se = math.sqrt(reader * (1 - reader) / total)
    print(f"{total} lines judged blind:")
    for kind in ("agree", "opposite", "undecidable"):
        print(f"  {kind:<12} {counts[kind]:>4}  {100 * counts[kind] / total:5.1f}%   "
              f"(pos.txt {by_label['pos.txt'][kind]}, neg.txt {by_label['neg.txt'][kind]})")
    decided = counts["agree"] + counts["opposite"]
    if decided:
        print(f"  agreement where the reader could decide: {100 * counts['agree'] / decided:.1f}%")
    print(f"  a reader right where the judgement agrees, guessing the undecidable lines: "
          f"{100 * reader:.1f}% (standard error {100 * se:.1f} points)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--seed", type=int, default=20261202)
    s.add_argument("--out", default="/tmp/audit")
    c = sub.add_parser("score")
    c.add_argument("judgements", nargs="?", default=os.path.join(ROOT, "eval", "reviews-zh-label-audit.tsv"))
    args = ap.parse_args()
    sample(args) if args.cmd == "sample" else score(args)


if __name__ == "__main__":
    main()
