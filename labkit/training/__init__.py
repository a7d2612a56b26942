"""Training and evaluation (``train``) and what makes them fast and reproducible: splits held as device tensors
(``batches``), CUDA-graphed steps (``cuda_graphs``), fused gradient kernels (``step_kernels``), padded attention
as flash-attention segments (``varlen_attention``), seeded and deterministic kernels (``determinism``), Triton
kernels compiled or interpreted (``triton_modes``, also used by the kernels of ``labkit.quant`` and
``labkit.kernels``)."""
