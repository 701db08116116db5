// The lowering test's numeric checks (see lowering_test.cpp): results against host-computed values.
#include "lowering_test_util.h"

// ------------------------------------------------------------------ numeric checks


// _grouped_mm against host loops, for each form; rows/columns of no group and empty groups give zeros.
void groupedMMTests() {
  const DType f32 = DType::F32, s32 = DType::S32;
  auto vals = [](int64_t n, double scale) {
    std::vector<double> v;
    v.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v[size_t(k)] = double((k * 5) % 13 - 6) * scale;
    return v;
  };
  // Group of row r for cumulative ends `offs`, or -1 past the last.
  auto groupOf = [](const std::vector<double>& offs, int64_t r) {
    for (size_t g = 0; g < offs.size(); ++g)
      if (r < int64_t(offs[g])) return int64_t(g);
    return int64_t(-1);
  };
  // Uneven groups, an empty one, rows past the end; and a length that is no multiple of the tile.
  for (auto offs : {std::vector<double>{2, 2, 7}, std::vector<double>{0, 9, 9}, std::vector<double>{3, 3, 10}}) {
    std::string tag = "offs " + std::to_string(int(offs[0])) + "," + std::to_string(int(offs[1])) + "," +
                      std::to_string(int(offs[2]));
    const int64_t Lr = 10, Kc = 4, Nc = 5, G = 3;
    auto x = vals(Lr * Kc, 0.25), w = vals(G * Kc * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n)
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
    }
    expect("grouped_mm 2d x 3d " + tag, "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
    // 3-D x 2-D: a [G, M, Kc] x b [Kc, Lr] with the columns of b grouped.
    const int64_t M = 3;
    auto a3 = vals(G * M * Kc, 0.5), bt = vals(Kc * Lr, 0.25);
    std::vector<double> want3(static_cast<size_t>(M * Lr), 0.0);
    for (int64_t c = 0; c < Lr; ++c) {
      int64_t g = groupOf(offs, c);
      if (g < 0) continue;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < Kc; ++k) want3[size_t(m * Lr + c)] += a3[size_t((g * M + m) * Kc + k)] * bt[size_t(k * Lr + c)];
    }
    expect("grouped_mm 3d x 2d " + tag, "aten::_grouped_mm", {T(f32, {G, M, Kc}, a3), T(f32, {Kc, Lr}, bt),
           T(s32, {G}, offs), N(), N()}, {{f32, {M, Lr}}}, {want3});
    // 2-D x 2-D: a [P, Lr] x c [Lr, Q] -> [G, P, Q], the contraction split by groups.
    const int64_t P = 3, Q = 2;
    auto a2 = vals(P * Lr, 0.25), c2 = vals(Lr * Q, 0.5);
    std::vector<double> want2(static_cast<size_t>(G * P * Q), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) want2[size_t((g * P + p) * Q + q)] += a2[size_t(p * Lr + r)] * c2[size_t(r * Q + q)];
    }
    expect("grouped_mm 2d x 2d " + tag, "aten::_grouped_mm", {T(f32, {P, Lr}, a2), T(f32, {Lr, Q}, c2),
           T(s32, {G}, offs), N(), N()}, {{f32, {G, P, Q}}}, {want2});
  }
  // Many rows over many groups: several tiles per group and several groups per tile.
  {
    const int64_t Lr = 300, Kc = 3, Nc = 2, G = 7;
    std::vector<double> offs = {0, 40, 41, 41, 200, 250, 290};
    auto x = vals(Lr * Kc, 0.125), w = vals(G * Kc * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n)
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
    }
    expect("grouped_mm 2d x 3d many groups", "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
  }
  // Decoding shapes: about as many rows as groups (tokens x top-k against the experts), most groups of 0-2 rows and
  // one longer than the window (its rows past the first window go through the loop). The first windows are one
  // batched product (a dot_general with a batch dimension), with a window below the usual 8 rows; forward and the
  // weight gradient (2-D x 2-D) against host loops.
  for (int64_t Lr : {int64_t(16), int64_t(8)}) {
    const int64_t Kc = 3, Nc = 2, G = 16, P = 2;
    std::vector<double> sizes(size_t(G), 1.0);
    if (Lr == 16) {
      sizes[1] = 0, sizes[2] = 2, sizes[4] = 0, sizes[7] = 0, sizes[9] = 6, sizes[10] = 0, sizes[12] = 0,
      sizes[13] = 0, sizes[15] = 0;  // 2 + 6 + 7 x 1 = 15 rows: the last row is in no group
    } else {
      for (auto& v : sizes) v = 0;
      sizes[0] = 1, sizes[3] = 3, sizes[8] = 1, sizes[11] = 2, sizes[15] = 1;  // 8
    }
    std::vector<double> offs(static_cast<size_t>(G));
    double run_sum = 0;
    for (int64_t g = 0; g < G; ++g) offs[size_t(g)] = run_sum += sizes[size_t(g)];
    auto x = vals(Lr * Kc, 0.125), w = vals(G * Kc * Nc, 0.5), a2 = vals(P * Lr, 0.25), c2 = vals(Lr * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0), want2(static_cast<size_t>(G * P * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n) {
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
        for (int64_t p = 0; p < P; ++p) want2[size_t((g * P + p) * Nc + n)] += a2[size_t(p * Lr + r)] * c2[size_t(r * Nc + n)];
      }
    }
    std::string tag = " decoding, " + std::to_string(Lr) + " rows over 16 groups";
    expect("grouped_mm 2d x 3d" + tag, "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
    expect("grouped_mm 2d x 2d" + tag, "aten::_grouped_mm", {T(f32, {P, Lr}, a2), T(f32, {Lr, Nc}, c2),
           T(s32, {G}, offs), N(), N()}, {{f32, {G, P, Nc}}}, {want2});
    test("grouped_mm" + tag + ": first windows batched", [&] {
      Result r = run("aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w), T(s32, {G}, offs), N(), N()},
                     {{f32, {Lr, Nc}}}, /*execute=*/false);
      CHECK(r.text.find("lhs_batching_dimensions = [0]") != std::string::npos);
    });
  }
}

// float32 -> float8 with PyTorch's rounding, saturation and NaN rules (the bit patterns torch's CPU cast gives), and
// back (exact).
static void mm_f8_casts() {
  const std::vector<double> x = {0.0, -0.0, 1.0, 3.0, 448.0, 464.0, 470.0, 1000.0, kInf, -kInf, kNaN, 1e-3, -1.0 / 512,
                                 5e-6, 57344.0, 61440.0, 70000.0, 240.0, 250.0, 0.3};
  const std::vector<std::pair<DType, std::vector<double>>> want = {
      {DType::F8E4M3FN, {0, 128, 56, 68, 126, 126, 126, 126, 126, 254, 127, 1, 129, 0, 126, 126, 126, 119, 120, 42}},
      {DType::F8E5M2, {0, 128, 60, 66, 95, 95, 95, 100, 124, 252, 127, 20, 152, 0, 123, 124, 124, 92, 92, 53}},
      {DType::F8E4M3FNUZ, {0, 0, 64, 76, 128, 128, 128, 128, 128, 128, 128, 1, 130, 0, 128, 128, 128, 127, 128, 50}},
      {DType::F8E5M2FNUZ, {0, 0, 64, 70, 99, 99, 99, 104, 128, 128, 128, 24, 156, 1, 127, 128, 128, 96, 96, 57}},
      {DType::F8E8M0FNU, {0, 0, 127, 129, 136, 136, 136, 137, 255, 255, 255, 117, 118, 109, 143, 143, 143, 135, 135, 125}},
  };
  const int64_t n = int64_t(x.size());
  for (const auto& [t, bits] : want) {
    const std::string name = std::string("f32 -> ") + shlo::mlirName(t);
    expect(name, "aten::_to_copy", {T(DType::F32, {n}, x), Dt(t), N(), N(), N(), B(false), N()}, {{t, {n}}}, {bits}, 0,
           {t});
    // back to f32: 1.0 and 3.0 (rounded to 4.0 in e8m0) survive
    expect(name + " -> f32", "aten::_to_copy", {T(t, {2}, {bits[2], bits[3]}), Dt(DType::F32), N(), N(), N(), B(false), N()},
           {{DType::F32, {2}}}, {{1.0, t == DType::F8E8M0FNU ? 4.0 : 3.0}}, 0, {DType::F32});
  }
}

