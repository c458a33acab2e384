"""attn: a CPU Transformer attention engine, from Python.

The same C++ library as the `attn` command (docs/python.md):

    import attn, numpy as np
    q = k = v = np.random.rand(1, 8, 128, 64).astype(np.float32)
    out, weights = attn.attention(q, k, v, is_causal=True, return_weights=True)

attn.torch holds the drop-in for torch.nn.functional.scaled_dot_product_attention,
patch() and capture(); it imports torch only when used. attn.ray holds the Ray Data
actors and (attn.ray.serve) the Ray Serve deployment (docs/scale.md).
"""

from . import _attn
from ._core import attention, attention_backward
from ._models import Generator, Reranker, SentenceEncoder, TextClassifier, explain, train_classifier

__version__ = _attn.version()


def set_num_threads(n):
    """Threads attn's compute uses (default: the number of cores, or ATTN_NUM_THREADS)."""
    _attn.set_num_threads(int(n))


def get_num_threads():
    """The number of threads attn's compute uses."""
    return _attn.num_threads()


def __getattr__(name):
    # attn.torch and attn.ray are imported on first use, so `import attn` never needs torch or ray.
    if name in ("torch", "ray"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'attn' has no attribute {name!r}")


__all__ = ["attention", "attention_backward", "set_num_threads", "get_num_threads", "SentenceEncoder", "Reranker",
           "TextClassifier", "Generator", "explain", "train_classifier", "__version__"]
