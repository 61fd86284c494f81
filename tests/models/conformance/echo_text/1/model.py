import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            echo = np.array([b"echo: " + t for t in text.reshape(-1)], dtype=np.object_).reshape(text.shape)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ECHO", echo)]))
        return responses
