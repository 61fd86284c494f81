import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """SUM = add_sub(A, B).OUTPUT0; request parameter "target" names another model to call."""

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            target = json.loads(request.parameters()).get("target", "add_sub")
            bls_request = pb_utils.InferenceRequest(
                model_name=target,
                inputs=[pb_utils.Tensor("INPUT0", a.reshape(1, 4)), pb_utils.Tensor("INPUT1", b.reshape(1, 4))],
                requested_output_names=["OUTPUT0"])
            bls_response = bls_request.exec()
            if bls_response.has_error():
                responses.append(pb_utils.InferenceResponse(error=bls_response.error()))
                continue
            total = pb_utils.get_output_tensor_by_name(bls_response, "OUTPUT0").as_numpy().reshape(4)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return responses
