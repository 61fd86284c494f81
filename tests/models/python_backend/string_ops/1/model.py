"""String processing on BYTES tensors: upper-case, reverse and count the characters of UTF-8 text."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            texts = [t.decode("utf-8") for t in pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()]
            upper = np.array([t.upper().encode("utf-8") for t in texts], dtype=np.object_)
            reversed_ = np.array([t[::-1].encode("utf-8") for t in texts], dtype=np.object_)
            length = np.array([len(t) for t in texts], dtype=np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("UPPER", upper),
                pb_utils.Tensor("REVERSED", reversed_),
                pb_utils.Tensor("LENGTH", length),
            ]))
        return responses
