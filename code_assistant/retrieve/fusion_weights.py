"""The fusion models' constants. INITIAL, HAND-SET: a stand-in until bench/fit_ranking.py writes fitted ones."""

MODELS = {
    "fast": {
        "names": ["bm25_rel", "bm25_rr", "symbols", "symbols_rr", "named", "named_idf", "stem", "stem_idf", "stem_word", "dir_words", "trace",
                  "trace_inner", "graph_named", "graph_top", "test", "test_about", "aux", "other", "init",
                  "log_tokens"],
        "weights": [0.5, 1.0, 0.3, 1.2, 2.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.5, 0.3, 0.3, -1.5, -0.3, -1.0, -1.5, -0.3, 0.0],
        "means": [0.0] * 20,
        "scales": [1.0] * 20,
    },
}
MODELS["full"] = {
    "names": MODELS["fast"]["names"] + ["dense_present", "dense_rel", "dense_rr"],
    "weights": MODELS["fast"]["weights"] + [0.0, 2.0, 0.8],
    "means": [0.0] * 23,
    "scales": [1.0] * 23,
}
