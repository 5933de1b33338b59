"""The model corpus of issue 23: torchvision models exported by ``torch.onnx`` (build_corpus),
pretrained ONNX models shipped inside PyPI packages (pretrained), and the op inventory."""
