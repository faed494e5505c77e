"""What the decoder-only tests (GPT, LLaMA) compare against HF's *ForCausalLM."""
import numpy as np


def assert_logits_and_loss_match(ours, ref, mask):
    """Logits at the real (unpadded) positions and the loss agree; run backward on both."""
    ref.loss.backward()
    ours.loss.backward()
    valid = mask.numpy().astype(bool)
    np.testing.assert_allclose(ours.logits.detach().numpy()[valid], ref.logits.detach().numpy()[valid],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(ours.loss.item(), ref.loss.item(), atol=1e-5)
