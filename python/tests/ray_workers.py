"""A worker for test_ray.py that the test can SIGKILL mid-run: attn.ray.Embedder that notes its
process id and each batch it finishes in a folder ($ATTN_TEST_KILL_DIR). Importable by Ray's
worker processes (the test puts this folder on their PYTHONPATH)."""

import os
import time

from attn.ray import Embedder


class NotingEmbedder(Embedder):
    def __call__(self, batch):
        out = super().__call__(batch)
        folder = os.environ["ATTN_TEST_KILL_DIR"]
        with open(os.path.join(folder, f"{os.getpid()}.batches"), "a") as f:
            f.write(f"{len(batch['id'])}\n")
        time.sleep(float(os.environ.get("ATTN_TEST_BATCH_SLEEP", "0")))
        return out
