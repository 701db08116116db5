// Special functions: polygamma, Hurwitz zeta and the incomplete gamma functions (PyTorch's Cephes algorithms),
// xlog1py, the modified Bessel functions i0/i0e/i1/i1e, spherical Bessel j0, erfcx, log_ndtr, ndtri, entr, and the
// orthogonal polynomials of torch.special (Chebyshev, Hermite, Laguerre, Legendre). CHLO ops serve where XLA has them.
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/pointwise.h"

namespace torch_tpu::lowering {
namespace {

using shlo::isFloat;

// Hurwitz zeta(x, q) as PyTorch CPU computes it (Cephes: a direct sum until a > 9, then Euler-Maclaurin), with the
// loops unrolled under "done" masks (the direct sum runs at most 30 terms: exact for q >= -20).
Value zetaCephes(Builder& b, Value x, Value q) {
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const double kMachep = 1.11022302462515654042E-16;
  Value one = cst(b, 1, x), zero = cst(b, 0, x), nine = cst(b, 9, x), eps = cst(b, kMachep, x);
  Value negx = b.neg(x);
  Value s = b.pow(q, negx), a = q, bb = b.zerosLike(x);
  Value done = b.constantF(0, DType::Pred, x.shape());
  for (int it = 1; it <= 30; ++it) {
    Value cont = b.notOp(done);
    if (it > 9) cont = b.andOp(cont, b.compare(a, nine, Cmp::LE));
    Value an = b.add(a, one), bn = b.pow(an, negx), sn = b.add(s, bn);
    a = b.select(cont, an, a);
    bb = b.select(cont, bn, bb);
    s = b.select(cont, sn, s);
    Value conv = b.andOp(b.compare(b.neg(b.mul(eps, sn)), bn, Cmp::LT), b.compare(bn, b.mul(eps, sn), Cmp::LT));
    done = b.orOp(done, b.andOp(cont, conv));
  }
  Value w = a;
  Value st = b.sub(b.add(s, b.div(b.mul(bb, w), b.sub(x, one))), b.mul(cst(b, 0.5, x), bb));
  s = b.select(done, s, st);
  Value aa = one, k = zero;
  for (int i = 0; i < 12; ++i) {
    aa = b.mul(aa, b.add(x, k));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(aa, bb), cst(b, A[i], x));
    Value sn = b.add(s, t);
    s = b.select(done, s, sn);
    done = b.orOp(done, b.compare(b.abs(b.div(t, sn)), eps, Cmp::LT));
    k = b.add(k, one);
    aa = b.mul(aa, b.add(x, k));
    bb = b.div(bb, w);
    k = b.add(k, one);
  }
  Value inf = cst(b, INFINITY, x), nan = cst(b, NAN, x);
  Value qneg = b.compare(q, zero, Cmp::LE);
  s = b.select(b.andOp(qneg, b.compare(x, b.floor(x), Cmp::NE)), nan, s);
  s = b.select(b.andOp(qneg, b.compare(q, b.floor(q), Cmp::EQ)), inf, s);
  s = b.select(b.compare(x, one, Cmp::LT), nan, s);
  return b.select(b.compare(x, one, Cmp::EQ), inf, s);
}

// Orthogonal polynomials of PyTorch's special_* family, evaluated like PyTorch CPU: the three-term recurrence
// (unrolled to degree kMaxDegree, the result picked at n = trunc(degree argument)), with PyTorch's special cases
// and trigonometric forms for high degrees inside (-1, 1).
constexpr int kMaxDegree = 40;
enum class Poly { T, U, V, W, H, He, L, P, ST, SU, SV, SW };

Value orthoPoly(Builder& b, Value x, Value n, Poly kind) {
  Value one = cst(b, 1, x), two = cst(b, 2, x), zero = cst(b, 0, x);
  auto c = [&](double v) { return cst(b, v, x); };
  bool shifted = kind == Poly::ST || kind == Poly::SU || kind == Poly::SV || kind == Poly::SW;
  Value y = shifted ? b.sub(b.add(x, x), one) : x;  // the Chebyshev argument
  Value q1;
  switch (kind) {
    case Poly::T: case Poly::ST: case Poly::He: case Poly::P: q1 = y; break;
    case Poly::U: case Poly::SU: case Poly::H: q1 = b.add(y, y); break;
    case Poly::V: case Poly::SV: q1 = b.sub(b.add(y, y), one); break;
    case Poly::W: case Poly::SW: q1 = b.add(b.add(y, y), one); break;
    case Poly::L: q1 = b.sub(one, x); break;
  }
  Value p = b.onesLike(x), q = q1;
  Value res = b.select(b.compare(n, zero, Cmp::EQ), one, b.zerosLike(x));
  res = b.select(b.compare(n, one, Cmp::EQ), q1, res);
  for (int m = 1; m < kMaxDegree; ++m) {
    Value r;
    switch (kind) {
      case Poly::H: r = b.sub(b.mul(b.add(x, x), q), b.mul(c(2.0 * m), p)); break;
      case Poly::He: r = b.sub(b.mul(x, q), b.mul(c(m), p)); break;
      case Poly::L: r = b.div(b.sub(b.mul(b.add(c(2.0 * m), b.sub(one, x)), q), b.mul(c(m), p)), c(m + 1)); break;
      case Poly::P: r = b.div(b.sub(b.mul(b.mul(c(2.0 * m + 1), x), q), b.mul(c(m), p)), c(m + 1)); break;
      default: r = b.sub(b.mul(b.add(y, y), q), p); break;
    }
    p = q;
    q = r;
    res = b.select(b.compare(n, c(m + 1), Cmp::EQ), q, res);
  }
  auto eq = [&](Value a, double v) { return b.compare(a, c(v), Cmp::EQ); };
  Value even = b.compare(b.rem(n, two), zero, Cmp::EQ);
  Value ay = b.abs(y);
  Value inside = b.compare(ay, one, Cmp::LT);
  Value th = b.chlo("acos", y);
  Value np1 = b.add(n, one), n2p1 = b.add(b.add(n, n), one);
  auto sgn = [&](Value v) { return b.select(even, v, b.neg(v)); };
  switch (kind) {
    case Poly::T: case Poly::ST: {
      Value trig = b.cos(b.mul(n, th));
      res = b.select(b.andOp(b.compare(n, c(6), Cmp::GT), inside), trig, res);
      if (kind == Poly::T) res = b.select(eq(ay, 1), b.select(b.orOp(b.compare(x, zero, Cmp::GT), even), one, b.neg(one)), res);
      else {
        res = b.select(eq(x, 0), sgn(one), res);
        res = b.select(eq(x, 1), one, res);
      }
      break;
    }
    case Poly::U: case Poly::SU: {
      Value st = b.sin(th);
      Value trig = b.select(b.compare(st, zero, Cmp::NE), b.div(b.sin(b.mul(np1, th)), st),
                            b.div(b.mul(np1, b.cos(b.mul(np1, th))), y));
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::U ? 8 : 6), Cmp::GT), inside), trig, res);
      if (kind == Poly::U) res = b.select(eq(ay, 1), b.select(b.orOp(b.compare(x, zero, Cmp::GT), even), np1, b.neg(np1)), res);
      else {
        res = b.select(eq(x, 0), sgn(np1), res);
        res = b.select(eq(x, 1), np1, res);
      }
      break;
    }
    case Poly::V: case Poly::SV: {
      Value half = b.div(th, two);
      Value trig = b.select(b.compare(b.sin(half), one, Cmp::NE), b.div(b.cos(b.mul(b.add(n, c(0.5)), th)), b.cos(half)),
                            sgn(n2p1));
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::V ? 8 : 6), Cmp::GT), inside), trig, res);
      if (kind == Poly::V) res = b.select(eq(ay, 1), b.select(b.compare(x, zero, Cmp::GT), one, sgn(n2p1)), res);
      else {
        res = b.select(eq(x, 0), sgn(n2p1), res);
        res = b.select(eq(x, 1), one, res);
      }
      break;
    }
    case Poly::W: case Poly::SW: {
      Value half = b.div(th, two);
      Value edge = kind == Poly::W ? b.select(b.compare(x, zero, Cmp::GT), n2p1, sgn(one)) : sgn(one);
      Value trig = b.select(b.compare(b.cos(half), one, Cmp::NE), b.div(b.sin(b.mul(b.add(n, c(0.5)), th)), b.sin(half)),
                            edge);
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::W ? 8 : 4), Cmp::GT), inside), trig, res);
      if (kind == Poly::W) res = b.select(eq(ay, 1), b.select(b.compare(x, zero, Cmp::GT), n2p1, sgn(one)), res);
      else {
        res = b.select(eq(x, 0), sgn(one), res);
        res = b.select(eq(x, 1), n2p1, res);
      }
      break;
    }
    case Poly::L: res = b.select(eq(b.abs(x), 0), one, res); break;
    case Poly::P:
      res = b.select(eq(ay, 1), b.select(b.orOp(b.orOp(b.compare(x, zero, Cmp::GT), eq(n, 0)), even), one, b.neg(one)), res);
      break;
    default: break;
  }
  return b.select(b.compare(n, zero, Cmp::LT), b.zerosLike(x), res);
}

