// Distributions family: sampling ops whose draws are accepted or rejected per element (torch.distributions Gamma,
// Beta, Dirichlet, Poisson, Binomial: _standard_gamma, _sample_dirichlet, poisson, binomial) and the randomized
// leaky ReLU (rrelu_with_noise, nn.RReLU).
//
// Each sampler is PyTorch CPU's algorithm run for all elements at once: a stablehlo.while over the whole tensor that
// draws a fresh round of uniforms for every element still waiting and stops when none is left, so an element's
// sample follows CPU's distribution (not CPU's random stream). Rates and probabilities CPU rejects raise CPU's error
// as a device-side check (at the next synchronization).
#include <array>
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/rules/random_common.h"

namespace torch_tpu::lowering {
namespace {

using namespace rnd;
using shlo::Cmp;

// The smallest positive normal number of a floating dtype (std::numeric_limits<T>::min()).
double leastNormal(DType t) {
  return t == DType::F64 ? std::ldexp(1.0, -1022) : t == DType::F16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
}

// Whether any element is still drawing (the loops' condition): `done` is loop value 2.
Value anyLeft(Builder& lb, const std::vector<Value>& v, const Shape& shape) {
  return lb.reshape(lb.reduce(lb.notOp(v[2]), range(0, int64_t(shape.size())), ReduceKind::Or), {});
}

// Standard gamma samples of concentration `alpha` (dtype c), as PyTorch CPU's sample_gamma draws them: Marsaglia
// and Tsang's acceptance-rejection, alpha < 1 boosted to alpha + 1 and scaled by U^(1/alpha), alpha <= 0 giving 0.
// Every element draws until accepted: a stablehlo.while over the whole tensor until none is left (each round
// accepts over 95% of what remains).
Value sampleGamma(Context& ctx, Value alpha) {
  Builder& b = ctx.b;
  DType c = alpha.dtype();
  const Shape shape = alpha.shape();
  Value one = b.onesLike(alpha);
  Value small = b.compare(alpha, one, Cmp::LT);
  Value a = b.select(small, b.add(alpha, one), alpha);
  Value d = b.sub(a, cst(b, 1.0 / 3.0, a));
  Value cc = b.div(one, b.sqrt(b.mul(cst(b, 9.0, d), d)));
  Shape s3 = shape;
  s3.insert(s3.begin(), 4);
  // Concentrations that are not positive (or NaN) draw nothing: CPU's loop gives them NaN or 0, clamped below.
  Value none = b.notOp(b.compare(alpha, b.zerosLike(alpha), Cmp::GT));
  // Loop values: the random state, the samples, which are done, d and c.
  auto out = b.whileLoop(
      {ctx.rngState(), b.zerosLike(alpha), none, d, cc},
      [&](Builder& lb, const std::vector<Value>& v) { return anyLeft(lb, v, shape); },
      [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
        std::vector<Value> g = lb.rngBitGenerator(v[0], {DType::U64, s3});
        Value u = uniformFromBits(lb, g[1], c);
        Value dd = v[3], ccv = v[4];
        Value x = boxMuller(lb, leadingEntry(lb, u, 0), leadingEntry(lb, u, 1));
        Value y = lb.add(lb.onesLike(x), lb.mul(ccv, x));
        Value vv = lb.mul(lb.mul(y, y), y);
        Value uu = lb.sub(lb.onesLike(dd), leadingEntry(lb, u, 2));
        Value xx = lb.mul(x, x);
        Value quick = lb.compare(uu, lb.sub(lb.onesLike(xx), lb.mul(cst(lb, 0.0331, xx), lb.mul(xx, xx))), Cmp::LT);
        Value positive = lb.compare(y, lb.zerosLike(y), Cmp::GT);
        Value safe_v = lb.select(positive, vv, lb.onesLike(vv));
        Value slow = lb.compare(lb.log(uu),
                                lb.add(lb.mul(cst(lb, 0.5, xx), xx),
                                       lb.mul(dd, lb.add(lb.sub(lb.onesLike(dd), safe_v), lb.log(safe_v)))),
                                Cmp::LT);
        Value accept = lb.andOp(lb.andOp(lb.notOp(v[2]), positive), lb.orOp(quick, slow));
        Value r = lb.select(accept, lb.mul(dd, vv), v[1]);
        return {g[0], r, lb.orOp(v[2], accept), dd, ccv};
      });
  Value r = out[1];
  // alpha < 1: the boost's scale U^(1/alpha) (a fresh draw). Not positive or NaN: 0 (the callers clamp it to the
  // least normal number, as CPU's clamp does for its 0 and NaN).
  Value boost = b.pow(b.sub(one, uniform01(ctx, shape, c)), b.div(one, alpha));
  r = b.select(small, b.mul(r, boost), r);
  return b.select(none, b.zerosLike(r), r);
}


// One round's two uniform draws per element (dtype c, `shape`) from the loop's random state: the new state, u0, u1.
std::array<Value, 3> drawPair(Builder& lb, Value state, const Shape& shape, DType c) {
  Shape s2 = shape;
  s2.insert(s2.begin(), 2);
  std::vector<Value> g = lb.rngBitGenerator(state, {DType::U64, s2});
  Value u = uniformFromBits(lb, g[1], c);
  return {g[0], leadingEntry(lb, u, 0), leadingEntry(lb, u, 1)};
}

// Poisson samples of rate `lam` (dtype c), as PyTorch CPU's sample_poisson draws them: rates of 10 and more by
// Hoermann's transformed rejection (PTRS), smaller ones by multiplying uniforms until the product falls to
// exp(-rate), 0 for a rate of 0. Rates that are negative or not finite draw nothing (the caller checks them).
Value samplePoisson(Context& ctx, Value lam) {
  Builder& b = ctx.b;
  const DType c = lam.dtype();
  const Shape shape = lam.shape();
  auto k = [&](double v) { return cst(b, v, lam); };
  Value big = b.compare(lam, k(10), Cmp::GE);
  Value slam = b.sqrt(lam);
  Value bb = b.add(k(0.931), b.mul(k(2.53), slam));
  Value aa = b.add(k(-0.059), b.mul(k(0.02483), bb));
  Value invalpha = b.add(k(1.1239), b.div(k(1.1328), b.sub(bb, k(3.4))));
  Value vr = b.sub(k(0.9277), b.div(k(3.6224), b.sub(bb, k(2))));
  Value none = b.notOp(b.andOp(b.compare(lam, b.zerosLike(lam), Cmp::GT), b.isFinite(lam)));
  // Loop values: random state, samples, done, the running product (small rates), rate, exp(-rate), a, b,
  // 1/alpha, v_r.
  auto out = b.whileLoop(
      {ctx.rngState(), b.zerosLike(lam), none, b.onesLike(lam), lam, b.exp(b.neg(lam)), aa, bb, invalpha, vr},
      [&](Builder& lb, const std::vector<Value>& v) { return anyLeft(lb, v, shape); },
      [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
        auto [state, u0, V] = drawPair(lb, v[0], shape, c);
        auto kk = [&](double x) { return cst(lb, x, u0); };
        Value rate = v[4], a = v[6], bv = v[7];
        Value waiting = lb.notOp(v[2]);
        Value is_big = lb.compare(rate, kk(10), Cmp::GE);
        // transformed rejection
        Value U = lb.sub(u0, kk(0.5));
        Value us = lb.sub(kk(0.5), lb.abs(U));
        Value kval = lb.floor(lb.add(lb.mul(lb.add(lb.div(lb.mul(kk(2), a), us), bv), U), lb.add(rate, kk(0.43))));
        Value box = lb.andOp(lb.compare(us, kk(0.07), Cmp::GE), lb.compare(V, v[9], Cmp::LE));
        Value reject = lb.orOp(lb.compare(kval, kk(0), Cmp::LT),
                               lb.andOp(lb.compare(us, kk(0.013), Cmp::LT), lb.compare(V, us, Cmp::GT)));
        Value lhs = lb.sub(lb.add(lb.log(V), lb.log(v[8])), lb.log(lb.add(lb.div(a, lb.mul(us, us)), bv)));
        Value kpos = lb.max(kval, kk(0));
        Value rhs = lb.sub(lb.sub(lb.mul(kpos, lb.log(rate)), rate), lb.chlo("lgamma", lb.add(kpos, kk(1))));
        Value take_big = lb.andOp(is_big, lb.orOp(box, lb.andOp(lb.notOp(reject), lb.compare(lhs, rhs, Cmp::LE))));
        // multiplication: one more event while the product stays above exp(-rate)
        Value prod = lb.mul(v[3], u0);
        Value more = lb.andOp(lb.notOp(is_big), lb.compare(prod, v[5], Cmp::GT));
        Value stop_small = lb.andOp(lb.notOp(is_big), lb.notOp(more));
        Value r = lb.select(lb.andOp(waiting, take_big), kval,
                            lb.select(lb.andOp(waiting, more), lb.add(v[1], kk(1)), v[1]));
        Value done = lb.orOp(v[2], lb.orOp(take_big, stop_small));
        return {state, r, done, lb.select(waiting, prod, v[3]), v[4], v[5], v[6], v[7], v[8], v[9]};
      });
  return out[1];
}

// ln(k!) - ((k + 1/2) ln(k + 1) - (k + 1) + ln(2 pi) / 2): the tail of Stirling's approximation, exact (from lgamma,
// as a table) for k <= 9 and its series beyond, as CPU's binomial sampler takes it.
Value stirlingTail(Builder& b, Value k) {
  std::vector<double> table;
  for (int i = 0; i <= 9; ++i)
    table.push_back(std::lgamma(i + 1.0) - ((i + 0.5) * std::log(i + 1.0) - (i + 1.0) + 0.5 * std::log(2 * M_PI)));
  const DType c = k.dtype();
  Value tab = b.constantF(0, c, {10});
  for (int i = 0; i <= 9; ++i)
    tab = b.select(b.compare(b.iota({DType::S64, {10}}, 0), b.broadcastTo(b.constantInt(i, DType::S64), {10}), Cmp::EQ),
                   b.constantF(table[size_t(i)], c, {10}), tab);
  Value idx = b.convert(b.clamp(cst(b, 0, k), k, cst(b, 9, k)), DType::S64);
  Value small = takeRows(b, tab, idx);
  Value kp1 = b.add(k, cst(b, 1, k));
  Value kp1sq = b.mul(kp1, kp1);
  Value inner = b.sub(cst(b, 1.0 / 360, k), b.div(cst(b, 1.0 / 1260, k), kp1sq));
  Value series = b.div(b.sub(cst(b, 1.0 / 12, k), b.div(inner, kp1sq)), kp1);
  return b.select(b.compare(k, cst(b, 9, k), Cmp::LE), small, series);
}

// Binomial samples of `count` trials with success probability `prob` (dtype c), as PyTorch CPU's sample_binomial
// draws them: with q the smaller of prob and 1 - prob, count q >= 10 by Hoermann's BTRS transformed rejection,
// otherwise by inversion (geometric waiting times until they pass count); prob > 1/2 counts the failures. No draw
// for count <= 0 or prob <= 0 (0), prob >= 1 (count) or NaN (NaN).
Value sampleBinomial(Context& ctx, Value count, Value prob) {
  Builder& b = ctx.b;
  const DType c = count.dtype();
  const Shape shape = count.shape();
  auto k = [&](double v) { return cst(b, v, count); };
  Value flip = b.compare(prob, k(0.5), Cmp::GT);
  Value q = b.select(flip, b.sub(k(1), prob), prob);
  Value zero_result = b.orOp(b.compare(count, k(0), Cmp::LE), b.compare(prob, k(0), Cmp::LE));
  Value all_result = b.compare(prob, k(1), Cmp::GE);
  Value nan = b.orOp(b.compare(count, count, Cmp::NE), b.compare(prob, prob, Cmp::NE));
  Value none = b.orOp(nan, b.orOp(zero_result, all_result));
  Value stddev = b.sqrt(b.mul(b.mul(count, q), b.sub(k(1), q)));
  Value bb = b.add(k(1.15), b.mul(k(2.53), stddev));
  Value aa = b.add(b.add(k(-0.0873), b.mul(k(0.0248), bb)), b.mul(k(0.01), q));
  Value cc = b.add(b.mul(count, q), k(0.5));
  Value vr = b.sub(k(0.92), b.div(k(4.2), bb));
  Value rr = b.div(q, b.sub(k(1), q));
  Value alpha = b.mul(b.add(k(2.83), b.div(k(5.1), bb)), stddev);
  Value m = b.floor(b.mul(b.add(count, k(1)), q));
  // the part of the acceptance bound that does not depend on the draw
  Value ratio = b.div(b.add(m, k(1)), b.mul(rr, b.add(b.sub(count, m), k(1))));
  Value bound0 =
      b.add(b.add(b.mul(b.add(m, k(0.5)), b.log(ratio)), stirlingTail(b, m)), stirlingTail(b, b.sub(count, m)));
  // Loop values: random state, samples, done, the geometric sum (inversion), count, q, log1p(-q), a, b, c, v_r,
  // r, alpha, m, bound0.
  auto out = b.whileLoop(
      {ctx.rngState(), b.zerosLike(count), none, b.zerosLike(count), count, q, b.log1p(b.neg(q)), aa, bb, cc, vr, rr,
       alpha, m, bound0},
      [&](Builder& lb, const std::vector<Value>& v) { return anyLeft(lb, v, shape); },
      [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
        auto [state, u0, V] = drawPair(lb, v[0], shape, c);
        auto kk = [&](double x) { return cst(lb, x, u0); };
        Value n = v[4], qq = v[5], a = v[7], bv = v[8];
        Value waiting = lb.notOp(v[2]);
        Value btrs = lb.compare(lb.mul(n, qq), kk(10), Cmp::GE);
        // BTRS
        Value U = lb.sub(u0, kk(0.5));
        Value us = lb.sub(kk(0.5), lb.abs(U));
        Value kval = lb.floor(lb.add(lb.mul(lb.add(lb.div(lb.mul(kk(2), a), us), bv), U), v[9]));
        Value sensible = lb.andOp(lb.compare(kval, kk(0), Cmp::GE), lb.compare(kval, n, Cmp::LE));
        Value box = lb.andOp(lb.compare(us, kk(0.07), Cmp::GE), lb.compare(V, v[10], Cmp::LE));
        Value ks = lb.clamp(kk(0), kval, n);
        Value lv = lb.log(lb.div(lb.mul(V, v[12]), lb.add(lb.div(a, lb.mul(us, us)), bv)));
        Value nk1 = lb.add(lb.sub(n, ks), kk(1));
        Value bound = lb.add(
            lb.add(v[14], lb.mul(lb.add(n, kk(1)), lb.log(lb.div(lb.add(lb.sub(n, v[13]), kk(1)), nk1)))),
            lb.sub(lb.sub(lb.mul(lb.add(ks, kk(0.5)), lb.log(lb.div(lb.mul(v[11], nk1), lb.add(ks, kk(1))))),
                          stirlingTail(lb, ks)),
                   stirlingTail(lb, lb.sub(n, ks))));
        Value take_btrs = lb.andOp(btrs, lb.andOp(sensible, lb.orOp(box, lb.compare(lv, bound, Cmp::LE))));
        // inversion: one more success while the waiting times stay within count
        Value geom = lb.ceil(lb.div(lb.log(u0), v[6]));
        Value sum = lb.add(v[3], geom);
        Value passed = lb.compare(sum, n, Cmp::GT);
        Value more = lb.andOp(lb.notOp(btrs), lb.notOp(passed));
        Value stop_inv = lb.andOp(lb.notOp(btrs), passed);
        Value r = lb.select(lb.andOp(waiting, take_btrs), kval,
                            lb.select(lb.andOp(waiting, more), lb.add(v[1], kk(1)), v[1]));
        Value done = lb.orOp(v[2], lb.orOp(take_btrs, stop_inv));
        return {state, r, done, lb.select(waiting, sum, v[3]), v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12],
                v[13], v[14]};
      });
  Value r = b.select(flip, b.sub(count, out[1]), out[1]);
  r = b.select(zero_result, b.zerosLike(r), b.select(all_result, count, r));
  return b.select(nan, b.constantF(NAN, c, shape), r);
}

}  // namespace

