import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Returns INPUT0 unchanged as OUTPUT0."""

    def execute(self, requests):
        responses = []
        for request in requests:
            input0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", input0.as_numpy())]))
        return responses
