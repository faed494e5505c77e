"""Fused-kernel benchmarks (`python tools/bench.py kernels`): fused vs unfused vs torch on
the CPU, peak attention memory, and on a CUDA device softmax GB/s and attention TFLOP/s."""
import os

from tinytensor.tools.lib.timing import median_n


def kernel_cases_cpu():
    """(name, fused step, unfused step, torch step) for each fused op on the CPU, fwd+bwd."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)

    def make(*shape, scale=1.0):
        a = (rng.standard_normal(shape) * scale).astype(np.float32)
        return tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)

    def steps(tt_fn, th_fn, tt_ins, th_ins):
        def run(fused):
            def step():
                for t in tt_ins:
                    t.grad = None
                with tt.kernels.use_fusion(fused):
                    tt_fn(*tt_ins).backward()
            return step

        def th_step():
            for t in th_ins:
                t.grad = None
            th_fn(*th_ins).backward()
        return run(True), run(False), th_step

    x, xt = make(4096, 4096, scale=3)
    yield ("softmax 4096x4096, fwd+bwd",
           *steps(lambda a: (F.softmax(a, -1) * a).sum(), lambda a: (torch.softmax(a, -1) * a).sum(), [x], [xt]))
    x, xt = make(8192, 1024)
    w, wt = make(1024)
    b, bt = make(1024)
    yield ("layer_norm 8192x1024 (weight, bias), fwd+bwd",
           *steps(lambda a, c, d: (F.layer_norm(a, (1024,), c, d) * a).sum(),
                  lambda a, c, d: (TF.layer_norm(a, (1024,), c, d) * a).sum(), [x, w, b], [xt, wt, bt]))
    yield ("rms_norm 8192x1024 (weight), fwd+bwd",
           *steps(lambda a, c: (F.rms_norm(a, (1024,), c, eps=1e-6) * a).sum(),
                  lambda a, c: (TF.rms_norm(a, (1024,), c, eps=1e-6) * a).sum(), [x, w], [xt, wt]))
    x, xt = make(2048, 32000, scale=2)
    tgt = rng.integers(0, 32000, 2048)
    tgt[::7] = -100
    t_tt, t_th = tt.tensor(tgt), torch.tensor(tgt)
    yield ("cross_entropy 2048x32000 (ignore, smoothing 0.1), fwd+bwd",
           *steps(lambda a: F.cross_entropy(a, t_tt, label_smoothing=0.1),
                  lambda a: TF.cross_entropy(a, t_th, label_smoothing=0.1), [x], [xt]))
    for T in (512, 1024, 2048):
        for causal in (False, True):
            q, qt = make(1, 4, T, 64)
            k, kt = make(1, 4, T, 64)
            v, vt = make(1, 4, T, 64)
            yield (f"attention B*H=4 T={T} d=64{' causal' if causal else ''}, fwd+bwd",
                   *steps(lambda a, c, d: F.scaled_dot_product_attention(a, c, d, is_causal=causal).sum(),
                          lambda a, c, d: TF.scaled_dot_product_attention(a, c, d, is_causal=causal).sum(),
                          [q, k, v], [qt, kt, vt]))


def attention_peak_memory(T=8192, d=64):
    """Peak traced memory (bytes) of one head's attention fwd+bwd at length T: fused, unfused."""
    import tracemalloc
    import numpy as np
    import tinytensor as tt
    import tinytensor.functional as F
    rng = np.random.default_rng(0)
    out = []
    for fused in (True, False):
        q, k, v = (tt.tensor(rng.standard_normal((1, 1, T, d)).astype(np.float32), requires_grad=True)
                   for _ in range(3))
        tracemalloc.start()
        with tt.kernels.use_fusion(fused):
            F.scaled_dot_product_attention(q, k, v).sum().backward()
        out.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return out


def kernels_cpu(repeat=5, memory_T=8192):
    rows = []
    for name, f_fused, f_ref, f_th in kernel_cases_cpu():
        a, b, c = median_n([f_fused, f_ref, f_th], repeat)
        rows.append((name, a, b, c))
        print(f"{name:58s} fused {a * 1e3:8.1f} ms  unfused {b * 1e3:8.1f} ms  torch {c * 1e3:8.1f} ms  "
              f"fused/unfused {a / b:5.2f}  fused/torch {a / c:5.2f}", flush=True)
    peak = None
    if memory_T:
        peak = attention_peak_memory(memory_T)
        print(f"attention T={memory_T} d=64 one head, fwd+bwd peak memory: fused {peak[0] / 2**20:.0f} MiB, "
              f"unfused {peak[1] / 2**20:.0f} MiB ({peak[1] / peak[0]:.0f}x)", flush=True)
    return rows, peak


