"""The ONNX Runtime backends: export once (:mod:`.export`), quantise to int8 (:mod:`.quantize`), run them
(:mod:`.runtime`)."""
