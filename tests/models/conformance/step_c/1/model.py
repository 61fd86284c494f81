import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            p = pb_utils.get_input_tensor_by_name(request, "P").as_numpy()
            q = pb_utils.get_input_tensor_by_name(request, "Q").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("R", p + q)]))
        return responses