# ---- GPU: run only where CUDA and CuPy are available (tools/gpu_check.sh)
def _cuda_time(fn, repeat=20):
    """Median milliseconds of fn() by CUDA events, after warm-up."""
    import cupy
    for _ in range(3):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return sorted(times)[len(times) // 2]


def kernels_gpu_softmax(results):
    """softmax forward GB/s (one read, one write) against a device copy and torch.softmax."""
    import cupy
    import numpy as np
    import tinytensor as tt
    import tinytensor.functional as F
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    for dtype in ("float32", "float16"):
        for rows, n in ((65536, 1024), (16384, 4096), (4096, 32768), (1024, 131072)):
            x = tt.tensor(cupy.random.standard_normal((rows, n), dtype=np.float32).astype(dtype))
            nbytes = 2 * x.data.nbytes
            dst = cupy.empty_like(x.data)
            t_copy = _cuda_time(lambda: cupy.copyto(dst, x.data))
            t_tt = _cuda_time(lambda: F.softmax(x, -1))
            t_bwd = None
            y = F.softmax(x, -1).data
            from tinytensor.kernels import cuda_softmax as ks
            t_bwd = _cuda_time(lambda: ks.backward(y, y, False))
            row = {"op": "softmax", "dtype": dtype, "shape": [rows, n], "copy_GBps": nbytes / t_copy / 1e6,
                   "fwd_GBps": nbytes / t_tt / 1e6, "bwd_GBps": 1.5 * nbytes / t_bwd / 1e6}
            row["fwd_vs_copy"] = row["fwd_GBps"] / row["copy_GBps"]
            if has_torch:
                xt = torch.as_tensor(x.data, device="cuda")
                t_th = _cuda_time(lambda: torch.softmax(xt, -1))
                row["torch_fwd_GBps"] = nbytes / t_th / 1e6
                row["fwd_vs_torch"] = t_th / t_tt
            results.append(row)
            print(row, flush=True)


def kernels_gpu_attention(results, seqs=(512, 1024, 2048, 4096, 8192), dims=(64, 128)):
    """attention TFLOP/s, forward 4*B*H*T^2*d (halved when causal), backward 2.5x that,
    against torch's sdpa (flash backend) and the unfused tinytensor path."""
    import cupy
    import numpy as np
    import tinytensor as tt
    import tinytensor.functional as F
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    for d in dims:
        for T in seqs:
            B, H = max(1, 16384 // T), 16
            for causal in (False, True):
                flops = 4 * B * H * T * T * d / (2 if causal else 1)
                mk = lambda: tt.tensor(cupy.random.standard_normal((B, H, T, d), dtype=np.float32)
                                       .astype(np.float16), requires_grad=True)
                q, k, v = mk(), mk(), mk()
                g = tt.tensor(cupy.random.standard_normal((B, H, T, d), dtype=np.float32).astype(np.float16))

                def fwd():
                    with tt.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def fwd_bwd(fused=True):
                    with tt.kernels.use_fusion(fused):
                        q.grad = k.grad = v.grad = None
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)

                t_f = _cuda_time(fwd, 10)
                t_fb = _cuda_time(fwd_bwd, 10)
                row = {"op": "attention", "dtype": "float16", "B": B, "H": H, "T": T, "d": d, "causal": causal,
                       "fwd_TFLOPs": flops / t_f / 1e9, "bwd_TFLOPs": 2.5 * flops / max(t_fb - t_f, 1e-6) / 1e9}
                if T <= 4096:  # the unfused path holds B*H*T^2 scores
                    with tt.kernels.use_fusion(False):
                        t_uf = _cuda_time(fwd, 5)
                    row["unfused_fwd_TFLOPs"] = flops / t_uf / 1e9
                if has_torch:
                    qt, kt, vt, gt = (torch.as_tensor(a.data, device="cuda") for a in (q, k, v, g))
                    for t in (qt, kt, vt):
                        t.requires_grad_(True)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        with torch.no_grad():
                            t_tf = _cuda_time(lambda: torch.nn.functional.scaled_dot_product_attention(
                                qt, kt, vt, is_causal=causal), 10)
                        t_tfb = _cuda_time(lambda: torch.nn.functional.scaled_dot_product_attention(
                            qt, kt, vt, is_causal=causal).backward(gt), 10)
                    row["torch_fwd_TFLOPs"] = flops / t_tf / 1e9
                    row["torch_bwd_TFLOPs"] = 2.5 * flops / max(t_tfb - t_tf, 1e-6) / 1e9
                    row["fwd_vs_torch"] = row["fwd_TFLOPs"] / row["torch_fwd_TFLOPs"]
                    row["bwd_vs_torch"] = row["bwd_TFLOPs"] / row["torch_bwd_TFLOPs"]
                results.append(row)
                print(row, flush=True)


def run_kernels(repeat=5, gpu_only=False, quick=False):
    """Every kernel benchmark as one JSON-ready dict: the CPU ones unless gpu_only, the CUDA
    ones where a device is usable. Call timing.set_threads before NumPy is imported."""
    import datetime
    import platform
    import tinytensor as tt
    results = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
               "date": datetime.date.today().isoformat()}
    if not gpu_only:
        rows, peak = kernels_cpu(repeat)
        results["cpu"] = [{"case": n, "fused_ms": a * 1e3, "unfused_ms": b * 1e3, "torch_ms": c * 1e3}
                          for n, a, b, c in rows]
        results["attention_peak_bytes_T8192"] = peak
    if tt.cuda_is_available():
        import cupy
        results["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        gpu = []
        kernels_gpu_softmax(gpu)
        kernels_gpu_attention(gpu, seqs=(512, 2048, 8192) if quick else (512, 1024, 2048, 4096, 8192))
        results["gpu_results"] = gpu
    return results
