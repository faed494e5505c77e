"""What the programs in tools/ are built from; none of these modules is a program itself.

    training      the main job's loop: task, model, resume, checkpoints (tools/train.py)
    tasks         what it trains on: language modeling, masked LM, the reverse task
    model_zoo     the small models it builds, by --model name
    corpus        the default corpus (Python's standard library source), byte tokens
    plot          a loss curve, or a matrix as a heat map, as a standalone SVG
    progress      a dependency-free progress bar
    options       the command-line options train.py and train_mlp.py share (--device, --seed)
    graph_models  the models tools/graph.py draws, traced under tt.record()
    timing        thread setup and interleaved medians for the benchmarks
    bench_engine  per-op and large-op benchmarks against torch (tools/bench.py)
    bench_kernels fused-kernel benchmarks, CPU and CUDA (tools/bench.py kernels)
    bench_train   a GPT-2 training step against transformers (tools/bench.py train)
"""
