"""The model front-ends: the same library calls as attn embed / classify / generate /
explain --json / train classify (docs/python.md)."""

import json
import queue
import sys
import threading

import numpy as np

from . import _attn

__all__ = ["SentenceEncoder", "Reranker", "TextClassifier", "Generator", "explain", "train_classifier"]


def _texts(sentences, what):
    if isinstance(sentences, str):
        return [sentences], True
    texts = list(sentences)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what}: item {i} is {type(t).__name__}; expected str")
    return texts, False


class SentenceEncoder:
    """A BERT sentence encoder: "minilm" (all-MiniLM-L6-v2, found as `attn embed` finds
    it) or a model folder. encode() returns what `attn embed` writes."""

    def __init__(self, model="minilm"):
        self._enc = _attn.SentenceEncoder(str(model))

    def encode(self, sentences, batch_size=32, normalize=True, show_progress_bar=False, convert_to_numpy=True):
        """[N, dim] float32 vectors (one [dim] vector for a single string), as
        sentence-transformers' SentenceTransformer.encode. show_progress_bar is
        accepted for compatibility and ignored."""
        texts, single = _texts(sentences, "encode")
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        out = self._enc.encode(texts, int(batch_size), bool(normalize))
        if not convert_to_numpy:
            import torch

            out = torch.from_numpy(out)
        return out[0] if single else out

    def tokenize(self, text):
        """The [CLS] text [SEP] token ids, truncated as encode() truncates."""
        return list(self._enc.tokenize(text))

    @property
    def dim(self):
        return self._enc.dim

    def get_sentence_embedding_dimension(self):
        return self._enc.dim

    @property
    def max_seq_length(self):
        return self._enc.max_seq_length


class Reranker:
    """A cross-encoder (reranker): a Hugging Face folder of a BertForSequenceClassification (ms-marco
    MiniLM) or XLMRobertaForSequenceClassification (bge-reranker) with one label, read as
    `attn rerank --model DIR` reads it. Scores are sigmoid(logit) in [0, 1], as sentence-transformers'
    CrossEncoder gives them (raw_scores=True: the logits)."""

    def __init__(self, model):
        self._ce = _attn.Reranker(str(model))

    def predict(self, pairs, batch_size=32, raw_scores=False):
        """float32 [N] scores of (query, document) pairs (one float for a single pair)."""
        single = isinstance(pairs, tuple) and len(pairs) == 2 and all(isinstance(x, str) for x in pairs)
        items = [pairs] if single else list(pairs)
        for i, p in enumerate(items):
            if not (isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p)):
                raise TypeError(f"predict: pair {i} is {type(p).__name__}; expected (query, document) strings")
        out = self._ce.predict([tuple(p) for p in items], int(batch_size), bool(raw_scores))
        return float(out[0]) if single else out

    def rank(self, query, documents, top_n=None, return_documents=False, raw_scores=False, batch_size=32):
        """The documents best first, as POST /v1/rerank answers: [{"index", "relevance_score",
        "document": {"text"} (with return_documents)}], at most top_n of them."""
        if not isinstance(query, str):
            raise TypeError(f"rank: query is {type(query).__name__}; expected str")
        docs, _ = _texts(documents, "rank")
        if not docs:
            raise ValueError("rank: no documents given; expected at least one")
        scores = self.predict([(query, d) for d in docs], batch_size, raw_scores)
        order = sorted(range(len(docs)), key=lambda i: -float(scores[i]))  # stable: ties keep their order
        if top_n is not None:
            if int(top_n) < 1:
                raise ValueError(f"rank: top_n must be >= 1; got {top_n}")
            order = order[: int(top_n)]
        out = []
        for i in order:
            r = {"index": i, "relevance_score": float(scores[i])}
            if return_documents:
                r["document"] = {"text": docs[i]}
            out.append(r)
        return out

    def attention(self, query, document):
        """The pair's exact attention: {"tokens", "weights": [float32 [H, L, L] per layer], "logit"}."""
        tokens, layers, logit = self._ce.attention(query, document)
        return {"tokens": list(tokens), "weights": list(layers), "logit": float(logit)}

    @property
    def max_seq_length(self):
        return self._ce.max_seq_length

    @property
    def name(self):
        return self._ce.name

    @property
    def architecture(self):
        return self._ce.architecture


