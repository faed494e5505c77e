"""Worked examples of the function transforms (`tt.func`, docs/func.md), each a program that
runs on the CPU in under a minute at full size and checks itself against torch.func:

    per_sample_grad_norms  per-example gradient norms of a GPT-2-small-shaped models.GPT
    hessian_eigenvalue     the top Hessian eigenvalue of one Transformer block (power iteration on hvp)
    attention_jacobian     the Jacobian of one attention head's output w.r.t. its input tokens, as a picture

Each module's `run(...)` does the work at any size (the tests run them small) and returns
its numbers beside torch.func's.
"""
