"""attn on Ray (docs/scale.md): `pip install 'attn[ray]'`.

Batch inference with Ray Data: actor classes that load a model once per worker and run attn's
batched paths on each batch of `Dataset.map_batches`, on as many threads as Ray gave the worker:

    import ray, attn.ray as ar
    ds = ray.data.read_parquet("reviews.parquet")                 # a "text" column
    ar.map_batches(ds, ar.Embedder, workers=4, threads=2).write_parquet("vectors/")
    # texts of mixed lengths: ar.sort_by_length(ds) first, so each batch pads less

Embedder, Classifier, Reranker (bi-encoder cosine) and Generator; PrefixRouter is the plain-Python
routing of the Ray Serve deployment in attn.ray.serve. Importing this module does not import ray.
"""

from ._batch import (Classifier, Embedder, Generator, Reranker, map_batches, sort_by_length, threads_from_resources,
                     worker_threads)
from ._routing import PrefixRouter, prefix_keys, prompt_text, rendezvous

__all__ = ["Embedder", "Classifier", "Reranker", "Generator", "map_batches", "sort_by_length", "threads_from_resources",
           "worker_threads", "PrefixRouter", "prefix_keys", "prompt_text", "rendezvous"]