// Complex linear algebra (LU, Cholesky, triangular solves, det/slogdet, QR, cross) against PyTorch CPU's results for the
// same inputs. An input element x is x + (1 - x/2)i, so the values below are the real parts of PyTorch's complex
// results (integer and real results are checked whole); they depend on the inputs' imaginary parts and on every
// conjugation. Then complex64 and complex128 calls of each rule compile and run.
void complexLinalgTests() {
  const DType c64 = DType::C64, f32 = DType::F32, s32 = DType::S32;
  // upper: the lower-left element (9) is not read
  expect("complex solve_triangular upper", "aten::linalg_solve_triangular",
         {T(c64, {2, 2}, {3, 7, 9, 4}), T(c64, {2, 1}, {1, 2}), B(true), B(true), B(false)}, {},
         {{-0.885532591, 0.470588235}}, 1e-5, {c64});
  expect("complex solve_triangular right lower unit", "aten::linalg_solve_triangular",
         {T(c64, {2, 2}, {3, 7, 5, 4}), T(c64, {1, 2}, {1, 2}), B(false), B(false), B(true)}, {}, {{-9, 2}}, 1e-5,
         {c64});
  // transpose=True is the plain transpose for complex matrices
  expect("complex triangular_solve transpose", "aten::triangular_solve",
         {T(c64, {2, 1}, {1, 2}), T(c64, {2, 2}, {3, 7, 9, 4}), B(true), B(true), B(false)}, {},
         {{0.297297297, -0.100953895}}, 1e-5, {c64, c64});
  // Cholesky reads one triangle (upper=True: the upper one) and the real part of the diagonal; U = L^H
  expect("complex cholesky_ex upper", "aten::linalg_cholesky_ex",
         {T(c64, {3, 3}, {2, 0.5, 1, 9, 2, 0.5, 9, 9, 2}), B(true), B(false)}, {},
         {{1.41421356, 0.353553391, 0.707106781, 0, 1.26243812, 0.0495073771, 0, 0, 0.863190616}, {0}}, 1e-5,
         {c64, s32});
  expect("complex cholesky_ex lower", "aten::linalg_cholesky_ex",
         {T(c64, {3, 3}, {2, 9, 9, 0.5, 2, 9, 1, 0.5, 2}), B(false), B(false)}, {},
         {{1.41421356, 0, 0, 0.353553391, 1.26243812, 0, 0.707106781, 0.0495073771, 0.863190616}, {0}}, 1e-5,
         {c64, s32});
  expect("complex cholesky upper", "aten::cholesky", {T(c64, {3, 3}, {2, 0.5, 1, 9, 2, 0.5, 9, 9, 2}), B(true)}, {},
         {{1.41421356, 0.353553391, 0.707106781, 0, 1.26243812, 0.0495073771, 0, 0, 0.863190616}}, 1e-5, {c64});
  expect("f32 cholesky_ex upper reads the upper triangle", "aten::linalg_cholesky_ex",
         {T(f32, {3, 3}, {4, 1, 0.5, 9, 3, 0.25, 9, 9, 2}), B(true), B(false)}, {},
         {{2, 0.5, 0.25, 0, 1.6583124, 0.0753778361, 0, 0, 1.38989862}, {0}}, 1e-5, {f32, s32});
  expect("complex cholesky_solve upper", "aten::_cholesky_solve_helper",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {2, 0.5, 9, 3}), B(true)}, {},
         {{0.170608108, 0.39527027, 0.277027027, 0.378378378}}, 1e-5, {c64});
  // a Cholesky factor's diagonal is real (LAPACK's potri reads only its real part)
  expect("complex cholesky_inverse lower", "aten::cholesky_inverse", {T(c64, {2, 2}, {2, 9, 0.5, 2}), B(false)}, {},
         {{0.30078125, -0.0625, -0.0625, 0.25}}, 1e-5, {c64});
  // the pivot is LAPACK's: the largest |re| + |im| (-0.8 + 1.4i, 2.2), not the largest modulus (2 + 0i)
  expect("complex lu_factor_ex pivot", "aten::linalg_lu_factor_ex", {T(c64, {2, 2}, {2, 1, -0.8, 3}), B(true), B(false)},
         {}, {{-0.8, 3, -0.615384615, 3.38461538}, {2, 2}, {0}}, 1e-5, {c64, s32, s32});
  expect("complex det", "aten::_linalg_det", {T(c64, {2, 2}, {1, 2, 3, 4})}, {}, {{-1.5}}, 1e-5, {c64, c64, s32});
  // sign is the phase det / |det| = -0.6 + 0.8i; logabsdet real
  expect("complex slogdet", "aten::_linalg_slogdet", {T(c64, {2, 2}, {1, 2, 3, 4})},
         {{c64, {}}, {f32, {}}, {c64, {2, 2}}, {s32, {2}}}, {{-0.6}, {0.916290732}}, 1e-5, {c64, f32, c64, s32});
  expect("complex inv", "aten::linalg_inv_ex", {T(c64, {2, 2}, {1, 2, 3, 4}), B(false)}, {},
         {{-1.28, 0.48, 0.88, -0.08}, {0}}, 1e-5, {c64, s32});
  expect("complex lu_solve right adjoint", "aten::linalg_lu_solve",
         {T(c64, {2, 2}, {3, 1, 0.5, 2}), T(s32, {2}, {2, 2}), T(c64, {2, 2}, {1, 2, 3, 4}), B(false), B(true)},
         {{c64, {2, 2}}}, {{0.432432432, 0, 0.658783784, 0.875}}, 1e-5, {c64});
  expect("complex solve right", "aten::_linalg_solve_ex",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {1, 0, 2, -1}), B(false), B(false)},
         {{c64, {2, 2}}, {c64, {2, 2}}, {s32, {2}}, {s32, {}}}, {{-1.6, 0.6, -4.7, 1.7}}, 1e-5, {c64});
  expect("complex solve", "aten::_linalg_solve_ex",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {1, 0, 2, -1}), B(true), B(false)},
         {{c64, {2, 2}}, {c64, {2, 2}}, {s32, {2}}, {s32, {}}}, {{0.2, -0.4, 0.3, -0.1}}, 1e-5, {c64});
  expect("complex lu_unpack", "aten::lu_unpack",
         {T(c64, {3, 3}, {3, 1, 2, 0.5, 2, 1, -1, 0.25, 4}), T(s32, {3}, {3, 2, 3}), B(true), B(true)},
         {{c64, {3, 3}}, {c64, {3, 3}}, {c64, {3, 3}}},
         {{0, 0, 1, 0, 1, 0, 1, 0, 0}, {1, 0, 0, 0.5, 1, 0, -1, 0.25, 1}, {3, 1, 2, 0, 2, 1, 0, 0, 4}}, 1e-6,
         {c64, c64, c64});
  expect("complex cross", "aten::linalg_cross", {T(c64, {3}, {1, 2, 3}), T(c64, {3}, {4, -1, 0.5}), I(-1)}, {},
         {{3.25, 11.375, -9.75}}, 1e-5, {c64});

  // QR with LAPACK's Householder conventions (R's diagonal real, beta = -sign(Re alpha) * norm)
  expect("complex qr reduced", "aten::linalg_qr", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("reduced")},
         {{c64, {3, 2}}, {c64, {2, 2}}},
         {{-0.162757692, -0.392896531, -0.488273075, -0.711688022, -0.813788459, 0.447426655},
          {-6.14410286, -1.17999327, 0, -4.7364306}}, 1e-5, {c64, c64});
  expect("complex qr complete", "aten::linalg_qr", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("complete")},
         {{c64, {3, 3}}, {c64, {3, 2}}},
         {{-0.162757692, -0.392896531, -0.772894705, -0.488273075, -0.711688022, 0.41715685, -0.813788459,
           0.447426655, -0.0592896425},
          {-6.14410286, -1.17999327, 0, -4.7364306, 0, 0}}, 1e-5, {c64, c64});
  expect("f32 qr reduced", "aten::linalg_qr", {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("reduced")},
         {{f32, {3, 2}}, {f32, {2, 2}}},
         {{-0.169030905, -0.403187543, -0.507092595, -0.746888041, -0.845154345, 0.528770208},
          {-5.91607952, -1.5212779, 0, -4.32269764}}, 1e-5, {f32, f32});
  // Hermitian eigendecomposition (eigenvalues ascending, from the chosen triangle) and singular values (descending)
  const std::vector<double> sym3 = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2};
  expect("f32 eigh lower", "aten::_linalg_eigh", {T(f32, {3, 3}, sym3), Str("L"), B(true)}, {{f32, {3}}, {f32, {3, 3}}},
         {{1.88168021, 2.38676037, 4.73155942}}, 1e-5, {f32, f32});
  expect("f32 eigh upper reads the upper triangle", "aten::_linalg_eigh",
         {T(f32, {3, 3}, {4, 1, 0.5, 7, 3, 0.25, 9, -5, 2}), Str("U"), B(false)}, {{f32, {3}}, {f32, {0}}},
         {{1.88168021, 2.38676037, 4.73155942}}, 1e-5, {f32});
  expect("complex eigh lower", "aten::_linalg_eigh", {T(c64, {3, 3}, sym3), Str("L"), B(true)},
         {{f32, {3}}, {c64, {3, 3}}}, {{1.30702261, 2.52702075, 5.16595664}}, 1e-5, {f32, c64});
  expect("f32 svd", "aten::_linalg_svd", {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), B(true), B(true), N()},
         {{f32, {3, 3}}, {f32, {2}}, {f32, {2, 2}}}, {{}, {6.27708167, 4.07409447}}, 1e-5, {f32, f32, f32});
  expect("complex svd", "aten::_linalg_svd", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), B(false), B(true), N()},
         {{c64, {3, 2}}, {f32, {2}}, {c64, {2, 2}}}, {{}, {6.4562319, 4.50744603}}, 1e-5, {c64, f32, c64});
  expect("complex logaddexp", "aten::logaddexp", {T(c64, {2}, {1, 2}), T(c64, {2}, {0.5, 3})}, {{c64, {2}}},
         {{1.46671739, 3.28859437}}, 1e-5, {c64});
  expect("complex householder_product", "aten::linalg_householder_product",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5})}, {{c64, {3, 2}}},
         {{0.5, -11.640625, -1.875, -37.5, -3.625, -62.5625}}, 1e-5, {c64});
  // ormqr: transpose is the conjugate transpose for complex Q
  expect("complex ormqr left adjoint", "aten::ormqr",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5}), T(c64, {3, 2}, {1, 0, 2, -1, 3, 1}), B(true),
          B(true)},
         {{c64, {3, 2}}}, {{-13, -7, -273.746094, -42.2265625, 187.714844, 118.039062}}, 1e-5, {c64});
  expect("complex ormqr right", "aten::ormqr",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5}), T(c64, {2, 3}, {1, 0, 2, -1, 3, 1}), B(false),
          B(false)},
         {{c64, {2, 3}}}, {{-4.375, -127.789062, 59.8320312, -8.125, -157.976562, 97.4804688}}, 1e-5, {c64});
  expect("f32 ormqr left", "aten::ormqr",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), T(f32, {2}, {0.5, 1.5}), T(f32, {3, 2}, {1, 0, 2, -1, 3, 1}), B(true),
          B(false)},
         {{f32, {3, 2}}}, {{-8.5, 2, -25, 8, -46, 8}}, 1e-5, {f32});

  const DType kComplex[] = {DType::C64, DType::C128};
  auto sq = [](DType t) { return T(t, {2, 3, 3}, {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2, 2, 0, 1, 0, 3, 0, 1, 0, 4}); };
  sweep("aten::linalg_solve_triangular", kComplex,
        [&](DType t) { return std::vector<In>{sq(t), T(t, {2, 3, 2}), B(false), B(true), B(false)}; });
  sweep("aten::linalg_cholesky_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(true), B(false)}; });
  sweep("aten::linalg_lu_factor_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(true), B(false)}; });
  sweep("aten::linalg_qr", kComplex, [&](DType t) { return std::vector<In>{sq(t), Str("complete")}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3, 3}}, {t, {2, 3, 3}}}; });
  sweep("aten::linalg_inv_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(false)}; });
  sweep("aten::_linalg_slogdet", kComplex, [&](DType t) { return std::vector<In>{sq(t)}; }, [](DType t) {
    return std::vector<TensorType>{{t, {2}}, {t == DType::C128 ? DType::F64 : DType::F32, {2}}, {t, {2, 3, 3}}, {DType::S32, {2, 3}}};
  });
}

