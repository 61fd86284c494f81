# qwen_gguf's model.py made decoupled: instead of returning one response per request, execute
# sends one response per generated token through the request's response sender, then the final
# flag. The helpers are the same as in ../../qwen_gguf/1/model.py (each model folder must stand
# on its own, so they are copied, not imported).
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from llama_cpp import Llama

DEFAULTS = {"max_tokens": 256, "temperature": 0.7, "stop": ["</s>", "###"]}


def n_threads(config):
    """Threads for llama.cpp: the config parameter n_threads, else this machine's CPUs shared
    among the model's instances (each instance is its own process with its own Llama)."""
    if "n_threads" in config.get("parameters", {}):
        return int(config["parameters"]["n_threads"]["string_value"])
    instances = sum(group.get("count", 1) for group in config.get("instance_group", [])) or 1
    # the CPUs this process may run on (a container or taskset can allow fewer than the machine has)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // instances)


def as_text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def sampling_parameters(request):
    """max_tokens, temperature, stop (and top_p, seed if given) for one request, as keyword arguments for Llama."""
    parameters = json.loads(request.parameters())

    def value(name, kind):  # the input tensor, else the request parameter, else the default
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        found = tensor.as_numpy() if tensor is not None else parameters.get(name, DEFAULTS[name])
        try:
            return [kind(v) for v in np.asarray(found, dtype=object).reshape(-1)]
        except ValueError:
            raise ValueError(f"{name} must be {kind.__name__}, got {found!r}") from None

    sampling = {"max_tokens": value("max_tokens", int)[0],
                "temperature": value("temperature", float)[0],
                # an empty stop string would end every text before it starts
                "stop": [s for s in value("stop", as_text) if s]}
    # llama-cpp-python reads max_tokens <= 0 as "until the context is full" and a negative
    # temperature as "sample without top-k/top-p": refuse both rather than surprise the client.
    if sampling["max_tokens"] < 1 or sampling["temperature"] < 0:
        raise ValueError(f"max_tokens must be >= 1 and temperature >= 0, got max_tokens="
                         f"{sampling['max_tokens']} and temperature={sampling['temperature']}")
    # top_p and a per-request seed (reproducible sampling) only when the client sends them
    for name, kind in (("top_p", float), ("seed", int)):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        found = tensor.as_numpy().reshape(-1)[0] if tensor is not None else parameters.get(name)
        if found is not None:
            sampling[name] = kind(found)
    return sampling


def read_prompt(request):
    """The prompt text: the first element of the "prompt" input."""
    prompt = pb_utils.get_input_tensor_by_name(request, "prompt").as_numpy().reshape(-1)
    if len(prompt) == 0 or len(prompt[0]) == 0:
        raise ValueError("prompt must not be empty")
    return prompt[0].decode("utf-8")


def text_response(text):
    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("generated_text", np.array([text.encode('utf-8')], dtype=object))])


class TritonPythonModel:
    def initialize(self, args):
        """Load the GGUF file (this folder's model.gguf is a symlink to qwen_gguf's)."""
        model_path = os.path.join(args['model_repository'], args['model_version'], 'model.gguf')
        self.llm = Llama(model_path=model_path, n_ctx=4096,
                         n_threads=n_threads(json.loads(args['model_config'])),
                         n_gpu_layers=0, verbose=False)
        print(f"Model loaded from {model_path}")

    def execute(self, requests):
        """Stream each request's tokens as they are generated; return None (decoupled)."""
        for request in requests:
            sender = request.get_response_sender()
            try:
                prompt = read_prompt(request)
                sampling = sampling_parameters(request)
            except (ValueError, TypeError) as e:
                error = pb_utils.TritonError(str(e), pb_utils.TritonError.INVALID_ARG)
                sender.send(pb_utils.InferenceResponse(error=error),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            # stream=True yields one chunk per token (a chunk holds back text that might be the
            # start of a stop string), then a last chunk with finish_reason set and no text.
            for chunk in self.llm(prompt, echo=False, stream=True, **sampling):
                if sender.is_cancelled():  # the client went away (gRPC cancel, a closed stream): stop generating
                    break
                text = chunk['choices'][0]['text']
                if text:
                    sender.send(text_response(text))
            # No more responses for this request: the final flag, on an empty response.
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def finalize(self):
        """Free resources."""
        if hasattr(self, 'llm'):
            del self.llm
