"""A small numpy MLP (64 -> 256 -> 256 -> 10, ReLU), weights seeded: the same model on both servers.

All requests of a batch go through the matrices together (one matmul per layer), which is where dynamic batching pays."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        rng = np.random.default_rng(0)
        self.layers = [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in ((64, 256), (256, 256), (256, 10))]

    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        h = np.concatenate(xs)
        for i, w in enumerate(self.layers):
            h = h @ w
            if i < len(self.layers) - 1: h = np.maximum(h, 0)
        out, start = [], 0
        for x in xs:
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", h[start:start + len(x)])]))
            start += len(x)
        return out
