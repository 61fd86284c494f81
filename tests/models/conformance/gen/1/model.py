import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Echoes text_input; `info` reports the inputs and request parameters the model received."""

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
            inputs = {t.name(): [str(t.as_numpy().dtype), list(t.as_numpy().shape), repr(t.as_numpy().tolist())]
                      for t in request.inputs()}
            info = json.dumps({"inputs": inputs, "params": json.loads(request.parameters())}, sort_keys=True)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("text_output", np.array([b"echo: " + text.flat[0]], dtype=np.object_)),
                pb_utils.Tensor("info", np.array([info.encode()], dtype=np.object_))]))
        return responses
