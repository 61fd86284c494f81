"""bench/repo's models as MLServer runtimes, so bench/run.py can put MLServer beside Triton and triton-mini (issue 14).

`Identity` echoes INPUT0 as OUTPUT0 (identity, identity_big); `MLP` is bench/repo/mlp/1/model.py's seeded numpy MLP
(64 -> 256 -> 256 -> 10, ReLU), the same weights. MLServer speaks the same KServe v2 JSON routes; it has no binary
tensor extension, so the binary workload is not run on it. Batching is MLServer's adaptive batching
(`max_batch_size` / `max_batch_time` in model-settings.json), which bench/run.py sets like mlp_batched's config.
"""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class Identity(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload:InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0])
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 outputs=[NumpyCodec.encode_output('OUTPUT0', x)])


class MLP(MLModel):
    async def load(self) -> bool:
        rng = np.random.default_rng(0)
        self.layers = [rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a) for a, b in ((64, 256), (256, 256), (256, 10))]
        return True

    async def predict(self, payload:InferenceRequest) -> InferenceResponse:
        h = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float32)
        for i, w in enumerate(self.layers):
            h = h @ w
            if i < len(self.layers) - 1: h = np.maximum(h, 0)
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 outputs=[NumpyCodec.encode_output('OUTPUT0', h)])
