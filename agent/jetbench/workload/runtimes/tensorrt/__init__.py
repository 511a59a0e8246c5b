"""TensorRT: `engine.py` a serialized engine as a `Workload` (unverified until it runs on a
GPU), `build.py` an engine built from a network's ONNX export, cached."""
