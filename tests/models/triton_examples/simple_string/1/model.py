"""Stand-in for Triton's example `simple_string`: the inputs are decimal integers as strings; the outputs are their
sum and difference, as strings."""
import numpy as np
import triton_python_backend_utils as pb_utils


def as_ints(tensor):
    return np.vectorize(lambda s: int(s.decode() if isinstance(s, bytes) else s), otypes=[np.int64])(tensor.as_numpy())


def as_strings(values):
    return np.vectorize(lambda v: str(v).encode(), otypes=[np.object_])(values)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = as_ints(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            b = as_ints(pb_utils.get_input_tensor_by_name(request, "INPUT1"))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", as_strings(a + b)),
                                                         pb_utils.Tensor("OUTPUT1", as_strings(a - b))]))
        return responses
