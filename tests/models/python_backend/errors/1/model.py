"""Every way a model's execute can go wrong, chosen by the MODE input."""
import numpy as np
import triton_python_backend_utils as pb_utils

CODES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            if mode == 1:
                raise ValueError("boom from execute")
            if mode == 2:
                raise pb_utils.TritonModelException("model exception msg")
            if mode == 3:
                return []
            if mode == 4:
                return None
            if mode == 5:  # FP32 for an output declared TYPE_INT32
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.5], dtype=np.float32))]))
            elif mode == 6:  # shape [3] for dims [1]
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1, 2, 3], dtype=np.int32))]))
            elif mode == 7:  # an output the config does not declare
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("UNDECLARED", np.array([7], dtype=np.int32))]))
            elif mode == 8:
                responses.append(pb_utils.InferenceResponse([]))
            elif mode == 9:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("custom error msg")))
            elif 10 <= mode < 10 + len(CODES):
                name = CODES[mode - 10]
                code = getattr(pb_utils.TritonError, name)
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[], error=pb_utils.TritonError("error with code %s" % name, code)))
            elif mode in (21, 22, 23):  # answer through the response sender instead, and return None below
                sender = request.get_response_sender()
                ok = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mode], dtype=np.int32))])
                if mode == 21:
                    sender.send(ok, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                elif mode == 22:
                    sender.send(ok)
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                else:  # the final flag without any response
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return None
            elif mode == 24:  # a tuple instead of a list
                return tuple(responses) + (pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([24], dtype=np.int32))]),)
            elif mode == 25:  # an element that is not a response
                responses.append(25)
            elif mode == 26:  # not a sequence at all
                return 26
            elif mode == 20:  # two responses for one request
                ok = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([20], dtype=np.int32))])
                responses.extend([ok, ok])
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mode], dtype=np.int32))]))
        return responses
