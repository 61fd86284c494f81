# Seed 003's model.py, comments translated. Changes: `import os` (the seed used os without
# importing it, so initialize failed); sampling parameters per request, with the seed's values
# as defaults; n_threads = CPUs // instances instead of a fixed 4 (4 threads on 2 cores, or 2
# instances x 2 threads, slow llama.cpp down several times); bad inputs (empty prompt,
# max_tokens < 1, ...) answered with a 400 error instead of an exception; the token counts
# llama.cpp reports, as two more outputs (the OpenAI front end's `usage`, nbs/08b_openai.ipynb).
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from llama_cpp import Llama  # the llama-cpp-python library

# Seed 003's generation settings, now defaults. A request overrides each one with the optional
# input tensor of the same name (/generate fills it from a JSON field) or a request parameter.
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
    parameters = json.loads(request.parameters())  # Triton hands them over as a JSON string

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


class TritonPythonModel:
    def initialize(self, args):
        """Initialize the model: load the GGUF file."""
        model_path = os.path.join(args['model_repository'], args['model_version'], 'model.gguf')
        # Key settings: n_ctx is the context length, n_threads the number of threads llama.cpp
        # computes with, n_gpu_layers=0 means CPU only
        self.llm = Llama(
            model_path=model_path,
            n_ctx=4096,
            n_threads=n_threads(json.loads(args['model_config'])),
            n_gpu_layers=0,  # CPU-only inference
            verbose=False
        )
        print(f"Model loaded from {model_path}")

    def execute(self, requests):
        """Handle inference requests."""
        responses = []
        for request in requests:
            # 1. Read the inputs; a bad value fails this request only, with a 400
            try:
                prompt = read_prompt(request)
                sampling = sampling_parameters(request)
            except (ValueError, TypeError) as e:
                error = pb_utils.TritonError(str(e), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue

            # 2. Call the model (the key choice: stream or generate all at once; this model
            #    returns the whole text, qwen_gguf_stream sends it token by token)
            output = self.llm(prompt, echo=False, **sampling)
            generated_text = output['choices'][0]['text']

            # 3. Build the output tensor
            output_tensor = pb_utils.Tensor(
                "generated_text",
                np.array([generated_text.encode('utf-8')], dtype=object)
            )
            usage = output['usage']  # what llama.cpp counted: prompt and generated tokens
            counts = [pb_utils.Tensor(k, np.array([usage[k]], np.int32)) for k in ("prompt_tokens", "completion_tokens")]
            responses.append(pb_utils.InferenceResponse(output_tensors=[output_tensor, *counts]))
        return responses

    def finalize(self):
        """Free resources."""
        if hasattr(self, 'llm'):
            del self.llm
