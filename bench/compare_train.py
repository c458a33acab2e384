#!/usr/bin/env python3
"""Training throughput, attn against PyTorch eager, back to back on the same threads.

Runs build/release/bench/train_bench and bench/peers/torch_train.py with the same model and
batch shape (encoder-decoder 2+2 layers, d_model 256, 4 heads, d_ff 1024, vocab 8000, sequence
64, batch 32, dropout 0.1, label smoothing 0.1, AdamW), alternating them --rounds times, and
prints target tokens per second (batch x tgt_len per step, counted the same way on both sides)
and the ratio attn / torch per round and as the median. Also prints the ratio of process CPU
time per step (torch / attn): on a loaded machine wall time depends on the scheduler, CPU time
less so (both count threads that spin while waiting, so it is a rough check, not the target).

  python3 bench/compare_train.py [--threads 2] [--steps 20] [--warmup 3] [--rounds 3]
                                 [--precision fp32|bf16] [--openblas inherit|both] [--interleave K]
                                 [--bench build/release/bench/train_bench] [-- extra flags for both]

--interleave K (fp32): every program is started once and kept running (train_bench --bursts,
torch_train.py --bursts); after their warm-up the script alternates bursts of K steps between them,
--rounds times, the order swapped every round, with a 0.5 s pause before each burst (so that the
other program's idle threads have stopped spinning), and prints the ratio of each attn burst to the
PyTorch burst next to it. Bursts seconds apart see the same host: on a host whose speed drifts over
tens of seconds (another tenant), the per-pair ratios spread less than those of whole runs a minute
apart. --steps is then unused; the medians are over the rounds.

--openblas both (fp32): every round runs both programs twice, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
unset and with OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 (what machines with CPUs newer than
their OpenBLAS build set), the order of the two settings swapped every round, and prints the ratio for
each setting side by side in one run, and attn's own Haswell / unset throughput (1.00 when attn's speed
does not depend on OpenBLAS's CPU detection). The default, inherit, runs with the environment as it is.
train_bench's line saying which kernel ran the step's matrix products is printed for each setting.

--precision bf16 runs attn with bf16 matrix products (train_bench --precision bf16) and, so that the
report stays honest, TWO PyTorch peers per round: fp32 (the default peer) and bf16 autocast
(torch.autocast("cpu", dtype=torch.bfloat16)); it prints attn's ratio to each.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


HASWELL = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}


def env_for(setting):
    """The environment for one OpenBLAS setting: 'inherit' (as it is), 'unset' or 'haswell'."""
    env = dict(os.environ)
    if setting == "inherit":
        return env
    for k in HASWELL:
        env.pop(k, None)
    if setting == "haswell":
        env.update(HASWELL)
    return env


def products_line(out):
    for line in out.splitlines():
        if line.startswith("matrix products per step"):
            return line
    return None


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    m = re.search(r"RESULT tokens_per_s=([0-9.]+) step_ms=([0-9.]+)(?: cpu_ms=([0-9.]+))?", out)
    if not m:
        sys.exit(f"no RESULT line from {' '.join(cmd)}:\n{out}")
    cpu = float(m.group(3)) if m.group(3) else float("nan")  # older train_bench builds print no cpu_ms
    run.products = products_line(out)
    return float(m.group(1)), float(m.group(2)), cpu, out.splitlines()[0]


run.products = None  # train_bench's "matrix products per step" line of the last run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "release", "bench", "train_bench"))
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--openblas", choices=["inherit", "both"], default="inherit",
                    help="both: each round with OPENBLAS_* unset and with OPENBLAS_CORETYPE=Haswell "
                    "OPENBLAS_L2_SIZE=1048576, side by side (fp32 only)")
    ap.add_argument("--interleave", type=int, default=0, metavar="K",
                    help="keep both programs running and alternate bursts of K steps (fp32)")
    ap.add_argument("extra", nargs="*", help="flags passed to both programs (after --)")
    a = ap.parse_args()
    if a.precision == "bf16":
        if a.openblas != "inherit":
            sys.exit("compare_train.py: --openblas both is for fp32 (the default precision)")
        return compare_bf16(a)
    if a.interleave > 0:
        if a.precision != "fp32":
            sys.exit("compare_train.py: --interleave is for fp32 (the default precision)")
        return compare_interleaved(a)
    if a.openblas == "both":
        return compare_openblas_both(a)
    common = ["--threads", str(a.threads), "--steps", str(a.steps), "--warmup", str(a.warmup)] + a.extra
    env_note = f"threads {a.threads}, {a.steps} timed steps after {a.warmup} warm-up, {a.rounds} rounds"
    print(f"training throughput (target tokens/s), {env_note}")
    ratios, ours, theirs, cpu_ratios = [], [], [], []
    for r in range(a.rounds):
        at, ams, acpu, ahead = run([a.bench] + common)
        products = run.products
        tt, tms, tcpu, thead = run([sys.executable, os.path.join(ROOT, "bench", "peers", "torch_train.py")] +
                                   common)
        if r == 0:
            print("  " + ahead)
            if products:
                print("  attn " + products)
            print("  " + thead)
        ours.append(at)
        theirs.append(tt)
        ratios.append(at / tt)
        cpu_ratios.append(tcpu / acpu)
        print(f"round {r + 1}: attn {at:8.1f} tok/s ({ams:7.1f} ms/step, cpu {acpu:7.1f} ms)   "
              f"torch {tt:8.1f} tok/s ({tms:7.1f} ms/step, cpu {tcpu:7.1f} ms)   ratio {at / tt:.2f}x "
              f"(cpu-time ratio {tcpu / acpu:.2f}x)")
    print(f"median: attn {statistics.median(ours):.1f} tok/s, torch {statistics.median(theirs):.1f} tok/s, "
          f"ratio {statistics.median(ratios):.2f}x (wall), {statistics.median(cpu_ratios):.2f}x (process CPU time)")


def record_round(d, r, st, ours, theirs):
    """Adds one round of one OpenBLAS setting to d and prints it: ours, theirs = (tok/s, ms/step, cpu ms)."""
    (at, ams, acpu), (tt, tms, tcpu) = ours, theirs
    d["ours"].append(at)
    d["theirs"].append(tt)
    d["ratio"].append(at / tt)
    d["cpu"].append(tcpu / acpu)
    print(f"round {r + 1} [{st:7s}]: attn {at:8.1f} tok/s ({ams:7.1f} ms/step, cpu {acpu:7.1f} ms)   "
          f"torch {tt:8.1f} tok/s ({tms:7.1f} ms/step, cpu {tcpu:7.1f} ms)   ratio {at / tt:.2f}x "
          f"(cpu-time ratio {tcpu / acpu:.2f}x)", flush=True)


def print_medians(res, settings, names):
    med = statistics.median
    for st in settings:
        d = res[st]
        print(f"median [{names[st]}]: attn {med(d['ours']):.1f} tok/s, torch {med(d['theirs']):.1f} tok/s, "
              f"ratio {med(d['ratio']):.2f}x (wall), {med(d['cpu']):.2f}x (process CPU time)")
    if len(settings) == 2:
        print(f"attn Haswell / unset: {med(res['haswell']['ours']) / med(res['unset']['ours']):.2f}x; "
              f"torch Haswell / unset: {med(res['haswell']['theirs']) / med(res['unset']['theirs']):.2f}x "
              f"(medians)")


def compare_openblas_both(a):
    common = ["--threads", str(a.threads), "--steps", str(a.steps), "--warmup", str(a.warmup)] + a.extra
    peer = [sys.executable, os.path.join(ROOT, "bench", "peers", "torch_train.py")] + common
    settings = ["unset", "haswell"]
    names = {"unset": "OPENBLAS_* unset", "haswell": "OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576"}
    print(f"training throughput (target tokens/s), OPENBLAS_* unset and set, side by side; threads {a.threads}, "
          f"{a.steps} timed steps after {a.warmup} warm-up, {a.rounds} rounds")
    res = {s: {"ours": [], "theirs": [], "ratio": [], "cpu": []} for s in settings}
    for r in range(a.rounds):
        order = settings if r % 2 == 0 else settings[::-1]
        for st in order:
            env = env_for(st)
            at, ams, acpu, ahead = run([a.bench] + common, env)
            products = run.products
            tt, tms, tcpu, thead = run(peer, env)
            if r == 0:
                print(f"  [{names[st]}] {ahead}")
                if products:
                    print(f"  [{names[st]}] attn {products}")
                if st == order[0]:
                    print("  " + thead)
            record_round(res[st], r, st, (at, ams, acpu), (tt, tms, tcpu))
    print_medians(res, settings, names)


class Burster:
    """One benchmark program kept running with --bursts: burst(k) runs k steps, returns its BURST numbers."""

    def __init__(self, cmd, env):
        self.cmd = cmd
        self.p = subprocess.Popen(cmd + ["--bursts"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env, bufsize=1)
        self.head = self.p.stdout.readline().rstrip("\n")  # the program's first line, its configuration
        while True:  # its warm-up: wait for it, so that no two programs ever run at once
            line = self.p.stdout.readline()
            if not line:
                sys.exit(f"compare_train.py: {' '.join(cmd)} ended before its warm-up did")
            if line.strip() == "READY":
                break

    def burst(self, k):
        self.p.stdin.write(f"{k}\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                sys.exit(f"compare_train.py: {' '.join(self.cmd)} ended without a BURST line")
            m = re.match(r"BURST tokens_per_s=([0-9.]+) step_ms=([0-9.]+) cpu_ms=([0-9.]+)", line)
            if m:
                return float(m.group(1)), float(m.group(2)), float(m.group(3))

    def close(self):
        self.p.stdin.close()
        out = self.p.stdout.read()
        self.p.wait()
        return out


def compare_interleaved(a):
    import time

    common = ["--threads", str(a.threads), "--warmup", str(a.warmup)] + a.extra
    peer = [sys.executable, os.path.join(ROOT, "bench", "peers", "torch_train.py")] + common
    settings = ["unset", "haswell"] if a.openblas == "both" else ["inherit"]
    names = {"unset": "OPENBLAS_* unset", "haswell": "OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576",
             "inherit": "environment as it is"}
    print(f"training throughput (target tokens/s), interleaved bursts of {a.interleave} steps, both programs "
          f"kept running; threads {a.threads}, {a.warmup} warm-up steps, {a.rounds} rounds; settings: "
          f"{', '.join(names[s] for s in settings)}")
    progs = {}
    for st in settings:  # started one after the other: their warm-ups do not overlap
        progs[(st, "attn")] = Burster([a.bench] + common, env_for(st))
        progs[(st, "torch")] = Burster(peer, env_for(st))
    for st in settings:
        print(f"  [{names[st]}] {progs[(st, 'attn')].head}")
    print(f"  {progs[(settings[0], 'torch')].head}")
    res = {s: {"ours": [], "theirs": [], "ratio": [], "cpu": []} for s in settings}
    for r in range(a.rounds):
        for st in (settings if r % 2 == 0 else settings[::-1]):
            got = {}
            for who in (("attn", "torch") if r % 2 == 0 else ("torch", "attn")):
                time.sleep(0.5)
                got[who] = progs[(st, who)].burst(a.interleave)
            record_round(res[st], r, st, got["attn"], got["torch"])
    for (st, who), prog in progs.items():
        out = prog.close()
        if who == "attn":
            line = products_line(out)
            if line:
                print(f"  [{names[st]}] attn {line}")
    print_medians(res, settings, names)


def compare_bf16(a):
    common = ["--threads", str(a.threads), "--steps", str(a.steps), "--warmup", str(a.warmup)] + a.extra
    peer = [sys.executable, os.path.join(ROOT, "bench", "peers", "torch_train.py")] + common
    print(f"training throughput (target tokens/s), attn --precision bf16 against PyTorch fp32 and "
          f"PyTorch bf16 autocast; threads {a.threads}, {a.steps} timed steps after {a.warmup} warm-up, "
          f"{a.rounds} rounds")
    ours, t32, t16, r32, r16, c32, c16 = [], [], [], [], [], [], []
    for r in range(a.rounds):
        at, ams, acpu, ahead = run([a.bench, "--precision", "bf16"] + common)
        ft, fms, fcpu, fhead = run(peer)
        bt, bms, bcpu, bhead = run(peer + ["--autocast-bf16"])
        if r == 0:
            for h in (ahead, fhead, bhead):
                print("  " + h)
        ours.append(at)
        t32.append(ft)
        t16.append(bt)
        r32.append(at / ft)
        r16.append(at / bt)
        c32.append(fcpu / acpu)
        c16.append(bcpu / acpu)
        print(f"round {r + 1}: attn bf16 {at:8.1f} tok/s ({ams:7.1f} ms/step, cpu {acpu:7.1f} ms)   "
              f"torch fp32 {ft:8.1f} tok/s ({fms:7.1f} ms, cpu {fcpu:7.1f} ms)   torch bf16 autocast {bt:8.1f} "
              f"tok/s ({bms:7.1f} ms, cpu {bcpu:7.1f} ms)   ratio vs fp32 {at / ft:.2f}x, vs bf16 autocast "
              f"{at / bt:.2f}x (cpu-time ratios {fcpu / acpu:.2f}x, {bcpu / acpu:.2f}x)")
    print(f"median: attn bf16 {statistics.median(ours):.1f} tok/s, torch fp32 {statistics.median(t32):.1f}, "
          f"torch bf16 autocast {statistics.median(t16):.1f}; ratio attn bf16 / torch fp32 "
          f"{statistics.median(r32):.2f}x, attn bf16 / torch bf16 autocast {statistics.median(r16):.2f}x (wall); "
          f"{statistics.median(c32):.2f}x, {statistics.median(c16):.2f}x (process CPU time)")

if __name__ == "__main__":
    main()