void populateDistributions(Registry& r) {
  // _standard_gamma(alpha, generator) (torch.distributions Gamma, Beta, Dirichlet): samples no smaller than the
  // dtype's least normal number, as CPU clamps them.
  r.add("aten::_standard_gamma", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value alpha = ctx.tensor(0);
    DType c = drawType(alpha.dtype());
    Value g = b.convert(sampleGamma(ctx, b.convert(alpha, c)), alpha.dtype());
    Value tiny = b.constantF(leastNormal(alpha.dtype()), alpha.dtype(), alpha.shape());
    return {b.select(b.compare(g, tiny, Cmp::LT), tiny, g)};
  }).accepts(floatSelf);
  // _sample_dirichlet(alpha, generator): gamma samples (at least the least normal number) normalized along the
  // last dim.
  r.add("aten::_sample_dirichlet", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value alpha = ctx.tensor(0);
    DType c = drawType(alpha.dtype());
    Value g = sampleGamma(ctx, b.convert(alpha, c));
    Value tiny = b.constantF(leastNormal(c), c, g.shape());
    g = b.select(b.compare(g, tiny, Cmp::LT), tiny, g);
    if (g.rank() == 0) return {b.convert(b.div(g, g), alpha.dtype())};
    int64_t last = g.rank() - 1;
    Value sum = expandReduced(b, b.reduce(g, {last}, ReduceKind::Sum), g.shape(), {last});
    return {b.convert(b.div(g, sum), alpha.dtype())};
  }).accepts(floatSelf);
  // poisson(self, generator): CPU raises for a negative or NaN rate (a device-side check here); an infinite rate
  // gives infinity.
  r.add("aten::poisson", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lam = ctx.tensor(0);
    const DType c = drawType(lam.dtype());
    Value lc = b.convert(lam, c);
    ctx.check(b.compare(lc, b.zerosLike(lc), Cmp::GE), "invalid Poisson rate, expected rate to be non-negative",
              Value(), Context::CheckError::Runtime);
    Value s = samplePoisson(ctx, lc);
    return {b.convert(b.select(b.compare(lc, cst(b, INFINITY, lc), Cmp::EQ), lc, s), lam.dtype())};
  }).accepts(floatSelf);
  // binomial(count, prob, generator): count and prob of the same shape and dtype.
  r.add("aten::binomial", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value count = ctx.tensor(0);
    const DType c = drawType(count.dtype());
    return {b.convert(sampleBinomial(ctx, b.convert(count, c), b.convert(ctx.tensor(1), c)), count.dtype())};
  }).accepts([](const Context& ctx) {
    return floatSelf(ctx) && ctx.tensor(1).dtype() == ctx.tensor(0).dtype() &&
           ctx.tensor(1).shape() == ctx.tensor(0).shape();
  });
  // rrelu_with_noise(self, noise(b!), lower, upper, training, generator) (nn.RReLU, F.rrelu): training draws each
  // non-positive element's slope uniformly from [lower, upper] and writes the slopes (1 for positive elements)
  // into noise; otherwise the slope is (lower + upper) / 2 and noise is left as it is. lower > upper is declined
  // (CPU's kernel raises).
  r.add("aten::rrelu_with_noise", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), noise = ctx.tensor(1);
    const DType c = drawType(x.dtype());
    const double lo = staticOr(ctx, 2, 0.125), hi = staticOr(ctx, 3, 1.0 / 3.0);
    Value xc = b.convert(x, c);
    Value nonpositive = b.notOp(b.compare(xc, b.zerosLike(xc), Cmp::GT));
    if (!(ctx.has(4) && ctx.toBool(4)))
      return {b.convert(b.select(nonpositive, b.mul(xc, cst(b, (lo + hi) / 2, xc)), xc), x.dtype()), noise};
    Value u = uniform01(ctx, x.shape(), c);
    Value slope = b.select(nonpositive, b.add(cst(b, lo, u), b.mul(u, cst(b, hi - lo, u))), b.onesLike(u));
    return {b.convert(b.mul(xc, slope), x.dtype()), b.convert(slope, noise.dtype())};
  }).staticArgs({"lower", "upper"}).accepts([](const Context& ctx) {
    const double lo = staticOr(ctx, 2, 0.125), hi = staticOr(ctx, 3, 1.0 / 3.0);
    return floatSelf(ctx) && lo <= hi && ctx.tensor(1).shape() == ctx.tensor(0).shape() &&
           ctx.tensor(1).dtype() == ctx.tensor(0).dtype();
  });
}

}  // namespace torch_tpu::lowering
