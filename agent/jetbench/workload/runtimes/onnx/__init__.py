"""ONNX Runtime: `export.py` a built-in network exported to ONNX, `model.py` an ONNX model as a
`Workload`, `providers.py` which execution provider runs it."""
