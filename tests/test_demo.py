"""`python -m triton_mini.demo` prints seed 000's story, and its numbers follow the teaching backends' formulas."""
import re, subprocess, sys
import numpy as np
from triton_mini.backend import next_token, _classifier_weights
from triton_mini.demo import PROMPTS, tokenize


def test_demo_output():
    r = subprocess.run([sys.executable, '-m', 'triton_mini.demo'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r'^Built temporary model repository at: .*triton_mini_repo_', out, re.M)
    assert "Loaded models: ['classify', 'generate', 'pipeline', 'postprocess', 'tokenize']" in out
    for title in ('=== Demo 1: Dynamic Batching on classify ===', '=== Demo 2: Dynamic Batching on generate (mini_llm, a mock LLM backend) ===',
                  '=== Demo 3: Ensemble pipeline (tokenize -> generate -> postprocess) ===', '=== Metrics ==='):
        assert title in out
    assert 'Sent 5 individual requests' in out and f'Sent {len(PROMPTS)} prompts' in out
    w = _classifier_weights(4, 3)
    for i in range(5):
        x = np.array([[i, 1.0, 0.5 * i, -i]], np.float32)
        assert f'  Request {i}: class={int((x @ w).argmax())}' in out
    for i, p in enumerate(PROMPTS): assert f'  Prompt {i}: next_token={next_token(tokenize(p)[0], 100)}' in out
    assert f'  Ensemble output: final={next_token(tokenize(PROMPTS[0])[0], 100)}' in out
    assert '# HELP triton_mini_inference_count' in out and 'triton_mini_batch_size_bucket' in out
    batches = re.findall(r'executed as batches \(size, count\): (\[.*\])', out)
    assert len(batches) == 2 and all(eval(b) and sum(s * c for s, c in eval(b)) == n for b, n in zip(batches, (5, len(PROMPTS))))