class TextClassifier:
    """A classifier trained by `attn train classify` (or attn.train_classifier)."""

    def __init__(self, path="runs/classify/model.attn"):
        self._model = _attn.TextClassifier(str(path))

    @property
    def labels(self):
        return list(self._model.labels)

    def predict(self, texts, top=5, heads=False, batch_size=32):
        """One dict per text, as `attn classify --json`: label, probability,
        probabilities {label: p}, tokens, and attention (per layer: [CLS]'s mean
        weight per token, the top tokens, and per head with heads=True)."""
        items, single = _texts(texts, "predict")
        out = json.loads(self._model.predict(items, int(top), bool(heads), int(batch_size)))
        return out[0] if single else out


class Generator:
    """Text generation with a GGUF decoder: "smollm2" (SmolLM2-135M-Instruct, found as
    `attn generate --model smollm2` finds it) or a .gguf path of any architecture the runtime reads
    (llama, qwen2, qwen3, phi3, gemma2, gemma3; docs/runtime.md). quantize="q8_0" or "q4_0" converts
    the model's f32 / f16 / bf16 matrices (not the embeddings) to those blocks at load, on the
    runtime's decoder (what `attn generate --quantize` does)."""

    def __init__(self, model="smollm2", max_context=2048, quantize="none"):
        self._gen = _attn.Generator(str(model), int(max_context), str(quantize))
        self.last = None  # details of the last finished generate()
        self.last_batch = None  # per prompt of the last generate_batch()

    @property
    def capacity(self):
        """The most positions (prompt + reply tokens) of one sequence."""
        return self._gen.capacity

    def generate(self, prompt, max_new_tokens=64, temperature=0.0, top_k=0, top_p=1.0, seed=0, stream=False,
                 chat=False, system=None):
        """The continuation of prompt as text (greedy when temperature is 0), or with
        stream=True a generator of text pieces as they are produced. Ctrl-C stops
        generation between tokens (KeyboardInterrupt)."""
        args = (str(prompt), int(max_new_tokens), float(temperature), int(top_k), float(top_p), int(seed),
                bool(chat), system)
        if stream:
            return self._stream(args)
        text, ids, stopped, n_prompt, t_prompt, t_gen = self._gen.generate(*args, None)
        self.last = dict(ids=list(ids), stopped=stopped, prompt_tokens=n_prompt, prompt_seconds=t_prompt,
                         generate_seconds=t_gen)
        return text.decode("utf-8")

    def generate_batch(self, prompts, max_new_tokens=64, temperature=0.0, top_k=0, top_p=1.0, seed=0, chat=False,
                       system=None):
        """The continuations of many prompts at once, as a list of texts in the prompts' order: one
        batched step per token for all of them (the runtime `attn serve` runs on), each prompt with its
        own KV cache pages. Greedy gives each prompt the text generate() gives it alone; sampled,
        prompt i draws from its own generator seeded from (seed, i). self.last_batch holds the ids and
        whether a stop token ended each."""
        items, single = _texts(prompts, "generate_batch")
        if not items:
            self.last_batch = []
            return []
        out = self._gen.generate_batch(items, int(max_new_tokens), float(temperature), int(top_k), float(top_p),
                                       int(seed), bool(chat), system)
        self.last_batch = [dict(ids=list(ids), stopped=stopped) for _, ids, stopped in out]
        texts = [text.decode("utf-8") for text, _, _ in out]
        return texts[0] if single else texts

    def _stream(self, args):
        pieces = queue.Queue()
        closed = threading.Event()
        done = object()
        result = {}

        def on_text(piece):
            pieces.put(piece.decode("utf-8"))
            return closed.is_set()

        def run():
            try:
                result["reply"] = self._gen.generate(*args, on_text)
            except BaseException as e:  # handed to the consumer
                result["error"] = e
            finally:
                pieces.put(done)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        try:
            while True:
                try:
                    item = pieces.get(timeout=0.1)
                except queue.Empty:
                    continue
                if item is done:
                    break
                yield item
        finally:
            closed.set()  # a closed generator or Ctrl-C in the consumer stops the worker at its next piece
            worker.join()
        if "error" in result:
            raise result["error"]
        text, ids, stopped, n_prompt, t_prompt, t_gen = result["reply"]
        self.last = dict(ids=list(ids), stopped=stopped, prompt_tokens=n_prompt, prompt_seconds=t_prompt,
                         generate_seconds=t_gen)