// The regularized incomplete gamma functions P(a, x) (`lower`) and Q(a, x) = 1 - P as Cephes' igam/igamc compute them
// (PyTorch CPU's calc_igamma/calc_igammac without their asymptotic series for large a near x): where x > 1 and
// x > a, Q's continued fraction, elsewhere P's power series; the other function is 1 minus it. Both iterate for all
// elements at once (a stablehlo.while each) until every element's last step is below the dtype's epsilon, at most
// 4000 steps. CPU's special values: NaN for a or x negative, for a = 0 with x = 0, for both infinite.
Value incompleteGamma(Builder& b, Value a, Value x, bool lower) {
  const DType c = a.dtype();
  const Shape shape = a.shape();
  const double eps = c == DType::F64 ? 1.11022302462515654042e-16 : 5.9604644775390625e-8;
  auto k = [&](double v) { return cst(b, v, a); };
  const std::vector<int64_t> all = range(0, int64_t(shape.size()));
  Value nan = b.orOp(b.orOp(b.compare(a, k(0), Cmp::LT), b.compare(x, k(0), Cmp::LT)),
                     b.orOp(b.orOp(isNan(b, a), isNan(b, x)),
                            b.orOp(b.andOp(b.compare(a, k(0), Cmp::EQ), b.compare(x, k(0), Cmp::EQ)),
                                   b.andOp(b.notOp(b.isFinite(a)), b.notOp(b.isFinite(x))))));
  // P is 1 for a = 0 (x > 0) and for x infinite, 0 for x = 0 and for a infinite
  Value p_one = b.orOp(b.compare(a, k(0), Cmp::EQ), b.notOp(b.isFinite(x)));
  Value p_zero = b.orOp(b.compare(x, k(0), Cmp::EQ), b.notOp(b.isFinite(a)));
  Value special = b.orOp(nan, b.orOp(p_one, p_zero));
  Value use_cf = b.andOp(b.compare(x, k(1), Cmp::GT), b.compare(x, a, Cmp::GT));
  // e^(a log x - x) / Gamma(a), on safe arguments for the special elements. For a >= 10 its logarithm is taken as
  // a (log1p(u) - u) + log(a / 2 pi) / 2 - tail(a) with u = (x - a) / a and Stirling's tail 1/(12a) - 1/(360a^3) +
  // 1/(1260a^5) - 1/(1680a^7): a log x and lgamma(a) are large and nearly cancel, which costs float32 its digits.
  Value sa = b.select(special, b.onesLike(a), a), sx = b.select(special, b.onesLike(x), x);
  Value direct = b.sub(b.sub(b.mul(sa, b.log(sx)), sx), b.chlo("lgamma", sa));
  Value u = b.div(b.sub(sx, sa), sa);
  Value ia = b.div(k(1), sa), ia2 = b.mul(ia, ia);
  Value tail = b.mul(ia, b.sub(k(1.0 / 12), b.mul(ia2, b.sub(k(1.0 / 360), b.mul(ia2, b.sub(k(1.0 / 1260),
                                                                                             b.mul(ia2, k(1.0 / 1680))))))));
  Value stirling = b.sub(b.add(b.mul(sa, b.sub(b.log1p(u), u)), b.mul(k(0.5), b.log(b.div(sa, k(2 * M_PI))))), tail);
  Value ax = b.exp(b.select(b.compare(sa, k(10), Cmp::GE), stirling, direct));
  auto notDone = [&](Builder& lb, const std::vector<Value>& v) {
    Value left = lb.reduce(lb.notOp(v[1]), all, ReduceKind::Or);
    return lb.andOp(lb.reshape(left, {}), lb.compare(v[0], lb.constantInt(4000, DType::S32), Cmp::LT));
  };
  auto step = [&](Builder& lb, Value done, Value now, Value before) { return lb.select(done, before, now); };
  // P's series: r = a, c = 1, sum = 1; r += 1, c *= x / r, sum += c while c / sum > eps; P = sum ax / a
  auto series = b.whileLoop(
      {b.constantInt(0, DType::S32), b.orOp(special, use_cf), sa, b.onesLike(a), b.onesLike(a), sx},
      notDone, [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
        Value done = v[1];
        Value r = lb.add(v[2], cst(lb, 1, v[2]));
        Value cc = lb.mul(v[3], lb.div(v[5], r));
        Value sum = lb.add(v[4], cc);
        Value conv = lb.compare(lb.div(cc, sum), cst(lb, eps, sum), Cmp::LE);
        return {lb.add(v[0], lb.constantInt(1, DType::S32)), lb.orOp(done, conv), step(lb, done, r, v[2]),
                step(lb, done, cc, v[3]), step(lb, done, sum, v[4]), v[5]};
      });
  Value p_series = b.div(b.mul(series[4], ax), sa);
  // Q's continued fraction (Cephes igamc), its convergents rescaled when they grow past 2^52
  Value y0 = b.sub(k(1), sa), z0 = b.add(b.add(sx, y0), k(1));
  auto cf = b.whileLoop(
      {b.constantInt(0, DType::S32), b.orOp(special, b.notOp(use_cf)), y0, z0, b.zerosLike(a), b.onesLike(a), sx,
       b.add(sx, k(1)), b.mul(z0, sx), b.div(b.add(sx, k(1)), b.mul(z0, sx))},
      notDone, [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
        Value done = v[1];
        auto kk = [&](double val) { return cst(lb, val, v[2]); };
        Value cc = lb.add(v[4], kk(1)), y = lb.add(v[2], kk(1)), z = lb.add(v[3], kk(2));
        Value yc = lb.mul(y, cc);
        Value pk = lb.sub(lb.mul(v[7], z), lb.mul(v[5], yc));
        Value qk = lb.sub(lb.mul(v[8], z), lb.mul(v[6], yc));
        Value nz = lb.compare(qk, kk(0), Cmp::NE);
        Value r = lb.div(pk, lb.select(nz, qk, kk(1)));
        Value t = lb.select(nz, lb.abs(lb.div(lb.sub(v[9], r), r)), kk(1));
        Value ans = lb.select(nz, r, v[9]);
        Value scale = lb.select(lb.compare(lb.abs(pk), kk(4.503599627370496e15), Cmp::GT),
                                kk(2.22044604925031308085e-16), kk(1));
        Value pkm2 = lb.mul(v[7], scale), pkm1 = lb.mul(pk, scale), qkm2 = lb.mul(v[8], scale), qkm1 = lb.mul(qk, scale);
        Value conv = lb.compare(t, kk(eps), Cmp::LE);
        return {lb.add(v[0], lb.constantInt(1, DType::S32)), lb.orOp(done, conv), step(lb, done, y, v[2]),
                step(lb, done, z, v[3]), step(lb, done, cc, v[4]), step(lb, done, pkm2, v[5]),
                step(lb, done, qkm2, v[6]), step(lb, done, pkm1, v[7]), step(lb, done, qkm1, v[8]),
                step(lb, done, ans, v[9])};
      });
  Value q_cf = b.mul(cf[9], ax);
  Value p = b.select(use_cf, b.sub(k(1), q_cf), p_series);
  Value res = lower ? p : b.select(use_cf, q_cf, b.sub(k(1), p_series));
  res = b.select(p_one, lower ? k(1) : k(0), b.select(p_zero, lower ? k(0) : k(1), res));
  return b.select(nan, k(NAN), res);
}

}  // namespace

