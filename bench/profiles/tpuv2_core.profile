# A TPUv2-like core (one TensorCore; a TPUv2 chip has two) for planning at the Mesh-TensorFlow
# paper's scale without the hardware (issue 15 item 7; bench/planner_bench --paper). Format:
# core/cost_model.h FormatHardwareProfile. Rates are per core; meshrt's tensors are float32
# (4 bytes) where the paper ran bfloat16 activations, so its byte figures are about twice the
# paper's for activations.
#
# Sources:
#  [1] Shazeer et al., "Mesh-TensorFlow: Deep Learning for Supercomputers", NeurIPS 2018: 512
#      TPUv2 cores, 11.5 PFLOP/s peak (22.5 TFLOP/s per core), ~6 PFLOP/s achieved on the 4.9B LM.
#  [2] Jouppi et al., "A Domain Specific Supercomputer for Training Deep Neural Networks", CACM
#      63(7), 2020 (cited by Google Cloud's TPU v2 page): TPUv2 chip 46 TFLOP/s bf16, 16 GiB HBM at
#      700 GB/s, 4 inter-chip links of 496 Gbit/s (62 GB/s) each.
#
# Derived figures (per core = half a chip):
#   GEMM       22.5e12 FLOP/s, the peak of [1] (11.5e15 / 512) for large products; small ones
#              (< 1e9 FLOPs per slice) at a quarter of it (an assumption: the 128x128 MXU idles on
#              small tiles; no source gives a figure)
#   memory     350e9 bytes/s (700 GB/s per chip [2] / 2 cores)
#   elementwise  bounded by memory in the model (the vector unit's rate is not published in
#              [1] or [2]; 1e12 FLOP/s is an assumption high enough that bandwidth decides)
#   links      one core's share of a chip's 4 x 62 GB/s links [2]: 124e9 bytes/s per core for
#              every collective kind; alpha 10 us per collective (an assumption: no source gives
#              the ICI latency)
gemm_small_flops_per_s 5.625e12
gemm_large_flops_per_s 22.5e12
gemm_large_flops 1e9
elementwise_flops_per_s 1e12
memory_bytes_per_s 350e9
collectives_measured 0
allreduce.alpha_s 1e-05
allreduce.beta_bytes_per_s 124e9
allgather.alpha_s 1e-05
allgather.beta_bytes_per_s 124e9
alltoall.alpha_s 1e-05
alltoall.beta_bytes_per_s 124e9
reduce_scatter.alpha_s 1e-05
reduce_scatter.beta_bytes_per_s 124e9
permute.alpha_s 1e-05
permute.beta_bytes_per_s 124e9
broadcast.alpha_s 1e-05
broadcast.beta_bytes_per_s 124e9
