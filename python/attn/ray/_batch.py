"""Ray Data actors over attn's batched Python paths (docs/scale.md).

Each class is constructed once per Ray worker (an actor of `Dataset.map_batches`), loads its model
there, sets attn's threads from the CPUs Ray gave the worker, and is then called on batches: a dict
of numpy arrays (batch_format="numpy") or a pandas DataFrame. It adds its output columns and keeps the
input's, so an id column travels with every row. Nothing here imports ray at module level: the same
classes run on a plain dict in one process, which is what the single-process comparison uses.
"""

import math
import os

import numpy as np

__all__ = ["Embedder", "Classifier", "Reranker", "Generator", "threads_from_resources", "worker_threads",
           "map_batches", "sort_by_length"]


def threads_from_resources(resources, fallback=1):
    """attn's thread count for a worker holding `resources` (Ray's {name: amount}): its whole CPUs,
    at least 1 (a fractional CPU share runs one thread); `fallback` when it holds no CPU (an actor
    started without num_cpus holds none while it runs, and must not take every core)."""
    cpu = (resources or {}).get("CPU")
    if cpu is None or cpu <= 0:
        return int(fallback)
    return max(1, int(math.floor(float(cpu) + 1e-9)))


def worker_threads(num_threads=None):
    """num_threads when given; else the CPUs Ray assigned to the calling worker; else
    $ATTN_NUM_THREADS; else 1."""
    if num_threads is not None:
        n = int(num_threads)
        if n < 1:
            raise ValueError(f"num_threads must be at least 1; got {num_threads}")
        return n
    resources = None
    try:
        import ray

        if ray.is_initialized():
            resources = ray.get_runtime_context().get_assigned_resources()
    except ImportError:
        pass
    env = os.environ.get("ATTN_NUM_THREADS")
    fallback = int(env) if env and env.isdigit() and int(env) > 0 else 1
    return threads_from_resources(resources, fallback)


def _texts(batch, column, what):
    if column not in batch:
        have = list(batch.keys()) if isinstance(batch, dict) else list(batch.columns)
        raise KeyError(f"{what}: the batch has no column {column!r}; its columns are {have}")
    values = batch[column]
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    for i, t in enumerate(values):
        if isinstance(t, bytes):
            values[i] = t.decode("utf-8")
        elif not isinstance(t, str):
            raise TypeError(f"{what}: row {i} of column {column!r} is {type(t).__name__} ({t!r}); expected str")
    return values


def _with(batch, columns):
    """The batch with the new columns added (a dict of arrays or a pandas DataFrame, as it came)."""
    if isinstance(batch, dict):
        out = dict(batch)
        out.update(columns)
        return out
    out = batch.copy()
    for name, value in columns.items():
        out[name] = list(value) if isinstance(value, np.ndarray) and value.ndim > 1 else value
    return out


class _Worker:
    def __init__(self, num_threads):
        import attn

        self.threads = worker_threads(num_threads)
        attn.set_num_threads(self.threads)


class Embedder(_Worker):
    """Sentence vectors of `text_column` into `output_column` ([rows, dim] float32, unit length
    unless normalize=False), equal to attn.SentenceEncoder(model).encode and `attn embed`."""

    def __init__(self, model="minilm", text_column="text", output_column="embedding", batch_size=32,
                 normalize=True, num_threads=None):
        super().__init__(num_threads)
        import attn

        self.encoder = attn.SentenceEncoder(model)
        self.text_column, self.output_column = text_column, output_column
        self.batch_size, self.normalize = int(batch_size), bool(normalize)

    def __call__(self, batch):
        texts = _texts(batch, self.text_column, "Embedder")
        vecs = self.encoder.encode(texts, batch_size=self.batch_size, normalize=self.normalize)
        return _with(batch, {self.output_column: vecs})


class Classifier(_Worker):
    """The label and its probability (columns `label`, `probability`; with output_prefix "x_":
    `x_label`, `x_probability`) of `text_column` by a model of `attn train classify`, equal to
    attn.TextClassifier(model).predict and `attn classify --json`."""

    def __init__(self, model, text_column="text", output_prefix="", batch_size=32, num_threads=None):
        super().__init__(num_threads)
        import attn

        self.classifier = attn.TextClassifier(model)
        self.text_column, self.prefix, self.batch_size = text_column, output_prefix, int(batch_size)

    def __call__(self, batch):
        texts = _texts(batch, self.text_column, "Classifier")
        preds = self.classifier.predict(texts, top=1, batch_size=self.batch_size) if texts else []
        labels = np.array([p["label"] for p in preds], dtype=object)
        probs = np.array([p["probability"] for p in preds], dtype=np.float64)
        return _with(batch, {self.prefix + "label": labels, self.prefix + "probability": probs})


