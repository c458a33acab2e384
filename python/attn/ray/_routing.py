"""Prefix-affinity routing for replicated `attn serve` (docs/scale.md), in plain Python.

Each `attn serve` replica keeps a prefix cache of full KV blocks: a prompt that starts like one it
has already run skips that part of the prefill. So a request should go to the replica that ran the
longest prefix of its prompt. The router keeps a bounded table of prefix keys (a chained hash of the
prompt's leading text in blocks of `block_chars` characters) → the replica last sent that prefix;
a request goes to the owner of its longest known prefix, unless that replica has `max_imbalance`
more requests in flight than the least loaded one; with no known prefix it goes to the least
loaded replica, ties broken by rendezvous (highest-random-weight) hashing of its first block, so
the same prefix picks the same replica on any router and adding a replica moves only its share.
"""

import hashlib
from collections import OrderedDict

__all__ = ["prompt_text", "prefix_keys", "rendezvous", "PrefixRouter"]


def prompt_text(body):
    """The text a request's prompt begins with, from an OpenAI-style body: a chat's messages
    (role and content in order), a completion's prompt, or an embedding's input; "" otherwise."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages")
    if isinstance(messages, list):
        parts = []
        for m in messages:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(f"<|{m.get('role', '')}|>{content if isinstance(content, str) else ''}")
        return "".join(parts)
    for key in ("prompt", "input"):
        value = body.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
    return ""


def prefix_keys(text, block_chars=64, max_blocks=64):
    """Keys of the text's full leading blocks: key i covers text[: (i + 1) * block_chars], and
    two texts share key i exactly when they share those characters (a chained SHA-1)."""
    if block_chars < 1:
        raise ValueError(f"block_chars must be at least 1; got {block_chars}")
    keys = []
    h = b""
    block = []
    # Blocks are counted in characters (not bytes), so CJK and ASCII prompts get blocks of equal length.
    for ch in text:
        block.append(ch)
        if len(block) == block_chars:
            h = hashlib.sha1(h + "".join(block).encode("utf-8", "surrogatepass")).digest()
            keys.append(h)
            block = []
            if len(keys) == max_blocks:
                break
    return keys


def rendezvous(key, replicas):
    """The replica with the highest hash of (key, replica): the same key picks the same replica
    among the same set, and removing a replica moves only the keys it held."""
    if not replicas:
        raise ValueError("rendezvous: no replicas")
    key = key if isinstance(key, bytes) else str(key).encode("utf-8")
    return max(replicas, key=lambda r: hashlib.sha1(key + b"\0" + str(r).encode("utf-8")).digest())


class PrefixRouter:
    """choose(text, replicas, loads) → the replica for a prompt (see the module's comment).
    Not thread-safe: call it from one thread (a Ray Serve router runs on one event loop)."""

    def __init__(self, block_chars=64, max_blocks=64, capacity=65536, max_imbalance=4):
        if capacity < 1 or max_imbalance < 0:
            raise ValueError(f"capacity must be ≥ 1 and max_imbalance ≥ 0; got {capacity}, {max_imbalance}")
        self.block_chars, self.max_blocks = int(block_chars), int(max_blocks)
        self.capacity, self.max_imbalance = int(capacity), int(max_imbalance)
        self._owner = OrderedDict()  # prefix key -> replica, least recently routed first
        self.hits = 0  # requests sent to the owner of a known prefix
        self.misses = 0

    def __len__(self):
        return len(self._owner)

    def choose(self, text, replicas, loads=None):
        replicas = list(replicas)
        if not replicas:
            raise ValueError("PrefixRouter.choose: no replicas")
        loads = dict(loads or {})
        least = min(loads.get(r, 0) for r in replicas)
        keys = prefix_keys(text or "", self.block_chars, self.max_blocks)
        choice = None
        for key in reversed(keys):
            owner = self._owner.get(key)
            if owner in replicas:
                if loads.get(owner, 0) - least <= self.max_imbalance:
                    choice = owner
                break
        if choice is None:
            self.misses += 1
            idle = [r for r in replicas if loads.get(r, 0) == least]
            choice = rendezvous(keys[0] if keys else (text or "").encode("utf-8", "surrogatepass"), idle)
        else:
            self.hits += 1
        for key in keys:
            self._owner[key] = choice
            self._owner.move_to_end(key)
        while len(self._owner) > self.capacity:
            self._owner.popitem(last=False)
        return choice