void numericTests() {
  const DType f32 = DType::F32, s64 = DType::S64;
  // complex numbers: an input element x is x + (1 - x/2)i; complex results are checked by their real parts
  const DType c64 = DType::C64;
  expect("complex abs", "aten::abs", {T(c64, {2}, {3, 0})}, {}, {{std::sqrt(9.25), 1}}, 1e-6, {f32});
  expect("complex angle", "aten::angle", {T(c64, {2}, {1, 4})}, {}, {{std::atan2(0.5, 1.0), std::atan2(-1.0, 4.0)}},
         1e-6, {f32});
  expect("complex mul", "aten::mul.Tensor", {T(c64, {1}, {1}), T(c64, {1}, {4})}, {}, {{4 + 0.5}}, 1e-6, {c64});
  expect("view_as_real", "aten::view_as_real", {T(c64, {2}, {3, 2})}, {}, {{3, -0.5, 2, 0}}, 0, {f32});
  expect("fft r2c", "aten::_fft_r2c", {T(f32, {4}, {1, 2, 3, 4}), L({0}), I(0), B(true)}, {}, {{10, -2, -2}}, 1e-5,
         {c64});
  expect("fft c2c forward", "aten::_fft_c2c", {T(c64, {4}, {1, 2, 3, 4}), L({0}), I(0), B(true)}, {},
         {{10, -1, -2, -3}}, 1e-5, {c64});
  expect("fft c2c inverse by n", "aten::_fft_c2c", {T(c64, {4}, {1, 2, 3, 4}), L({0}), I(2), B(false)}, {},
         {{2.5, -0.75, -0.5, -0.25}}, 1e-5, {c64});
  expect("fft c2r", "aten::_fft_c2r", {T(c64, {3}, {10, -2, -2}), L({0}), I(2), I(4)}, {}, {{1, 2, 3, 4}}, 1e-5,
         {f32});
  // type promotion with wrapped numbers: int tensor + 2.5 -> float32; int8 + int64 wrapped stays int8
  expect("add int + wrapped float", "aten::add.Tensor", {T(DType::S32, {3}, {1, 2, 3}), W(2.5), S(1, K::Int)}, {},
         {{3.5, 4.5, 5.5}}, 1e-6, {f32});
  expect("add int8 + wrapped int", "aten::add.Tensor", {T(DType::S8, {2}, {1, 100}), W(300, K::Int), S(1, K::Int)}, {},
         {{45, -112}}, 0, {DType::S8});
  expect("add alpha", "aten::add.Tensor", {T(f32, {2, 2}, {1, 2, 3, 4}), T(f32, {2}, {10, 20}), S(-2, K::Int)}, {},
         {{-19, -38, -17, -36}});
  expect("add bool", "aten::add.Tensor", {T(DType::Pred, {3}, {0, 1, 0}), T(DType::Pred, {3}, {0, 0, 1}), S(1, K::Int)},
         {}, {{0, 1, 1}}, 0, {DType::Pred});
  expect("add 0-d f64 tensor to int tensor -> f64", "aten::add.Tensor",
         {T(DType::S32, {2}, {1, 2}), T(DType::F64, {}, {0.5}), S(1, K::Int)}, {}, {{1.5, 2.5}}, 0, {DType::F64});
  expect("add f16 + 0-d f32 -> f16", "aten::add.Tensor", {T(DType::F16, {2}, {1, 2}), T(f32, {}, {0.5}), S(1, K::Int)},
         {}, {{1.5, 2.5}}, 0, {DType::F16});
  expect("div int true", "aten::div.Tensor", {T(s64, {3}, {7, -7, 1}), T(s64, {3}, {2, 2, 0})}, {},
         {{3.5, -3.5, kInf}}, 1e-6, {f32});
  expect("div trunc int", "aten::div.Tensor_mode", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {2, 2, -2, -2}), Str("trunc")},
         {}, {{3, -3, -3, 3}}, 0, {s64});
  expect("div floor int", "aten::div.Tensor_mode", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {2, 2, -2, -2}), Str("floor")},
         {}, {{3, -4, -4, 3}}, 0, {s64});
  expect("div floor float", "aten::div.Tensor_mode",
         {T(f32, {5}, {7, -7, 7, -7, 1}), T(f32, {5}, {2, 2, -2, -2, 0}), Str("floor")}, {}, {{3, -4, -4, 3, kInf}});
  expect("div trunc float", "aten::div.Tensor_mode", {T(f32, {2}, {7.5, -7.5}), T(f32, {2}, {2, 2}), Str("trunc")}, {},
         {{3, -3}});
  expect("remainder", "aten::remainder.Tensor", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {3, 3, -3, -3})}, {},
         {{1, 2, -2, -1}}, 0);
  expect("remainder float", "aten::remainder.Tensor", {T(f32, {2}, {-7.5, 7.5}), T(f32, {2}, {2, -2})}, {},
         {{0.5, -0.5}});
  expect("fmod", "aten::fmod.Tensor", {T(s64, {2}, {-7, 7}), T(s64, {2}, {3, -3})}, {}, {{-1, 1}}, 0);
  expect("pow int negative exponents", "aten::pow.Tensor_Tensor",
         {T(s64, {5}, {1, -1, 2, -1, 3}), T(s64, {5}, {-3, -3, -3, -2, 3})}, {}, {{1, -1, 0, 1, 27}}, 0, {s64});
  expect("pow float scalar", "aten::pow.Tensor_Scalar", {T(f32, {3}, {4, 9, 2}), S(0.5)}, {}, {{2, 3, std::sqrt(2.0)}});
  expect("pow int tensor ^ float scalar -> float", "aten::pow.Tensor_Scalar", {T(s64, {2}, {4, 9}), S(0.5)}, {}, {{2, 3}},
         1e-6, {f32});
  expect("pow.Scalar", "aten::pow.Scalar", {S(2, K::Int), T(f32, {3}, {0, 1, 3})}, {}, {{1, 2, 8}});
  expect("maximum NaN", "aten::maximum", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{2, kNaN, kNaN}});
  expect("minimum NaN", "aten::minimum", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{1, kNaN, kNaN}});
  expect("fmax", "aten::fmax", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{2, 0, 3}});
  expect("clamp NaN", "aten::clamp", {T(f32, {4}, {-3, 0.5, 3, kNaN}), S(-1, K::Int), S(1, K::Int)}, {},
         {{-1, 0.5, 1, kNaN}});
  expect("clamp int with float bound -> float", "aten::clamp", {T(s64, {3}, {-3, 0, 3}), N(), S(1.5)}, {},
         {{-3, 0, 1.5}}, 1e-6, {f32});
  expect("lt uint8 vs -1 (wraps to 255)", "aten::lt.Scalar", {T(DType::U8, {2}, {1, 255}), S(-1, K::Int)}, {},
         {{1, 0}}, 0, {DType::Pred});
  expect("lt int vs 2.5", "aten::lt.Scalar", {T(s64, {3}, {2, 3, -1}), S(2.5)}, {}, {{1, 0, 1}}, 0);
  expect("ne NaN", "aten::ne.Tensor", {T(f32, {2}, {kNaN, 1}), T(f32, {2}, {kNaN, 1})}, {}, {{1, 0}}, 0);
  expect("where broadcast", "aten::where.self",
         {T(DType::Pred, {2, 2}, {1, 0, 0, 1}), T(f32, {2, 2}, {1, 2, 3, 4}), W(0)}, {}, {{1, 0, 0, 4}}, 0, {f32});
  expect("masked_fill", "aten::masked_fill.Scalar", {T(f32, {2, 2}, {1, 2, 3, 4}), T(DType::Pred, {2}, {1, 0}), S(-1, K::Int)},
         {}, {{-1, 2, -1, 4}});
  expect("relu", "aten::relu", {T(f32, {4}, {-1, 0, 2, kNaN})}, {}, {{0, 0, 2, kNaN}});
  expect("relu int", "aten::relu", {T(s64, {3}, {-1, 0, 2})}, {}, {{0, 0, 2}}, 0, {s64});
  expect("sign", "aten::sign", {T(f32, {4}, {-2, 0, 3, kNaN})}, {}, {{-1, 0, 1, 0}});
  expect("round half even", "aten::round", {T(f32, {4}, {0.5, 1.5, 2.5, -0.5})}, {}, {{0, 2, 2, -0.0}});
  expect("trunc", "aten::trunc", {T(f32, {3}, {-1.7, 1.7, 0})}, {}, {{-1, 1, 0}});
  expect("exp of int -> float", "aten::exp", {T(s64, {2}, {0, 1})}, {}, {{1, std::exp(1.0)}}, 1e-6, {f32});
  expect("sigmoid", "aten::sigmoid", {T(f32, {3}, {0, 100, -100})}, {}, {{0.5, 1, 0}});
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  auto gelu_t = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  expect("gelu", "aten::gelu", {T(f32, {3}, {-1, 0.5, 2}), Str("none")}, {}, {{gelu(-1), gelu(0.5), gelu(2)}});
  expect("gelu tanh", "aten::gelu", {T(f32, {3}, {-1, 0.5, 2}), Str("tanh")}, {}, {{gelu_t(-1), gelu_t(0.5), gelu_t(2)}});
  {
    auto dg = [&](double x) { return (gelu(x + 1e-4) - gelu(x - 1e-4)) / 2e-4; };
    auto dgt = [&](double x) { return (gelu_t(x + 1e-4) - gelu_t(x - 1e-4)) / 2e-4; };
    expect("gelu_backward", "aten::gelu_backward", {T(DType::F64, {3}, {2, 2, 2}), T(DType::F64, {3}, {-1, 0.5, 2}), Str("none")},
           {}, {{2 * dg(-1), 2 * dg(0.5), 2 * dg(2)}}, 1e-6);
    expect("gelu_backward tanh", "aten::gelu_backward",
           {T(DType::F64, {3}, {2, 2, 2}), T(DType::F64, {3}, {-1, 0.5, 2}), Str("tanh")}, {},
           {{2 * dgt(-1), 2 * dgt(0.5), 2 * dgt(2)}}, 1e-6);
    auto silu = [](double x) { return x / (1 + std::exp(-x)); };
    auto ds = [&](double x) { return (silu(x + 1e-4) - silu(x - 1e-4)) / 2e-4; };
    expect("silu_backward", "aten::silu_backward", {T(DType::F64, {2}, {1, 1}), T(DType::F64, {2}, {-1, 2})}, {},
           {{ds(-1), ds(2)}}, 1e-6);
  }
  expect("threshold_backward", "aten::threshold_backward",
         {T(f32, {3}, {5, 6, 7}), T(f32, {3}, {-1, 0, 1}), S(0, K::Int)}, {}, {{0, 0, 7}});
  expect("tanh_backward", "aten::tanh_backward", {T(f32, {2}, {2, 2}), T(f32, {2}, {0.5, 0})}, {}, {{1.5, 2}});
  expect("lerp", "aten::lerp.Scalar", {T(f32, {2}, {1, 1}), T(f32, {2}, {3, 5}), S(0.75)}, {}, {{2.5, 4}});
  expect("addcdiv", "aten::addcdiv", {T(f32, {2}, {1, 1}), T(f32, {2}, {1, 2}), T(f32, {2}, {4, 4}), S(2, K::Int)}, {},
         {{1.5, 2}});
  expect("bf16 add rounds once", "aten::mul.Tensor", {T(DType::BF16, {1}, {3}), T(DType::BF16, {1}, {1.0078125})}, {},
         {{3.03125}}, 0, {DType::BF16});

  // reductions
  expect("sum dims keepdim", "aten::sum.dim_IntList", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), L({-1}), B(true), N()},
         {{f32, {2, 1}}}, {{6, 15}});
  expect("sum all of bool -> int64", "aten::sum.dim_IntList", {T(DType::Pred, {3}, {1, 0, 1}), N(), B(false), N()}, {},
         {{2}}, 0, {s64});
  expect("sum empty dim list = all", "aten::sum.dim_IntList", {T(f32, {2, 2}, {1, 2, 3, 4}), L({}), B(false), N()}, {},
         {{10}});
  expect("sum of empty", "aten::sum", {T(f32, {0, 3}), N()}, {}, {{0}});
  expect("mean", "aten::mean.dim", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), L({0}), B(false), N()}, {}, {{2.5, 3.5, 4.5}});
  expect("mean bf16 accumulates in f32", "aten::mean",
         {T(DType::BF16, {4}, {256, 1, 1, 1}), N()}, {}, {{65}}, 0, {DType::BF16});  // bf16 sums would give 64
  expect("amax NaN", "aten::amax", {T(f32, {2, 2}, {1, kNaN, 3, 4}), L({1}), B(false)}, {}, {{kNaN, 4}});
  expect("max full", "aten::max", {T(s64, {3}, {1, 7, 3})}, {}, {{7}});
  expect("argmax first max", "aten::argmax", {T(f32, {2, 3}, {1, 5, 5, 7, 0, 7}), I(1), B(false)}, {}, {{1, 0}}, 0,
         {s64});
  expect("argmax flat", "aten::argmax", {T(f32, {2, 3}, {1, 5, 5, 7, 0, 7}), N(), B(false)}, {}, {{3}}, 0);
  expect("argmin NaN", "aten::argmin", {T(f32, {3}, {1, kNaN, 0}), I(0), B(false)}, {}, {{1}}, 0);
  expect("max.dim", "aten::max.dim", {T(f32, {2, 2}, {1, 4, 3, 2}), I(1), B(true)}, {}, {{4, 3}, {1, 0}});
  expect("prod int -> int64", "aten::prod", {T(DType::S32, {3}, {2, 3, 4}), N()}, {}, {{24}}, 0, {s64});
  expect("any", "aten::any.dim", {T(f32, {2, 2}, {0, 0, 0, 2}), I(1), B(false)}, {}, {{0, 1}}, 0, {DType::Pred});
  expect("all", "aten::all", {T(s64, {3}, {1, 2, 0})}, {}, {{0}}, 0);
  expect("var unbiased", "aten::var.correction", {T(f32, {4}, {1, 2, 3, 4}), N(), N(), B(false)}, {}, {{5.0 / 3}});
  expect("var correction 0", "aten::var.correction", {T(f32, {4}, {1, 2, 3, 4}), L({0}), S(0, K::Int), B(false)}, {},
         {{1.25}});
  expect("std_mean", "aten::std_mean.correction", {T(f32, {2, 2}, {1, 3, 2, 2}), L({1}), N(), B(false)}, {},
         {{std::sqrt(2.0), 0}, {2, 2}});
  expect("vector norm 2", "aten::linalg_vector_norm", {T(f32, {2}, {3, -4}), SS(2), N(), B(false), N()}, {}, {{5}});
  expect("vector norm inf", "aten::linalg_vector_norm", {T(f32, {2}, {3, -4}), SS(INFINITY), N(), B(false), N()}, {},
         {{4}});
  expect("vector norm 3", "aten::linalg_vector_norm", {T(f32, {2}, {1, 2}), SS(3), N(), B(false), N()}, {},
         {{std::cbrt(9.0)}});
  expect("logsumexp", "aten::logsumexp", {T(f32, {2, 2}, {0, 0, -kInf, -kInf}), L({1}), B(false)}, {},
         {{std::log(2.0), -kInf}});
  expect("cumsum int -> int64", "aten::cumsum", {T(DType::S32, {2, 3}, {1, 2, 3, 4, 5, 6}), I(1), N()}, {},
         {{1, 3, 6, 4, 9, 15}}, 0, {s64});
  expect("cumprod", "aten::cumprod", {T(f32, {4}, {1, 2, 3, 4}), I(0), N()}, {}, {{1, 2, 6, 24}});

  // linalg
  expect("mm", "aten::mm", {T(f32, {2, 2}, {1, 2, 3, 4}), T(f32, {2, 2}, {5, 6, 7, 8})}, {}, {{19, 22, 43, 50}});
  expect("mm int", "aten::mm", {T(s64, {1, 2}, {1, 2}), T(s64, {2, 1}, {3, 4})}, {}, {{11}}, 0, {s64});
  expect("addmm beta 0 ignores NaN", "aten::addmm",
         {T(f32, {2}, {kNaN, kNaN}), T(f32, {1, 2}, {1, 2}), T(f32, {2, 2}, {1, 0, 0, 1}), S(0, K::Int), S(2, K::Int)},
         {}, {{2, 4}});
  expect("addmm bias", "aten::addmm",
         {T(f32, {2}, {10, 20}), T(f32, {1, 2}, {1, 2}), T(f32, {2, 2}, {1, 0, 0, 1}), S(0.5), S(1, K::Int)}, {},
         {{6, 12}});
  expect("bmm", "aten::bmm", {T(f32, {2, 1, 2}, {1, 2, 3, 4}), T(f32, {2, 2, 1}, {1, 1, 2, 2})}, {}, {{3, 14}});
  expect("dot", "aten::dot", {T(f32, {3}, {1, 2, 3}), T(f32, {3}, {4, 5, 6})}, {}, {{32}});
  expect("_int_mm", "aten::_int_mm", {T(DType::S8, {1, 3}, {100, 100, -100}), T(DType::S8, {3, 1}, {127, 127, 1})},
         {{DType::S32, {1, 1}}}, {{25300}}, 0, {DType::S32});
  expect("mm.dtype bf16 -> f32 keeps the f32 sum", "aten::mm.dtype",
         {T(DType::BF16, {1, 3}, {256, 1, 1}), T(DType::BF16, {3, 1}, {1, 1, 1}), Dt(f32)}, {{f32, {1, 1}}}, {{258}}, 0,
         {f32});
  // 1.0, 2.0, -1.0, 0.5, 0, 4.0 (e4m3fn bits) x 1, 2, 1, 1, 1, 0.5; scales 0.5 and 2 cancel
  expect("_scaled_mm tensor-wise", "aten::_scaled_mm",
         {T(DType::F8E4M3FN, {2, 3}, {0x38, 0x40, 0xb8, 0x30, 0x00, 0x48}),
          T(DType::F8E4M3FN, {3, 2}, {0x38, 0x38, 0x40, 0x38, 0x38, 0x30}), T(f32, {}, {0.5}), T(f32, {}, {2.0}), N(), N(),
          Dt(f32), B(false)},
         {{f32, {2, 2}}}, {{4, 2.5, 4.5, 2.5}}, 0, {f32});
  mm_f8_casts();
  expect("mm bf16 accumulates in f32", "aten::mm",
         {T(DType::BF16, {1, 3}, {256, 1, 1}), T(DType::BF16, {3, 1}, {1, 1, 1})}, {}, {{258}}, 0, {DType::BF16});

  // factory
  expect("fill", "aten::fill.Scalar", {T(s64, {3}), S(7, K::Int)}, {}, {{7, 7, 7}}, 0, {s64});
  expect("to_copy float->int truncates", "aten::_to_copy", {T(f32, {3}, {-1.7, 1.7, 2}), Dt(DType::S32)}, {},
         {{-1, 1, 2}}, 0, {DType::S32});
  expect("to_copy float->bool", "aten::_to_copy", {T(f32, {3}, {0, 0.1, kNaN}), Dt(DType::Pred)}, {}, {{0, 1, 1}}, 0);
  expect("arange", "aten::arange.start_out",
         {named(S(1.0), "start"), named(S(2, K::Int), "end"), named(S(0.25), "step"), named(T(f32, {4}), "out")},
         {{f32, {4}}}, {{1, 1.25, 1.5, 1.75}});
  expect("arange int", "aten::arange.start_out",
         {named(S(-3, K::Int), "start"), named(S(3, K::Int), "end"), named(S(2, K::Int), "step"), named(T(s64, {3}), "out")},
         {{s64, {3}}}, {{-3, -1, 1}}, 0);
  test("uniform_ range and spread", [&] {
    Result r = run("aten::uniform_", {T(f32, {1000}), DS(2), DS(5), N()});
    double lo = 1e9, hi = -1e9, mean = 0;
    for (double v : r.vals[0]) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      mean += v / 1000;
    }
    CHECK(lo >= 2 && hi < 5 && hi > 4.9 && lo < 2.1);
    CHECK(std::fabs(mean - 3.5) < 0.15);
  });
  test("normal_ moments", [&] {
    Result r = run("aten::normal_", {T(f32, {4000}), D(1), DS(2), N()});
    double mean = 0, var = 0;
    for (double v : r.vals[0]) mean += v / 4000;
    for (double v : r.vals[0]) var += (v - mean) * (v - mean) / 4000;
    CHECK(std::fabs(mean - 1) < 0.15);
    CHECK(std::fabs(std::sqrt(var) - 2) < 0.15);
  });
  test("bernoulli_ rate", [&] {
    Result r = run("aten::bernoulli_.float", {T(f32, {4000}), D(0.25), N()});
    double mean = 0;
    for (double v : r.vals[0]) {
      CHECK(v == 0 || v == 1);
      mean += v / 4000;
    }
    CHECK(std::fabs(mean - 0.25) < 0.05);
  });
  test("randperm is a permutation", [&] {
    Result r = run("aten::randperm.generator_out", {I(300), N(), T(s64, {300})}, {{s64, {300}}});
    std::set<double> seen(r.vals[0].begin(), r.vals[0].end());
    CHECK(seen.size() == 300 && *seen.begin() == 0 && *seen.rbegin() == 299);
    CHECK(r.vals[0] != std::vector<double>(seen.begin(), seen.end()));  // shuffled
  });
  test("random_ range", [&] {
    Result r = run("aten::random_.from", {T(s64, {1000}), I(-3), I(4), N()});
    std::set<double> seen(r.vals[0].begin(), r.vals[0].end());
    CHECK(*seen.begin() == -3 && *seen.rbegin() == 3 && seen.size() == 7);
  });

  // nn
  expect("softmax", "aten::_softmax", {T(f32, {2, 2}, {0, std::log(3.0), 1000, 1000}), I(1), B(false)}, {},
         {{0.25, 0.75, 0.5, 0.5}});
  expect("softmax half_to_float", "aten::_softmax", {T(DType::BF16, {2}, {0, 0}), I(0), B(true)}, {}, {{0.5, 0.5}}, 0,
         {f32});
  expect("log_softmax", "aten::_log_softmax", {T(f32, {2}, {0, std::log(3.0)}), I(0), B(false)}, {},
         {{std::log(0.25), std::log(0.75)}});
  expect("softmax_backward", "aten::_softmax_backward_data",
         {T(f32, {2}, {1, 0}), T(f32, {2}, {0.25, 0.75}), I(0), Dt(f32)}, {}, {{0.25 * 0.75, -0.25 * 0.75}});
  expect("log_softmax_backward", "aten::_log_softmax_backward_data",
         {T(f32, {2}, {1, 0}), T(f32, {2}, {std::log(0.25), std::log(0.75)}), I(0), Dt(f32)}, {}, {{0.75, -0.75}});
  expect("layer_norm", "aten::native_layer_norm",
         {T(f32, {1, 4}, {1, 2, 3, 4}), L({4}), T(f32, {4}, {1, 1, 2, 2}), T(f32, {4}, {0, 0, 0, 1}), D(0)}, {},
         {{-1.5 / std::sqrt(1.25), -0.5 / std::sqrt(1.25), 1.0 / std::sqrt(1.25), 3.0 / std::sqrt(1.25) + 1},
          {2.5},
          {1 / std::sqrt(1.25)}});
  {
    // layer norm backward vs finite differences of sum(g * layer_norm(x)) in f64
    std::vector<double> x = {0.3, -1.2, 2.0, 0.7}, g = {1.0, -2.0, 0.5, 3.0}, w = {0.5, 1.5, -1.0, 2.0};
    auto f = [&](const std::vector<double>& xs) {
      double m = 0, v = 0;
      for (double e : xs) m += e / 4;
      for (double e : xs) v += (e - m) * (e - m) / 4;
      double s = 0;
      for (int k = 0; k < 4; ++k) s += g[k] * w[k] * (xs[k] - m) / std::sqrt(v + 1e-5);
      return s;
    };
    std::vector<double> dx(4);
    for (int k = 0; k < 4; ++k) {
      auto xp = x, xm = x;
      xp[k] += 1e-6;
      xm[k] -= 1e-6;
      dx[k] = (f(xp) - f(xm)) / 2e-6;
    }
    double m = 0, v = 0;
    for (double e : x) m += e / 4;
    for (double e : x) v += (e - m) * (e - m) / 4;
    double rstd = 1 / std::sqrt(v + 1e-5);
    std::vector<double> dw(4), db = g;
    for (int k = 0; k < 4; ++k) dw[k] = g[k] * (x[k] - m) * rstd;
    expect("layer_norm_backward", "aten::native_layer_norm_backward",
           {T(DType::F64, {1, 4}, g), T(DType::F64, {1, 4}, x), L({4}), T(DType::F64, {1, 1}, {m}),
            T(DType::F64, {1, 1}, {rstd}), T(DType::F64, {4}, w), T(DType::F64, {4}), BL({true, true, true})},
           {}, {dx, dw, db}, 1e-5);
  }
  expect("embedding", "aten::embedding",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, 6}), T(s64, {2, 2}, {2, 0, 1, 2}), I(-1), B(false), B(false)}, {},
         {{5, 6, 1, 2, 3, 4, 5, 6}});
  // rows 0 (norm 5 > 2: scaled by 2 / (5 + 1e-7)) and 2 (norm 1: kept) named, row 1 (norm 10) not named
  expect("embedding_renorm_", "aten::embedding_renorm_",
         {T(f32, {3, 2}, {3, 4, 6, 8, 0.6, 0.8}), T(s64, {3}, {0, 2, 0}), D(2.0), DS(2.0)}, {},
         {{3 * 2 / (5 + 1e-7), 4 * 2 / (5 + 1e-7), 6, 8, 0.6, 0.8}});
  expect("embedding_dense_backward", "aten::embedding_dense_backward",
         {T(f32, {3, 2}, {1, 1, 2, 2, 3, 3}), T(s64, {3}, {2, 0, 2}), I(4), I(0), B(false)}, {},
         {{0, 0, 0, 0, 4, 4, 0, 0}});
  expect("embedding_dense_backward scale", "aten::embedding_dense_backward",
         {T(f32, {3, 2}, {1, 1, 2, 2, 3, 3}), T(s64, {3}, {2, 0, 2}), I(4), I(-1), B(true)}, {},
         {{2, 2, 0, 0, 2, 2, 0, 0}});
  expect("index_select", "aten::index_select", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), I(1), T(s64, {2}, {2, 0})}, {},
         {{3, 1, 6, 4}});
  // nll_loss: self = log-probs [3, 2], targets {1, -100, 0}, weight {1, 2}
  expect("nll_loss mean weighted ignore", "aten::nll_loss_forward",
         {T(f32, {3, 2}, {-1, -2, -3, -4, -5, -6}), T(s64, {3}, {1, -100, 0}), T(f32, {2}, {1, 2}), I(1), I(-100)}, {},
         {{(2 * 2 + 5 * 1) / 3.0}, {3}});
  expect("nll_loss none", "aten::nll_loss_forward",
         {T(f32, {3, 2}, {-1, -2, -3, -4, -5, -6}), T(s64, {3}, {1, -100, 0}), N(), I(0), I(-100)}, {}, {{2, 0, 5}});
  expect("nll_loss sum 1-d", "aten::nll_loss_forward",
         {T(f32, {2}, {-1, -2}), T(s64, {}, {1}), N(), I(2), I(-100)}, {}, {{2}, {1}});
  expect("nll_loss_backward mean", "aten::nll_loss_backward",
         {T(f32, {}, {1}), T(f32, {3, 2}), T(s64, {3}, {1, -100, 0}), T(f32, {2}, {1, 2}), I(1), I(-100), T(f32, {}, {3})},
         {}, {{0, -2.0 / 3, 0, 0, -1.0 / 3, 0}});
  expect("mse_loss mean", "aten::mse_loss", {T(f32, {2}, {1, 3}), T(f32, {2}, {0, 0}), I(1)}, {}, {{5}});
  expect("mse_loss_backward", "aten::mse_loss_backward",
         {T(f32, {}, {1}), T(f32, {2}, {1, 3}), T(f32, {2}, {0, 0}), I(1)}, {}, {{1, 3}});
  test("dropout keeps about 1-p and scales", [&] {
    Result r = run("aten::native_dropout", {T(f32, {2000}, std::vector<double>(2000, 1.0)), D(0.25), B(true)});
    double kept = 0;
    for (size_t k = 0; k < 2000; ++k) {
      CHECK(r.vals[0][k] == 0 || std::fabs(r.vals[0][k] - 4.0 / 3) < 1e-6);
      CHECK((r.vals[0][k] != 0) == (r.vals[1][k] != 0));
      kept += r.vals[1][k] / 2000;
    }
    CHECK(std::fabs(kept - 0.75) < 0.05);
  });

  // shape
  expect("cat skips legacy empty", "aten::cat",
         {TL({T(f32, {1, 2}, {1, 2}), T(f32, {0}), T(f32, {1, 2}, {3, 4})}), I(-1)}, {}, {{1, 2, 3, 4}});
  expect("cat promotes", "aten::cat", {TL({T(s64, {1}, {1}), T(f32, {1}, {2.5})}), I(0)}, {}, {{1, 2.5}}, 0, {f32});
  expect("stack", "aten::stack", {TL({T(f32, {2}, {1, 2}), T(f32, {2}, {3, 4})}), I(1)}, {}, {{1, 3, 2, 4}});
  expect("constant_pad_nd", "aten::constant_pad_nd", {T(f32, {1, 2}, {1, 2}), L({1, -1}), S(9, K::Int)}, {}, {{9, 1}});
  expect("gather", "aten::gather", {T(f32, {2, 2}, {1, 2, 3, 4}), I(1), T(s64, {2, 2}, {0, 0, 1, 0}), B(false)}, {},
         {{1, 1, 4, 3}});
  expect("scatter.src", "aten::scatter.src",
         {T(f32, {2, 3}), I(1), T(s64, {1, 2}, {2, 0}), T(f32, {2, 2}, {7, 8, 9, 9})}, {},
         {{8, pattern(f32, 6)[1], 7, pattern(f32, 6)[3], pattern(f32, 6)[4], pattern(f32, 6)[5]}});
  // weight norm: rows (3, 4) and (0, 5) have norms 5 and 5; g = (10, 1)
  expect("weight_norm", "aten::_weight_norm_interface", {T(f32, {2, 2}, {3, 4, 0, 5}), T(f32, {2, 1}, {10, 1}), I(0)},
         {{DType::F32, {2, 2}}, {DType::F32, {2, 1}}}, {{6, 8, 0, 1}, {5, 5}});
  // col2im / im2col (F.fold / F.unfold), 1-d patches of width 2; padding 1 on the right of the width
  expect("col2im overlap-add", "aten::col2im", {T(f32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}), L({1, 4}), L({1, 2}), L({1, 1}),
         L({0, 0}), L({1, 1})}, {{DType::F32, {1, 1, 1, 4}}}, {{1, 6, 8, 6}});
  expect("col2im padding dropped", "aten::col2im", {T(f32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}), L({1, 2}), L({1, 2}),
         L({1, 1}), L({0, 1}), L({1, 1})}, {{DType::F32, {1, 1, 1, 2}}}, {{6, 8}});
  expect("im2col padding reads zeros", "aten::im2col", {T(f32, {1, 1, 1, 3}, {1, 2, 3}), L({1, 2}), L({1, 1}),
         L({0, 1}), L({1, 1})}, {{DType::F32, {1, 2, 4}}}, {{0, 1, 2, 3, 1, 2, 3, 0}});
  expect("scatter_add duplicates", "aten::scatter_add",
         {T(f32, {3}, {0, 0, 0}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {1, 2, 3})}, {}, {{0, 3, 3}});
  expect("scatter_reduce amax exclude self", "aten::scatter_reduce.two",
         {T(f32, {3}, {10, 10, 10}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {1, 2, 3}), Str("amax"), B(false)}, {},
         {{10, 2, 3}});
  expect("scatter_reduce mean", "aten::scatter_reduce.two",
         {T(f32, {3}, {3, 3, 3}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {0, 3, 5}), Str("mean"), B(true)}, {},
         {{3, 2, 4}});
  expect("index_add", "aten::index_add",
         {T(f32, {3}, {0, 0, 0}), I(0), T(s64, {2}, {2, 2}), T(f32, {2}, {1, 2}), S(2, K::Int)}, {}, {{0, 0, 6}});
  expect("index.Tensor adjacent", "aten::index.Tensor",
         {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), TL({N(), T(s64, {2}, {2, -3})})}, {{f32, {2, 2}}}, {{3, 1, 6, 4}});
  expect("index.Tensor two", "aten::index.Tensor",
         {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), TL({T(s64, {2}, {1, 0}), T(s64, {2}, {0, 2})})}, {}, {{4, 3}});
  expect("index.Tensor non-adjacent", "aten::index.Tensor",
         {T(f32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), TL({T(s64, {1}, {1}), N(), T(s64, {1}, {0})})}, {{f32, {1, 2}}},
         {{4, 6}});
  expect("index_put accumulate", "aten::index_put",
         {T(f32, {3}, {0, 0, 0}), TL({T(s64, {3}, {0, 0, 2})}), T(f32, {3}, {1, 2, 3}), B(true)}, {}, {{3, 0, 3}});
  expect("index_put rows", "aten::index_put",
         {T(f32, {2, 2}, {0, 0, 0, 0}), TL({T(s64, {1}, {1})}), T(f32, {2}, {5, 6}), B(false)}, {}, {{0, 0, 5, 6}});
  expect("index_put mask", "aten::index_put",
         {T(f32, {3}, {1, 2, 3}), TL({T(DType::Pred, {3}, {1, 0, 1})}), T(f32, {}, {0}), B(false)}, {}, {{0, 2, 0}});
  // a lone mask with one row for every selected row (x[mask] = pad_token): data-independent, a select
  expect("index_put mask row", "aten::index_put",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, 6}), TL({T(DType::Pred, {3}, {0, 1, 1})}), T(f32, {1, 2}, {7, 8}), B(false)}, {},
         {{1, 2, 7, 8, 7, 8}});
  expect("index_put mask after a slice, accumulate", "aten::index_put",
         {T(f32, {2, 2}, {1, 2, 3, 4}), TL({N(), T(DType::Pred, {2}, {1, 0})}), T(f32, {2, 1}, {10, 20}), B(true)}, {},
         {{11, 2, 23, 4}});
  expect("flip", "aten::flip", {T(f32, {2, 2}, {1, 2, 3, 4}), L({0})}, {}, {{3, 4, 1, 2}});
  expect("roll", "aten::roll", {T(f32, {4}, {1, 2, 3, 4}), L({1}), L({0})}, {}, {{4, 1, 2, 3}});
  expect("roll flat", "aten::roll", {T(f32, {2, 2}, {1, 2, 3, 4}), L({-1}), L({})}, {}, {{2, 3, 4, 1}});
  expect("tril", "aten::tril", {T(f32, {2, 2}, {1, 2, 3, 4}), I(0)}, {}, {{1, 0, 3, 4}});
  expect("triu -1", "aten::triu", {T(f32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), I(1)}, {}, {{0, 2, 3, 0, 0, 6, 0, 0, 0}});
  expect("repeat", "aten::repeat", {T(f32, {2}, {1, 2}), L({2, 2})}, {}, {{1, 2, 1, 2, 1, 2, 1, 2}});
  expect("sort descending", "aten::sort", {T(f32, {4}, {1, 3, kNaN, 2}), I(0), B(true)}, {},
         {{kNaN, 3, 2, 1}, {2, 1, 3, 0}});
  expect("topk", "aten::topk", {T(f32, {4}, {1, 3, 0, 2}), I(2), I(0), B(true), B(true)}, {}, {{3, 2}, {1, 3}});
  expect("slice_backward", "aten::slice_backward", {T(f32, {2}, {1, 2}), L({5}), I(0), I(1), I(4), I(2)}, {},
         {{0, 1, 0, 2, 0}});
  expect("select_backward", "aten::select_backward", {T(f32, {2}, {1, 2}), L({2, 3}), I(1), I(-1)}, {},
         {{0, 0, 1, 0, 0, 2}});
  expect("slice_scatter", "aten::slice_scatter",
         {T(f32, {4}, {1, 1, 1, 1}), T(f32, {2}, {7, 8}), I(0), I(0), N(), I(2)}, {}, {{7, 1, 8, 1}});

  // ---- the tpu namespace: fused kernels and foreign programs ----
  expect("tpu::swiglu", "tpu::swiglu", {T(f32, {3}, {-1, 0, 2}), T(f32, {3}, {2, 3, -1})}, {},
         {{-0.53788284274, 0, -1.76159415596}});
  expect("tpu::swiglu bf16", "tpu::swiglu", {T(DType::BF16, {2}, {-1, 2}), T(DType::BF16, {2}, {2, -1})}, {},
         {{-0.5390625, -1.7578125}}, 1e-6, {DType::BF16});
  expect("tpu::swiglu_backward", "tpu::swiglu_backward",
         {T(f32, {3}, {1, 1, 1}), T(f32, {3}, {-1, 0, 2}), T(f32, {3}, {2, 3, -1})}, {},
         {{0.14465897626, 1.5, -1.09078424878}, {-0.26894142137, 0, 1.76159415596}});
  lowering::registerForeignProgram(
      "lowering_test.kernel",
      "func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {\n"
      "  %0 = stablehlo.add %a, %b : tensor<2xf32>\n"
      "  %1 = stablehlo.multiply %a, %b : tensor<2xf32>\n"
      "  return %0, %1 : tensor<2xf32>, tensor<2xf32>\n"
      "}\n");
  expect("tpu::stablehlo_call", "tpu::stablehlo_call",
         {TL({T(f32, {2}, {1, 2}), T(f32, {2}, {3, 4})}), Str("lowering_test.kernel")}, {{f32, {2}}, {f32, {2}}},
         {{4, 6}, {3, 8}});
  test("tpu::stablehlo_call: no program for the argument types", [] {
    bool threw = false;
    try {
      run("tpu::stablehlo_call", {TL({T(f32, {3}, {1, 2, 3}), T(f32, {3}, {3, 4, 5})}), Str("lowering_test.kernel")},
          {{f32, {3}}, {f32, {3}}});
    } catch (const LoweringError& e) {
      threw = std::string(e.what()).find("no program of kernel 'lowering_test.kernel' takes (tensor<3xf32>, "
                                         "tensor<3xf32>); registered:") != std::string::npos;
    }
    CHECK(threw);
  });
}
