"""tinytensor's command-line programs (train.py, graph.py, bench.py, train_mlp.py), run as
`python tools/<program> ...`; the helpers they share live in tools.lib."""
