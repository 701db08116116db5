// One populate function per rule family (csrc/lowering/rules/<family>.cpp). registry() calls each once, in the
// order of kFamilies in registry.cpp. Adding a family: declare it here and list it in kFamilies (one line each).
// The declarations are ordinary (strong) symbols: a family missing from the link fails the link.
#pragma once

#include "lowering/lowering.h"

namespace torch_tpu::lowering {

void populateElementwise(Registry& r);   // arithmetic, comparisons, bitwise/logical, where/clamp, unary math
void populateSpecial(Registry& r);       // polygamma, zeta, Bessel functions, erfcx, ndtri, orthogonal polynomials
void populateBessel(Registry& r);        // Bessel j0/j1/y0/y1, modified Bessel k0/k1 (scaled too), Airy Ai
void populateActivation(Registry& r);    // relu, gelu, silu, mish, hard*, elu, softplus, shrink, prelu, backward
void populateReduction(Registry& r);     // sum, mean, amax, var, norms, cumsum, median, ...
void populateHistogram(Registry& r);     // histc, histogram, histogramdd (bin edges and counts)
void populateLinalg(Registry& r);        // mm, bmm, addmm, ..., _scaled_mm, addr, linalg_cross (matrix products)
void populateLinalgSolve(Registry& r);   // Cholesky, triangular solves, LU (factor, solve, det, inverse, unpack)
void populateLinalgDecomp(Registry& r);  // QR (Householder), Hermitian eigendecomposition, SVD
void populateFactory(Registry& r);       // full, arange, random, fill, clone, _to_copy
void populateNN(Registry& r);            // softmax, glu, log_sigmoid, pixel shuffle, dropout
void populateLosses(Registry& r);        // nll, mse, binary cross entropy, smooth L1, Huber, and their backward
void populateNorm(Registry& r);          // layer, group, batch and rms norm, and their backward
void populateIndexing(Registry& r);      // gather/scatter, index_*, index.Tensor/index_put, take/put, embedding
void populateSortSearch(Registry& r);    // sort, topk, searchsorted, bucketize, isin
void populateMovement(Registry& r);      // cat, stack, padding, flip, roll, tril/triu, repeat, *_scatter, *_copy
void populateCopy(Registry& r);          // copy (eager copy_ into views)
void populateViews(Registry& r);         // view ops as values (graphs only)
void populateCompileExtra(Registry& r);  // other graph-only ops (prims casts, uninitialized factories)
void populateConv(Registry& r);          // convolution (1-3d, groups, transposed) and its backward
void populatePooling(Registry& r);       // avg/max/adaptive pooling, upsampling, and their backward
void populateGridSampler(Registry& r);   // grid_sampler_2d/3d (F.grid_sample) and their backward
void populateEmbeddingBag(Registry& r);  // _embedding_bag (nn.EmbeddingBag) and its backward kernels
void populateDistributions(Registry& r);  // gamma, Dirichlet, Poisson, binomial sampling; rrelu_with_noise
void populateSegmentReduce(Registry& r);  // segment_reduce and its backward
void populateFft(Registry& r);           // _fft_c2c, _fft_r2c, _fft_c2r (torch.fft, stft, istft)
void populateForeach(Registry& r);       // _foreach_* list ops, fused optimizers (after the per-tensor families)
void populateSampling(Registry& r);       // multinomial (graphs; eager: csrc/eager/sampling.cpp)
void populateRnn(Registry& r);            // fused LSTM/GRU cells (_thnn_fused_*_cell) and their backward
void populateGrouped(Registry& r);        // grouped matmul for mixture-of-experts layers (_grouped_mm)
void populatePackedMm(Registry& r);       // weight-only int4/int8 products (_weight_int4pack_mm, _weight_int8pack_mm)
void populateFused(Registry& r);          // the project's own fused kernels (tpu::swiglu, ...)
void populateForeign(Registry& r);        // tpu::stablehlo_call: registered foreign programs (JAX, Pallas)

}  // namespace torch_tpu::lowering
