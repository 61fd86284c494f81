import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """MODE 0 answers normally; every other mode is one way a model can fail.

    (Returning None from a non-decoupled execute() hangs real Triton 2.51 forever, so no mode does it.)
    """

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            if mode == 1:
                raise ValueError("boom from execute")
            if mode == 2:
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("custom error msg")))
            elif mode == 3:
                error = pb_utils.TritonError("not found msg", pb_utils.TritonError.NOT_FOUND)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif mode == 4:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("WRONG_NAME", np.array([1], dtype=np.int32))]))
            elif mode == 5:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.5], dtype=np.float32))]))
            elif mode == 6:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1, 2, 3], dtype=np.int32))]))
            elif mode == 8:
                return []
            elif mode == 9:
                responses.append(pb_utils.InferenceResponse([]))
            elif mode == 10:
                error = pb_utils.TritonError("unavail msg", pb_utils.TritonError.UNAVAILABLE)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif mode == 11:
                raise pb_utils.TritonModelException("model exception msg")
            elif mode == 12:
                error = pb_utils.TritonError("invalid arg msg", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif mode == 13:
                error = pb_utils.TritonError("unsupported msg", pb_utils.TritonError.UNSUPPORTED)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mode], dtype=np.int32))]))
        return responses