class Reranker(_Worker):
    """A relevance score of each (query, document) row in column `score`. With `cross_encoder` (a
    Hugging Face folder of a BertForSequenceClassification or XLMRobertaForSequenceClassification:
    ms-marco MiniLM, bge-reranker) the cross-encoder's score (attn.Reranker, sigmoid of its logit;
    raw_scores=True: the logit); else the cosine of the two sentence vectors of `model` (a bi-encoder,
    in [-1, 1]). Sort by it within a query to rerank."""

    def __init__(self, model="minilm", query_column="query", document_column="document", output_column="score",
                 batch_size=32, num_threads=None, cross_encoder=None, raw_scores=False):
        super().__init__(num_threads)
        import attn

        self.reranker = attn.Reranker(cross_encoder) if cross_encoder else None
        self.encoder = None if cross_encoder else attn.SentenceEncoder(model)
        self.query_column, self.document_column, self.output_column = query_column, document_column, output_column
        self.batch_size, self.raw_scores = int(batch_size), bool(raw_scores)

    def __call__(self, batch):
        queries = _texts(batch, self.query_column, "Reranker")
        docs = _texts(batch, self.document_column, "Reranker")
        if self.reranker is not None:
            if not queries:
                return _with(batch, {self.output_column: np.zeros(0, dtype=np.float32)})
            scores = self.reranker.predict(list(zip(queries, docs)), batch_size=self.batch_size,
                                           raw_scores=self.raw_scores)
            return _with(batch, {self.output_column: np.atleast_1d(np.asarray(scores, dtype=np.float32))})
        q = self.encoder.encode(queries, batch_size=self.batch_size)
        d = self.encoder.encode(docs, batch_size=self.batch_size)
        return _with(batch, {self.output_column: np.sum(q * d, axis=1).astype(np.float32)})


class Generator(_Worker):
    """The continuation of `prompt_column` into `output_column`, all rows of a batch in one
    batched decode (attn.Generator.generate_batch); greedy by default, so each row's text is the
    one attn.Generator(model).generate gives it alone."""

    def __init__(self, model="smollm2", prompt_column="prompt", output_column="generated", max_new_tokens=64,
                 temperature=0.0, chat=False, system=None, max_context=2048, num_threads=None):
        super().__init__(num_threads)
        import attn

        self.generator = attn.Generator(model, max_context=max_context)
        self.prompt_column, self.output_column = prompt_column, output_column
        self.options = dict(max_new_tokens=int(max_new_tokens), temperature=float(temperature), chat=bool(chat),
                            system=system)

    def __call__(self, batch):
        prompts = _texts(batch, self.prompt_column, "Generator")
        texts = self.generator.generate_batch(prompts, **self.options) if prompts else []
        return _with(batch, {self.output_column: np.array(texts, dtype=object)})


def map_batches(dataset, worker_class, *, workers=1, threads=1, batch_size=256, **options):
    """dataset.map_batches(worker_class, ...) with `workers` actors, each reserving `threads` CPUs
    from Ray and running attn on exactly that many threads (so N workers × T threads never ask for
    more cores than the cluster has). options go to the worker's constructor."""
    if int(workers) < 1 or int(threads) < 1:
        raise ValueError(f"workers and threads must be at least 1; got workers={workers}, threads={threads}")
    return dataset.map_batches(worker_class, fn_constructor_kwargs=dict(options), concurrency=int(workers),
                               num_cpus=int(threads), batch_size=int(batch_size), batch_format="numpy")


_LENGTH_COLUMN = "__attn_text_length"


def sort_by_length(dataset, column="text"):
    """The dataset's rows ordered by the length of `column` (in characters, shortest first; Ray's
    distributed sort), every column kept. attn's batched paths pad each batch to its longest text,
    and `SentenceEncoder.encode` sorts only the texts of one call: sorted first, every Ray batch holds
    texts of about one length, as one in-process call over the whole corpus does (issue 39: 20,000
    reviews in batches of 1,024 padded 18% more unsorted). Carry an id column to restore the order."""
    if column not in dataset.columns():
        raise KeyError(f"sort_by_length: the dataset has no column {column!r}; its columns are {dataset.columns()}")

    def lengths(batch):
        values = batch[column]
        return np.array([len(v.decode("utf-8") if isinstance(v, bytes) else str(v)) for v in values],
                        dtype=np.int64)

    with_length = dataset.add_column(_LENGTH_COLUMN, lengths, batch_format="numpy")
    return with_length.sort(_LENGTH_COLUMN).drop_columns([_LENGTH_COLUMN])
