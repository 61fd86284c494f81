"""Stand-in for Triton's example `simple_int8`: sum and difference of two INT8 [16] tensors (wrapping, as int8 does)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (a + b).astype(np.int8)),
                                                         pb_utils.Tensor("OUTPUT1", (a - b).astype(np.int8))]))
        return responses