void populateSpecial(Registry& r) {
  // polygamma(int n, Tensor self): n = 0 digamma, n = 1 trigamma (PyTorch CPU's series with reflection below 0.5).
  // Higher orders use PyTorch's Cephes zeta, whose negative-argument behavior XLA's zeta does not share: declined.
  r.add("aten::polygamma", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x0 = ctx.tensor(1);
    DType out = toFloat(x0.dtype());
    Value x = b.convert(x0, accType(out));
    int64_t n = ctx.toInt(0);
    if (n == 0) return {b.convert(digammaF(b, x), out)};
    if (n >= 2) {  // (-1)^(n+1) n! zeta(n + 1, x)
      double fact = std::exp(std::lgamma(double(n) + 1.0));
      Value z = zetaCephes(b, b.constantF(double(n + 1), x.dtype(), x.shape()), x);
      return {b.convert(b.mul(cst(b, (n % 2 ? 1.0 : -1.0) * fact, x), z), out)};
    }
    Value one = cst(b, 1, x);
    Value refl = b.compare(x, cst(b, 0.5, x), Cmp::LT);
    Value sinpx = b.sin(b.mul(cst(b, M_PI, x), x));
    Value res = b.select(refl, b.neg(b.div(cst(b, M_PI * M_PI, x), b.mul(sinpx, sinpx))), b.zerosLike(x));
    Value y = b.select(refl, b.sub(one, x), x);
    for (int i = 0; i < 6; ++i) {
      res = b.add(res, b.div(one, b.mul(y, y)));
      y = b.add(y, one);
    }
    Value ixx = b.div(one, b.mul(y, y));
    Value poly = b.sub(cst(b, 1.0 / 30, y), b.mul(ixx, cst(b, 1.0 / 42, y)));
    poly = b.sub(cst(b, 1.0 / 6, y), b.mul(ixx, poly));
    Value tail = b.div(b.add(b.add(one, b.div(one, b.mul(cst(b, 2, y), y))), b.mul(ixx, poly)), y);
    res = b.add(res, tail);
    res = b.select(refl, b.neg(res), res);
    return {b.convert(res, out)};
  }).accepts([](const Context& ctx) { return realDTypes(ctx) && ctx.toInt(0) >= 0; });
  // igamma / igammac (torch.special.gammainc / gammaincc): float inputs (CPU has no integer kernel)
  r.add("aten::igamma", binary([](Builder& b, Value a, Value x) { return incompleteGamma(b, a, x, true); }, true))
      .accepts(elementwiseAccepts);
  r.add("aten::igammac", binary([](Builder& b, Value a, Value x) { return incompleteGamma(b, a, x, false); }, true))
      .accepts(elementwiseAccepts);
  for (const char* ov : {"", ".other_scalar", ".self_scalar"}) {
    r.add(std::string("aten::special_zeta") + ov,
          binary([](Builder& b, Value x, Value q) { return zetaCephes(b, x, q); }, true))
        .accepts(elementwiseAccepts);
    r.add(std::string("aten::special_xlog1py") + ov, binary([](Builder& b, Value x, Value y) {
      Value zero = cst(b, 0, x);
      Value res = b.select(b.compare(x, zero, Cmp::EQ), zero, b.mul(x, b.log1p(y)));
      return b.select(isNan(b, y), y, res);
    }, true)).accepts(elementwiseAccepts);
  }
  // i0 / i0e: the power series below |x| = 15, the asymptotic expansion above (i0e skips the exp(|x|) factor).
  auto besselI0 = [](Builder& b, Value x, bool scaled) {
    Value ax = b.abs(x);
    Value small = b.min(ax, cst(b, 15, x));
    Value sum = besselISeries(b, small, 0, 26);
    if (scaled) sum = b.mul(sum, b.exp(b.neg(small)));
    Value big = b.max(ax, cst(b, 15, x));  // keeps the unused branch finite
    Value inv = b.div(cst(b, 1, x), big);
    Value acc = b.onesLike(x), coef = b.onesLike(x);
    double c = 1;
    for (int k = 1; k <= 8; ++k) {
      c *= double(2 * k - 1) * double(2 * k - 1) / (8.0 * k);
      coef = b.mul(coef, inv);
      acc = b.add(acc, b.mul(cst(b, c, x), coef));
    }
    Value asym = b.div(acc, b.sqrt(b.mul(cst(b, 2 * M_PI, x), big)));
    if (!scaled) asym = b.mul(asym, b.exp(big));
    return b.select(b.compare(ax, cst(b, 15, x), Cmp::LE), sum, asym);
  };
  r.add("aten::i0", unaryFloat([besselI0](Builder& b, Value x) { return besselI0(b, x, false); }))
      .accepts(elementwiseAccepts);
  r.add("aten::special_i0e", unaryFloat([besselI0](Builder& b, Value x) { return besselI0(b, x, true); }))
      .accepts(elementwiseAccepts);
  r.add("aten::special_modified_bessel_i0",
        unaryFloat([besselI0](Builder& b, Value x) { return besselI0(b, x, false); }))
      .accepts(elementwiseAccepts);
  r.add("aten::special_modified_bessel_i1", unaryFloat([](Builder& b, Value x) {
    return b.mul(b.chlo("bessel_i1e", x), b.exp(b.abs(x)));
  })).accepts(elementwiseAccepts);
  // spherical j0 = sin(x)/x (a Taylor polynomial near 0, as PyTorch)
  r.add("aten::special_spherical_bessel_j0", unaryFloat([](Builder& b, Value x) {
    Value x2 = b.mul(x, x);
    Value series = b.sub(cst(b, 1, x), b.mul(x2, b.sub(cst(b, 1.0 / 6, x), b.mul(x2, b.sub(cst(b, 1.0 / 120, x),
                                                  b.mul(x2, b.sub(cst(b, 1.0 / 5040, x), b.mul(x2, cst(b, 1.0 / 362880, x)))))))));
    Value res = b.select(b.compare(b.abs(x), cst(b, 0.5, x), Cmp::LT), series, b.div(b.sin(x), x));
    return b.select(b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ), b.zerosLike(x), res);
  })).accepts(elementwiseAccepts);
  // erfcx(x) = exp(x^2) erfc(x): directly below 4, the asymptotic series above (where erfc underflows).
  auto erfcx = [](Builder& b, Value x) {
    Value direct = b.mul(b.exp(b.mul(x, x)), b.chlo("erfc", x));
    Value big = b.max(x, cst(b, 4, x));
    Value inv2 = b.div(cst(b, 1, x), b.mul(cst(b, 2, x), b.mul(big, big)));
    Value sum = b.onesLike(x), term = b.onesLike(x);
    for (int k = 1; k <= 10; ++k) {
      term = b.mul(term, b.mul(cst(b, -(2.0 * k - 1), x), inv2));
      sum = b.add(sum, term);
    }
    Value asym = b.div(sum, b.mul(big, cst(b, std::sqrt(M_PI), x)));
    return b.select(b.compare(x, cst(b, 4, x), Cmp::LT), direct, asym);
  };
  r.add("aten::special_erfcx", unaryFloat(erfcx)).accepts(elementwiseAccepts);
  // log_ndtr(x) = log(Phi(x)): log1p(-erfc(x/sqrt2)/2) above -1, log(erfcx(-x/sqrt2)/2) - x^2/2 below.
  r.add("aten::special_log_ndtr", unaryFloat([erfcx](Builder& b, Value x) {
    Value t = b.mul(x, cst(b, M_SQRT1_2, x));
    Value hi = b.log1p(b.neg(b.div(b.chlo("erfc", t), cst(b, 2, x))));
    Value lo = b.sub(b.log(b.div(erfcx(b, b.neg(t)), cst(b, 2, x))), b.div(b.mul(x, x), cst(b, 2, x)));
    return b.select(b.compare(x, cst(b, -1, x), Cmp::LT), lo, hi);
  })).accepts(elementwiseAccepts);
  r.add("aten::special_i1e", unaryFloat([](Builder& b, Value x) { return b.chlo("bessel_i1e", x); }))
      .accepts(elementwiseAccepts);
  r.add("aten::special_i1", unaryFloat([](Builder& b, Value x) {
    return b.mul(b.chlo("bessel_i1e", x), b.exp(b.abs(x)));
  })).accepts(elementwiseAccepts);
  r.add("aten::special_entr", unaryFloat([](Builder& b, Value x) {
    Value zero = cst(b, 0, x);
    Value res = b.select(b.compare(x, zero, Cmp::GT), b.neg(b.mul(x, b.log(x))),
                         b.select(b.compare(x, zero, Cmp::EQ), zero, cst(b, -INFINITY, x)));
    return b.select(isNan(b, x), x, res);
  })).accepts(elementwiseAccepts);
  r.add("aten::special_ndtri", unaryFloat([](Builder& b, Value p) {
    return b.mul(cst(b, M_SQRT2, p), b.chlo("erf_inv", b.sub(b.mul(cst(b, 2, p), p), cst(b, 1, p))));
  })).accepts(elementwiseAccepts);

  {
    const std::pair<const char*, Poly> polys[] = {
        {"chebyshev_polynomial_t", Poly::T}, {"chebyshev_polynomial_u", Poly::U},
        {"chebyshev_polynomial_v", Poly::V}, {"chebyshev_polynomial_w", Poly::W},
        {"hermite_polynomial_h", Poly::H}, {"hermite_polynomial_he", Poly::He},
        {"laguerre_polynomial_l", Poly::L}, {"legendre_polynomial_p", Poly::P},
        {"shifted_chebyshev_polynomial_t", Poly::ST}, {"shifted_chebyshev_polynomial_u", Poly::SU},
        {"shifted_chebyshev_polynomial_v", Poly::SV}, {"shifted_chebyshev_polynomial_w", Poly::SW}};
    for (auto& [name, kind] : polys)
      for (const char* ov : {"", ".x_scalar", ".n_scalar"}) {
        Poly k = kind;
        r.add(std::string("aten::special_") + name + ov, [k](Context& ctx) -> std::vector<Value> {
          Builder& b = ctx.b;
          DType t = ctx.outputs.at(0).dtype;
          DType c = isFloat(t) ? accType(t) : DType::F64;
          auto v = operands(ctx, {0, 1}, c);
          Value n = isFloat(c) ? truncF(b, v[1]) : v[1];
          return {b.convert(orthoPoly(b, v[0], n, k), t)};
        }).accepts(elementwiseAccepts);
      }
  }
}

}  // namespace torch_tpu::lowering