def explain(sentence=None, *, query="", seed=None, scores=None, tokens=None, multi_head=False, heads=None,
            cost=None, mask=None, length=-1, window=-1, causal=False, model=None, layer=None, head=0, word="",
            dims=4, text=False, lang="en"):
    """The report of `attn explain ... --json` as a dict (text=True: the text it prints).

    lang: "en" or "zh" (also a locale name such as "zh_CN.UTF-8"), the language of the text;
    the numbers and the JSON are the same in both, apart from its "lang" key.

    Modes, as the command's: the walkthrough (default; sentence = list of words or a
    string split on spaces, query = a word or position), scores=[...] (tokens=[...]),
    multi_head=True (heads), cost=dict(n=, d=, heads=, batch=1, causal=False),
    mask="causal"|"padding"|"window" (length, window, causal), model=PATH with
    sentence as the text to classify (layer, head, word, dims)."""
    chosen = [m for m, on in (("scores", scores is not None), ("multi-head", multi_head), ("cost", cost is not None),
                              ("mask", mask is not None), ("model", model is not None)) if on]
    if len(chosen) > 1:
        raise ValueError(f"explain: choose one mode; got {' and '.join(chosen)}")
    mode = chosen[0] if chosen else "walkthrough"
    words = None
    model_text = ""
    if mode == "model":
        if not isinstance(sentence, str):
            raise ValueError("explain(model=...): needs the sentence to classify as a string")
        model_text = sentence
    elif sentence is not None:
        words = sentence.split(" ") if isinstance(sentence, str) else [str(w) for w in sentence]
    c = dict(cost or {})
    unknown = set(c) - {"n", "d", "heads", "batch", "causal"}
    if unknown:
        raise ValueError(f"explain(cost=...): unknown keys {sorted(unknown)}; expected n, d, heads, batch, causal")
    if mode == "cost":
        for need in ("n", "d", "heads"):
            if need not in c:
                raise ValueError(f"explain(cost=...) needs n, d and heads; {need} was not given")
    n_heads = int(c.get("heads", heads if heads is not None else 2))
    report_text, report_json = _attn.explain(
        mode, words, seed, str(query), [float(s) for s in (scores or [])], [str(t) for t in (tokens or [])],
        n_heads, int(c.get("n", 0)), int(c.get("d", 0)), int(c.get("batch", 1)), bool(c.get("causal", causal)),
        str(mask or ""), int(length), int(window), str(model or ""), model_text, layer, int(head), str(word),
        int(dims), str(lang))
    return report_text if text else json.loads(report_json)


def train_classifier(*, progress=True, **options):
    """The recipe of `attn train classify`: options as its flags with underscores
    (pos, neg, data, format, text_column, label_column, out, preset, minutes, epochs,
    max_epochs, seed, max_len, max_chars, min_freq, layers, d_model, heads, d_ff,
    dropout, lr, weight_decay, clip, batch_size, patience, eval_every). progress: True
    (to stderr), False, or a callable taking each piece of text. Returns a dict with
    summary, report (report.json), report_md, model_path, test_accuracy,
    baseline_test_accuracy."""
    o = _attn.ClassifyTrainOptions()
    for key, value in options.items():
        if key.startswith("_") or not hasattr(o, key) or key == "command":
            raise TypeError(f"train_classifier: unknown option {key!r}")
        setattr(o, key, type(getattr(o, key))(value))
    o.command = "attn.train_classifier(" + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")"
    if progress is True:
        def write(s):
            sys.stderr.write(s)
            sys.stderr.flush()
        callback = write
    elif progress is False or progress is None:
        callback = None
    else:
        callback = progress
    summary, report_md, report, model_path, acc, base = _attn.train_classifier(o, callback)
    return dict(summary=summary, report=json.loads(report), report_md=report_md, model_path=model_path,
                test_accuracy=acc, baseline_test_accuracy=base)
