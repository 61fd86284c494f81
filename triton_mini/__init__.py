"""triton_mini: Triton Inference Server, explained and runnable in pure Python.

The names a user needs first, importable from the package itself (`from triton_mini import TritonServer`).
They are resolved on first use (PEP 562), so `import triton_mini` stays cheap and pulls in no front end,
no gRPC and no onnxruntime; each layer's full surface lives in its own module (see the README's layer map)."""
__version__ = "0.1.0"

# public name -> the module (layer) that defines it
_PUBLIC = {
    'TritonServer': 'server', 'TritonError': 'errors',
    'ModelConfig': 'model_config', 'ConfigError': 'model_config', 'ConfigParser': 'config_parser', 'parse_config': 'config_parser',
    'ModelRepository': 'model_repository', 'BackendRegistry': 'backend', 'InferenceRequest': 'backend', 'InferenceResponse': 'backend',
    'DynamicBatcher': 'scheduler', 'SequenceBatcher': 'sequence_batcher', 'EnsembleScheduler': 'ensemble',
    'MetricsCollector': 'metrics', 'example_repository': 'cli',
}
__all__ = ['__version__', *_PUBLIC]

def __getattr__(name):
    "Import the defining module on first access (module-level __getattr__, PEP 562)."
    if name not in _PUBLIC: raise AttributeError(f"module 'triton_mini' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f'.{_PUBLIC[name]}', __name__), name)
    globals()[name] = value   # later lookups skip this function
    return value

def __dir__(): return sorted({*globals(), *_PUBLIC})
