"""A TVM Bring-Your-Own-Codegen backend for pyard (Relax, apache-tvm 0.27): patterns
(byoc/patterns.py), a cost-based partition (byoc/partition.py: ``partition_for_pyard``) and a
codegen whose regions run on devices of the host runtime (byoc/codegen.py: ``build``). TVM, onnx and
onnxruntime are the optional ``[tvm]`` extra, so nothing is imported here. docs/byoc.md."""
