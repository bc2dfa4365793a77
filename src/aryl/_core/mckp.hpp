// Exact multiple-choice knapsack (MCKP) for Aryl's elastic allocation [Aryl].
//
// Header-only C++17, no Python dependency; wrapped by _mckp.pyx.
//
// Problem: n classes (jobs), each with K options (extra-worker counts) of integer
// value q > 0 and weight w >= 1 GPUs; options with q <= 0 are absent.  Choose at
// most one option per class, total weight <= C, maximal total value.  The values
// are either given already quantised (solve_quantized) or as float64 and
// quantised here (solve_values) onto the grid of aryl/elastic.py's epsilon
// policy, bit for bit like its _quantize.
//
// Tie rule (the contract, identical to aryl/_reference/mckp.py): among all
// feasible choices take the one that (1) maximises the total value, (2) minimises
// the total weight, (3) is lexicographically smallest in class order under the
// per-class rank "heavier option first, then lower option index, none last".
//
// Algorithm (re-derived from the literature on the LP relaxation and "core"
// reduction of the MCKP -- Sinha & Zoltners 1979, Dyer-Zemel, Pisinger 1995 --
// this is an independent implementation, not Pisinger's code):
//
//  1. One pass per class: drop dominated options (heavier and not more valuable;
//     among equal (w, q) keep the lowest index -- neither can be in the canonical
//     optimum), so weights within a class are distinct and values increasing;
//     then the upper convex hull of (0,0) and the options, whose segments carry
//     an incremental efficiency dq/dw (made non-increasing along the class, so
//     any order by efficiency takes a prefix of every class's segments).
//  2. The LP optimum is the greedy over all segments by efficiency; only its
//     break (the first segment that does not fit) matters, found by a radix
//     select on the efficiencies' bit patterns (monotone for doubles >= 0): a
//     histogram of the weights per bucket finds the bucket holding the break,
//     everything above it is taken, and the bucket is refined until it is small
//     enough to sort (by merging its classes' runs: the segments stay in class
//     order, and each class's are already in greedy order).  The break's
//     efficiency is the LP multiplier lambda.
//     Continuing the scan over the next kFill segments by efficiency (those just
//     below the break bucket at every level) and taking every segment that still
//     fits gives a feasible incumbent of value LB.
//  3. Lagrangian bound: for every lambda >= 0 and every feasible x,
//        value(x) <= lambda*C + sum_i max(0, max_k rc_ik) - sum_i gap_i(x_i)
//     with rc = q - lambda*w and gap_i(k) = best_i - rc_ik.  So option k of
//     class i can only appear in a solution of value >= LB if
//        gap_i(k) <= UB - LB.
//     Options (and "none") failing this test *strictly* (with a floating-point
//     safety margin, see kMarginRel) are eliminated; every optimal solution,
//     including all tied ones, survives.  The pass computing best_i also keeps
//     the second-best reduced cost, so a class whose runner-up already fails the
//     test is fixed without a second look at its options.  Classes with one
//     alternative left are fixed; the others form the core.  The bound holds for
//     any lambda, so neither the hull nor lambda need be exact: rounding there
//     only costs speed, never exactness.
//  4. Exact DP over the core classes, in descending class index so that the
//     reconstruction walks them in ascending order and applies rule (3):
//     a sparse list of non-dominated states (weight, value), strictly
//     increasing in both, each state pruned when its Lagrangian bound
//     v + lambda*(C_core - w) + sum(best rc of the classes still to come)
//     is below LB (minus the margin).  Equal states keep the better rank of
//     the class just added, which is exactly rule (3).  If the list grows past
//     a budget the DP restarts densely over capacity (exact-weight table,
//     one choice byte per class and GPU), refusing (status TABLE_LIMIT) when
//     that table would exceed max_table_bytes.
//
// Integers are int64 end to end; only the bound uses doubles, guarded by the
// margin 1 + kMarginRel * (magnitude of the bound terms), far above the
// accumulated rounding error for up to 2**22 classes with values < 2**41.
//
// Memory: the per-call arrays (O(n*K)) live in a thread-local workspace reused
// across calls (no shared state between threads; released after a call when it
// exceeds kKeepBytes).  The sparse DP's state lists and the dense table are per
// call and bounded by max_table_bytes.
//
// Shortcut for step-weighted instances (solve_values_unit_steps): when option k of
// every class weighs (k + 1) * g (one g for all classes, as Aryl's extra-worker
// tables do) and the LP relaxation over the classes' upper hulls is integral and
// unique, the greedy over the hull segments is the unique optimum and so the
// solver's answer, found in O(options) plus a selection, without steps 1-4.  It
// refuses (and the caller runs the solver) otherwise; see its comment for the proof.
// UnitStepStream is the same shortcut fed row by row by a caller that computes the
// values (the Aryl pass), quantising each while the caller has it at hand.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace aryl {
namespace mckp {

// Indices into the stats array filled by solve().
enum Stat : int {
  STAT_N_CLASSES = 0,   // classes with at least one usable option
  STAT_N_CORE = 1,      // classes left for the DP after the reduction
  STAT_N_FIXED = 2,     // classes fixed by the reduction (incl. trivial instances)
  STAT_N_CORE_ALTS = 3, // alternatives (incl. "none") over the core classes
  STAT_DP_KIND = 4,     // 0 no DP needed, 1 sparse, 2 dense
  STAT_N_STATES = 5,    // states stored by the sparse DP (last attempt)
  STAT_TABLE_BYTES = 6, // bytes of the dense table (needed or used)
  STAT_LB = 7,          // incumbent value (quantised units)
  STAT_UB = 8,          // Lagrangian upper bound, floored
  STAT_OPT = 9,         // optimal value (quantised units)
  STAT_SPARSE_BYTES = 10,  // peak bytes of states held by the sparse DP (this call)
  STAT_USED = 11,       // weight (GPUs) of the returned choice
  STAT_BAD_INDEX = 12,  // flat index (row * K + col) of the first invalid entry, else -1
  STAT_SELECT_LEVELS = 13,  // histogram levels of the radix select for the LP break
  N_STATS = 14
};

enum Status : int {
  STATUS_OK = 0,
  STATUS_TABLE_LIMIT = 1,  // the dense table would exceed max_table_bytes
  STATUS_INF_VALUE = 2,    // solve_values: a value is +-inf (at STAT_BAD_INDEX)
  STATUS_BAD_WEIGHT = 3    // a present option has weight < 1 (at STAT_BAD_INDEX)
};

constexpr double kMarginRel = 1e-8;

// Bits of the value grid (aryl.elastic.QUANT_BITS): quantised values are <= 2**40.
constexpr int kQuantBits = 40;

namespace detail {

constexpr int64_t kNeg = std::numeric_limits<int64_t>::min() / 4;

// Segments scanned past the LP break for the incumbent.
constexpr size_t kFill = 4096;
// Radix select: buckets per level (at most 2**kBucketBits, fewer for a small level:
// about one per two segments, so that clearing the counters never outweighs the
// level's passes over its segments), and the size below which a bucket is sorted.
// A level costs two passes over its segments, sorting them several times that (the
// merge of the classes' runs), and the incumbent seldom needs the segments below the
// break bucket sorted (the fill reaches the capacity within the bucket): so even a
// few dozen segments are cheaper selected than sorted.  (The break, lambda and the
// incumbent do not depend on it while the segments are fewer than kFill.)
constexpr int kBucketBits = 11;
constexpr int kMinBucketBits = 6;
constexpr size_t kSortBelow = 32;
// Workspace bytes kept between calls (a larger one is released after the call).
constexpr size_t kKeepBytes = size_t(64) << 20;

struct Item {
  int64_t w;
  int64_t q;
  int64_t k;  // original option index, -1 = none
};

struct State {
  int64_t w;
  int64_t v;
  int64_t parent;  // index of the previous stage's state
  int64_t alt;     // rank of the alternative of this stage's class
};

// A hull segment of one class: from hull point pos - 1 to pos (1-based; 0 = origin).
struct Seg {
  uint64_t key;  // bit pattern of the efficiency dq/dw (>= 0): monotone in it
  int64_t dw;
  int32_t cls;
  int32_t pos;
};

// Order of the LP greedy: efficiency descending, then position ascending (a class's
// equal-efficiency segments in order; ties across classes spread the steps over
// the classes, which fills the knapsack more tightly), then class ascending.
inline bool greedy_before(const Seg& a, const Seg& b) {
  if (a.key != b.key) return a.key > b.key;
  if (a.pos != b.pos) return a.pos < b.pos;
  return a.cls < b.cls;
}
// greedy_before as a function object: std::sort inlines it (through a function
// pointer it is one call per comparison, ~20% of a small solve)
struct GreedyBefore {
  bool operator()(const Seg& a, const Seg& b) const { return greedy_before(a, b); }
};

// Sort segs[0, n) by greedy_before when they come as runs already in that order
// (a class's segments are: efficiency non-increasing, position ascending): find the
// runs, then merge them pairwise, O(n log runs).  greedy_before is a strict total
// order, so the result is the one std::sort gives.  tmp holds n segments, bounds the
// run boundaries.
inline void merge_runs(Seg* segs, size_t n, std::vector<Seg>& tmp,
                       std::vector<int64_t>& bounds) {
  bounds.clear();
  bounds.push_back(0);
  for (size_t t = 1; t < n; ++t)
    if (greedy_before(segs[t], segs[t - 1])) bounds.push_back(static_cast<int64_t>(t));
  bounds.push_back(static_cast<int64_t>(n));
  if (bounds.size() <= 2) return;
  if (tmp.size() < n) tmp.resize(n);
  Seg* src = segs;
  Seg* dst = tmp.data();
  while (bounds.size() > 2) {
    size_t w = 1;
    const size_t nr = bounds.size() - 1;
    for (size_t r = 0; r < nr; r += 2) {
      const int64_t a = bounds[r], b = bounds[r + 1];
      const int64_t c = r + 2 <= nr ? bounds[r + 2] : b;
      std::merge(src + a, src + b, src + b, src + c, dst + a, GreedyBefore());
      bounds[w++] = c;
    }
    bounds.resize(w);
    std::swap(src, dst);
  }
  if (src != segs) std::copy(src, src + n, segs);
}

// Sort segs[0, n) by greedy_before.  segs is in (class, position) order (as built
// and filtered), so when all keys are equal a stable counting sort by position
// does it in O(n + K); tmp holds n segments, cnt K + 2 counters.
inline void sort_greedy(Seg* segs, size_t n, std::vector<Seg>& tmp, std::vector<int64_t>& cnt) {
  if (n < 2) return;
  bool equal = true;
  int32_t max_pos = 0;
  for (size_t t = 0; t < n; ++t) {
    equal = equal && segs[t].key == segs[0].key;
    max_pos = std::max(max_pos, segs[t].pos);
  }
  if (!equal) {
    merge_runs(segs, n, tmp, cnt);
    return;
  }
  if (n < 64) {
    std::sort(segs, segs + n, GreedyBefore());
    return;
  }
  cnt.assign(static_cast<size_t>(max_pos) + 2, 0);
  for (size_t t = 0; t < n; ++t) ++cnt[static_cast<size_t>(segs[t].pos) + 1];
  for (size_t p = 1; p < cnt.size(); ++p) cnt[p] += cnt[p - 1];
  if (tmp.size() < n) tmp.resize(n);
  for (size_t t = 0; t < n; ++t) {
    const size_t to = static_cast<size_t>(cnt[static_cast<size_t>(segs[t].pos)]++);
    tmp[to] = segs[t];
  }
  std::copy(tmp.begin(), tmp.begin() + static_cast<std::ptrdiff_t>(n), segs);
}

inline uint64_t key_of(double eff) {
  uint64_t u;
  std::memcpy(&u, &eff, sizeof u);
  return u;
}

inline double eff_of(uint64_t key) {
  double d;
  std::memcpy(&d, &key, sizeof d);
  return d;
}

inline int bit_length(uint64_t x) {
  int b = 0;
  while (x) {
    ++b;
    x >>= 1;
  }
  return b;
}

// Grow-only buffer access: no re-initialisation of kept elements.
template <typename T>
inline T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// A step of the step shortcut's cut bucket: its efficiency and its class.
struct CutStep {
  double e;
  int64_t cls;
};

// Per-thread scratch arrays of one solve, reused across calls.
struct Workspace {
  // usable, undominated options (items), class-major, sorted by weight
  std::vector<int64_t> iw, iq, ik, off;
  // hull points (weights, values), per class from hoff
  std::vector<int64_t> hoff, hw, hq;
  // per class: hull position of the incumbent (0 = none)
  std::vector<int32_t> hpos;
  // segments (one per hull point) in the radix select's two buffers; fill candidates
  std::vector<Seg> sel_a, sel_b, fill, tmp_seg;
  std::vector<size_t> fill_lvl;
  std::vector<char> fill_all;
  std::vector<double> best_rc, gap2;
  std::vector<int64_t> best_arg;
  // scratch of one class (unsorted input)
  std::vector<int64_t> tw, tq, tk, perm;
  // radix select: histogram per bucket (weights, counts); counting sort by position
  std::vector<int64_t> hist_w, hist_n, pos_cnt;
  // the core: class ids (descending), alternatives in rank order from aoff
  std::vector<int64_t> core, aoff;
  std::vector<Item> alts;
  std::vector<double> rem;
  std::vector<int64_t> pick;
  // the sparse DP: stored states, one stage's candidates and their sorted runs
  std::vector<State> states, cand;
  std::vector<size_t> runs, merged;
  // solve_values_unit_steps: the step efficiencies per class, those in the cut's
  // bucket with their classes, the steps per class, the classes' g and tops when the
  // caller gives none, one class's hull, the histogram
  std::vector<double> step_eff;
  std::vector<CutStep> step_sel;
  std::vector<int64_t> step_n, step_g, step_top, hull_s, hull_q;
  std::vector<uint32_t> step_hist;

  size_t bytes() const {
    return (iw.capacity() + iq.capacity() + ik.capacity() + off.capacity() + hw.capacity() +
            hq.capacity() +
            hoff.capacity() + best_arg.capacity() + tw.capacity() +
            tq.capacity() + tk.capacity() + perm.capacity() + core.capacity() +
            aoff.capacity() + pick.capacity() + hist_w.capacity() + hist_n.capacity() +
            pos_cnt.capacity()) * 8 +
           hpos.capacity() * 4 +
           (sel_a.capacity() + sel_b.capacity() + fill.capacity() + tmp_seg.capacity()) *
               sizeof(Seg) +
           fill_lvl.capacity() * sizeof(size_t) + fill_all.capacity() +
           (best_rc.capacity() + gap2.capacity() + rem.capacity()) * 8 +
           alts.capacity() * sizeof(Item) + (states.capacity() + cand.capacity()) * sizeof(State) +
           (runs.capacity() + merged.capacity()) * sizeof(size_t) +
           (step_eff.capacity() + step_n.capacity() + step_g.capacity() + step_top.capacity() +
            hull_s.capacity() + hull_q.capacity()) * 8 +
           step_sel.capacity() * sizeof(CutStep) +
           step_hist.capacity() * 4;
  }
};

// Not inlined: inlined, the compiler addresses the thread-local object afresh at every
// use (a __tls_get_addr call per access in a shared library, ~10% of a solve); called
// once per solve, it hands out a plain reference.
#if defined(_MSC_VER)
__declspec(noinline)
#else
__attribute__((noinline))
#endif
inline Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

// Dense exact-weight DP over the core; T is the per-cell choice type.
template <typename T>
inline void dense_dp(const int64_t* aoff, const Item* alts, size_t m, int64_t cap,
                     int64_t* pick) {
  const size_t width = static_cast<size_t>(cap) + 1;
  std::vector<T> table(m * width);
  std::vector<int64_t> f(width, kNeg), g(width);
  f[0] = 0;
  for (size_t s = 0; s < m; ++s) {
    std::fill(g.begin(), g.end(), kNeg);
    T* ch = table.data() + s * width;
    std::fill(ch, ch + width, T(0));
    const Item* a = alts + aoff[s];
    const size_t na = static_cast<size_t>(aoff[s + 1] - aoff[s]);
    for (size_t r = 0; r < na; ++r) {  // rank order: strict '>' keeps the best rank
      const int64_t aw = a[r].w, aq = a[r].q;
      if (aw > cap) continue;
      const T rr = static_cast<T>(r);
      const int64_t* src = f.data();
      int64_t* dst = g.data() + aw;
      T* cdst = ch + aw;
      const size_t len = width - static_cast<size_t>(aw);
      for (size_t c = 0; c < len; ++c) {
        const int64_t cand = src[c] + aq;  // unreachable stays far below kNeg / 2
        const bool better = cand > dst[c];
        dst[c] = better ? cand : dst[c];
        cdst[c] = better ? rr : cdst[c];
      }
    }
    for (size_t c = 0; c < width; ++c)
      if (g[c] < kNeg / 2) g[c] = kNeg;
    f.swap(g);
  }
  int64_t best = kNeg;
  size_t c = 0;
  for (size_t x = 0; x < width; ++x)
    if (f[x] > best) {
      best = f[x];
      c = x;
    }
  for (size_t s = m; s-- > 0;) {
    const T r = table[s * width + c];
    pick[s] = static_cast<int64_t>(r);
    c -= static_cast<size_t>(alts[aoff[s] + r].w);
  }
}

// Values given already quantised: q <= 0 is absent; present options need w >= 1.
struct QuantizedSource {
  const int64_t* q;
  int64_t value(size_t idx) const { return q[idx]; }
  // returns a Status for entry idx with weight w (only called where value > 0)
  static int check_present(int64_t w) { return w >= 1 ? STATUS_OK : STATUS_BAD_WEIGHT; }
};

// Float values quantised onto the grid 2**(e - kQuantBits), e = frexp exponent of
// the largest positive value: q = rint(v * 2**(kQuantBits - e)) for v > 0, else 0.
// Multiplying by an exact power of two (in two exact steps when 2**shift itself
// is not a double) gives the correctly rounded v * 2**shift, exactly like
// np.ldexp; rint is the round-half-even of (x + 2**52) - 2**52 for 0 <= x <= 2**41.
struct FloatSource {
  const double* v;
  double scale1 = 1.0, scale2 = 1.0;
  bool two_steps = false;

  // vmax > 0: the largest positive value
  void set_max(double vmax) {
    int e = 0;
    std::frexp(vmax, &e);
    const int shift = kQuantBits - e;  // in [-984, 1114]
    if (shift > 1000) {
      two_steps = true;
      scale1 = std::ldexp(1.0, 1000);
      scale2 = std::ldexp(1.0, shift - 1000);
    } else {
      scale1 = std::ldexp(1.0, shift);
    }
  }
  int64_t value(size_t idx) const {
    const double x = v[idx];
    if (!(x > 0.0)) return 0;  // <= 0 and NaN
    double s = x * scale1;
    if (two_steps) s *= scale2;
    constexpr double kMagic = 4503599627370496.0;  // 2**52
    const double r = (s + kMagic) - kMagic;
    return static_cast<int64_t>(r);
  }
  // weights were checked with the values (solve_values), before any quantising
  static int check_present(int64_t) { return STATUS_OK; }
};

// Steps 1-4 over a value source (QuantizedSource or FloatSource).
template <typename Src>
inline int solve_impl(const Src& src, const int64_t* wt, int64_t n, int64_t K, int64_t C,
                      int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode) {
  Workspace& ws = workspace();
  const size_t nn = static_cast<size_t>(n);
  const size_t NK = nn * static_cast<size_t>(K);

  // ---- 1. usable, undominated options per class, sorted by weight; hulls, segments
  int64_t* iw = grow(ws.iw, NK);
  int64_t* iq = grow(ws.iq, NK);
  int64_t* ik = grow(ws.ik, NK);
  int64_t* off = grow(ws.off, nn + 1);
  int64_t* hw = grow(ws.hw, NK);  // weight and value of each hull point
  int64_t* hq = grow(ws.hq, NK);
  int64_t* hoff = grow(ws.hoff, nn + 1);
  Seg* sel = grow(ws.sel_a, NK);
  int64_t* tw = grow(ws.tw, static_cast<size_t>(K));
  int64_t* tq = grow(ws.tq, static_cast<size_t>(K));
  int64_t* tk = grow(ws.tk, static_cast<size_t>(K));
  int64_t* perm = grow(ws.perm, static_cast<size_t>(K));

  int64_t n_items = 0, n_hull = 0;
  int64_t sum_maxw = 0;  // saturates above C
  int64_t n_classes = 0;
  uint64_t kmin = std::numeric_limits<uint64_t>::max(), kmax = 0;
  off[0] = hoff[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(i) * static_cast<size_t>(K);
    // Optimistic pass: in order of option index, assuming weights sorted (w asc,
    // q desc), filter dominated options on the fly; undo and sort if not.
    const int64_t start = n_items;
    int64_t best = 0, pw = -1, pq = 0;
    bool sorted = true;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t qv = src.value(row + static_cast<size_t>(k));
      if (qv <= 0) continue;
      const int64_t wv = wt[row + static_cast<size_t>(k)];
      if (Src::check_present(wv) != STATUS_OK) {
        stats[STAT_BAD_INDEX] = static_cast<int64_t>(row) + k;
        return STATUS_BAD_WEIGHT;
      }
      if (wv > C) continue;
      if (wv < pw || (wv == pw && qv > pq)) {
        sorted = false;
        break;
      }
      pw = wv;
      pq = qv;
      if (qv > best) {
        iw[n_items] = wv;
        iq[n_items] = qv;
        ik[n_items] = k;
        ++n_items;
        best = qv;
      }
    }
    if (!sorted) {
      n_items = start;
      int64_t nt = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t qv = src.value(row + static_cast<size_t>(k));
        if (qv <= 0) continue;
        const int64_t wv = wt[row + static_cast<size_t>(k)];
        if (Src::check_present(wv) != STATUS_OK) {
          stats[STAT_BAD_INDEX] = static_cast<int64_t>(row) + k;
          return STATUS_BAD_WEIGHT;
        }
        if (wv > C) continue;
        tw[nt] = wv;
        tq[nt] = qv;
        tk[nt] = k;
        ++nt;
      }
      for (int64_t t = 0; t < nt; ++t) perm[t] = t;
      std::sort(perm, perm + nt, [&](int64_t a, int64_t b) {
        if (tw[a] != tw[b]) return tw[a] < tw[b];
        if (tq[a] != tq[b]) return tq[a] > tq[b];
        return tk[a] < tk[b];
      });
      best = 0;
      for (int64_t t = 0; t < nt; ++t) {
        const int64_t j = perm[t];
        if (tq[j] > best) {
          iw[n_items] = tw[j];
          iq[n_items] = tq[j];
          ik[n_items] = tk[j];
          ++n_items;
          best = tq[j];
        }
      }
    }
    off[i + 1] = n_items;
    if (n_items == start) {
      hoff[i + 1] = n_hull;
      continue;
    }
    ++n_classes;
    if (sum_maxw <= C) sum_maxw += iw[n_items - 1];
    // Upper hull of (0,0) and the class's options, with its segments: pop the last
    // point b while it lies strictly below the chord from the point a before it to
    // the new point j, i.e. (qj - qb)(wb - wa) > (qb - qa)(wj - wb) (collinear
    // points stay, for a finer incumbent).  Efficiencies are clamped to stay
    // non-increasing along the class whatever the rounding.
    const int64_t base = n_hull;
    const int32_t cls = static_cast<int32_t>(i);
    for (int64_t j = start; j < n_items; ++j) {
      const int64_t jw = iw[j], jq = iq[j];
      int64_t bw = 0, bq = 0;  // the last hull point (or the origin)
      while (n_hull > base) {
        bw = hw[n_hull - 1];
        bq = hq[n_hull - 1];
        const int64_t aw = n_hull > base + 1 ? hw[n_hull - 2] : 0;
        const int64_t aq = n_hull > base + 1 ? hq[n_hull - 2] : 0;
        if (static_cast<double>(jq - bq) * static_cast<double>(bw - aw) >
            static_cast<double>(bq - aq) * static_cast<double>(jw - bw)) {
          --n_hull;
          bw = aw;
          bq = aq;
        } else {
          break;
        }
      }
      double eff = static_cast<double>(jq - bq) / static_cast<double>(jw - bw);
      if (n_hull > base) eff = std::min(eff, eff_of(sel[n_hull - 1].key));
      hw[n_hull] = jw;
      hq[n_hull] = jq;
      sel[n_hull] = {key_of(eff), jw - bw, cls, static_cast<int32_t>(n_hull - base + 1)};
      ++n_hull;
    }
    hoff[i + 1] = n_hull;
    kmax = std::max(kmax, sel[base].key);  // the class's first segment is its steepest
    kmin = std::min(kmin, sel[n_hull - 1].key);
  }
  stats[STAT_N_CLASSES] = n_classes;
  if (n_classes == 0) return STATUS_OK;

  if (sum_maxw <= C) {  // everything fits: each class takes its most valuable option
    int64_t total = 0, used = 0;
    for (int64_t i = 0; i < n; ++i)
      if (off[i + 1] > off[i]) {
        choice[i] = ik[off[i + 1] - 1];
        total += iq[off[i + 1] - 1];
        used += iw[off[i + 1] - 1];
      }
    stats[STAT_N_FIXED] = n_classes;
    stats[STAT_LB] = stats[STAT_UB] = stats[STAT_OPT] = total;
    stats[STAT_USED] = used;
    return STATUS_OK;
  }

  // ---- 2. LP break by radix select on the efficiencies; greedy incumbent
  int32_t* hpos = grow(ws.hpos, nn);
  std::fill(hpos, hpos + nn, 0);
  auto take = [&](const Seg& g) {
    if (g.pos > hpos[g.cls]) hpos[g.cls] = g.pos;
  };
  Seg* other = grow(ws.sel_b, NK);
  // Fill candidates per level l: [fill_lvl[l], fill_lvl[l+1]) of ws.fill, the
  // segments of the level's buckets just below its break bucket (at least kFill of
  // them, if there are); fill_all[l]: all of them.  Scanned innermost level
  // first, they continue the greedy order exactly, up to the first level not
  // taken whole.
  ws.fill.clear();
  ws.fill_lvl.assign(1, 0);
  ws.fill_all.clear();
  size_t cnt = static_cast<size_t>(n_hull);
  int64_t room = C;
  {
    int64_t* hist_w = grow(ws.hist_w, size_t(1) << kBucketBits);
    int64_t* hist_n = grow(ws.hist_n, size_t(1) << kBucketBits);
    const int64_t sat = C + 1;  // per-bucket sums saturate here (only compared to room)
    while (cnt > kSortBelow && kmax > kmin) {
      const int bits = std::max(kMinBucketBits, std::min(kBucketBits, bit_length(cnt) - 1));
      const int shift = std::max(0, bit_length(kmax - kmin) - bits);
      const size_t nb = static_cast<size_t>(((kmax - kmin) >> shift) + 1);
      std::fill(hist_w, hist_w + nb, 0);
      std::fill(hist_n, hist_n + nb, 0);
      for (size_t t = 0; t < cnt; ++t) {
        const size_t b = static_cast<size_t>((sel[t].key - kmin) >> shift);
        const int64_t s = hist_w[b] + sel[t].dw;
        hist_w[b] = s < sat ? s : sat;
        ++hist_n[b];
      }
      // the break bucket: the first, from the top, whose weight does not fit
      size_t bs = nb;
      int64_t acc = 0;
      while (bs-- > 0) {
        if (hist_w[bs] > room - acc) break;
        acc += hist_w[bs];
      }
      // (the segments in sel weigh more than room, so bs < nb is found)
      room -= acc;
      // fill candidates: the buckets just below the break bucket, >= kFill in all
      size_t bf = bs;
      int64_t n_fill = 0;
      while (bf > 0 && n_fill < static_cast<int64_t>(kFill)) n_fill += hist_n[--bf];
      const uint64_t k_lo = kmin;
      size_t n_next = 0;
      uint64_t nmin = std::numeric_limits<uint64_t>::max(), nmax = 0;
      for (size_t t = 0; t < cnt; ++t) {
        const size_t b = static_cast<size_t>((sel[t].key - k_lo) >> shift);
        if (b > bs) {
          take(sel[t]);
        } else if (b == bs) {
          other[n_next++] = sel[t];
          nmin = std::min(nmin, sel[t].key);
          nmax = std::max(nmax, sel[t].key);
        } else if (b >= bf) {
          ws.fill.push_back(sel[t]);
        }
      }
      ws.fill_lvl.push_back(ws.fill.size());
      ws.fill_all.push_back(bf == 0 ? 1 : 0);
      std::swap(sel, other);
      ++stats[STAT_SELECT_LEVELS];
      cnt = n_next;
      kmin = nmin;
      kmax = nmax;
    }
  }
  sort_greedy(sel, cnt, ws.tmp_seg, ws.pos_cnt);
  size_t s = 0;
  for (; s < cnt && sel[s].dw <= room; ++s) {
    room -= sel[s].dw;
    take(sel[s]);
  }
  // s < cnt: the segments left weigh more than room
  const double lambda = eff_of(sel[s].key);
  int64_t used = C - room;
  {
    size_t scanned = 0;
    auto fill_one = [&](const Seg& g) {
      if (hpos[g.cls] == g.pos - 1 && used + g.dw <= C) {
        used += g.dw;
        hpos[g.cls] = g.pos;
      }
      ++scanned;
    };
    for (size_t t = s + 1; t < cnt && scanned < kFill && used < C; ++t) fill_one(sel[t]);
    // then the levels' candidates, innermost level first (that is the greedy order)
    for (size_t l = ws.fill_all.size(); l-- > 0 && scanned < kFill && used < C;) {
      Seg* a = ws.fill.data() + ws.fill_lvl[l];
      Seg* b = ws.fill.data() + ws.fill_lvl[l + 1];
      const size_t need = kFill - scanned;
      if (static_cast<size_t>(b - a) > 2 * need + 64) {  // a big last bucket: its top only
        std::nth_element(a, a + need, b, GreedyBefore());
        b = a + need;
      }
      sort_greedy(a, static_cast<size_t>(b - a), ws.tmp_seg, ws.pos_cnt);
      for (Seg* g = a; g < b && scanned < kFill && used < C; ++g) fill_one(*g);
      if (!ws.fill_all[l]) break;  // a gap follows: stop at a prefix of the order
    }
  }
  int64_t lb = 0;
  for (int64_t i = 0; i < n; ++i)
    if (hpos[i] > 0) lb += hq[hoff[i] + hpos[i] - 1];

  // ---- 3. Lagrangian bound at lambda: best and second-best reduced cost per class
  double* best_rc = grow(ws.best_rc, nn);
  double* gap2 = grow(ws.gap2, nn);
  int64_t* best_arg = grow(ws.best_arg, nn);
  double sum_best = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double b = 0.0, second = -std::numeric_limits<double>::infinity();  // "none": rc 0
    int64_t arg = -1;
    for (int64_t j = off[i]; j < off[i + 1]; ++j) {
      const double rc = static_cast<double>(iq[j]) - lambda * static_cast<double>(iw[j]);
      if (rc > b) {
        second = b;
        b = rc;
        arg = j;
      } else if (rc > second) {
        second = rc;
      }
    }
    best_rc[i] = b;
    gap2[i] = b - second;
    best_arg[i] = arg;
    sum_best += b;
  }
  const double ub = lambda * static_cast<double>(C) + sum_best;
  const double margin = 1.0 + kMarginRel * (lambda * static_cast<double>(C) + sum_best +
                                            static_cast<double>(lb));
  stats[STAT_LB] = lb;
  stats[STAT_UB] = static_cast<int64_t>(ub);

  // ---- 4. reduction: keep alternatives with best_rc - rc <= gap + margin
  std::vector<int64_t>& core = ws.core;  // class ids, descending
  std::vector<int64_t>& aoff = ws.aoff;  // per core class, alternatives in rank order
  std::vector<Item>& alts = ws.alts;
  int64_t fixed_w = 0, fixed_q = 0, n_fixed = 0;
  auto fix = [&](int64_t i, int64_t w, int64_t q, int64_t k) {
    choice[i] = k;
    fixed_w += w;
    fixed_q += q;
    ++n_fixed;
  };
  auto reduce = [&](double thr) {
    core.clear();
    aoff.assign(1, 0);
    alts.clear();
    fixed_w = fixed_q = n_fixed = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      if (off[i + 1] == off[i]) continue;
      if (gap2[i] > thr) {  // only the best alternative survives
        const int64_t j = best_arg[i];
        if (j >= 0)
          fix(i, iw[j], iq[j], ik[j]);
        else
          fix(i, 0, 0, -1);
        continue;
      }
      const size_t a0 = alts.size();
      for (int64_t j = off[i + 1] - 1; j >= off[i]; --j) {  // heavier first = rank order
        const double rc = static_cast<double>(iq[j]) - lambda * static_cast<double>(iw[j]);
        if (best_rc[i] - rc <= thr) alts.push_back({iw[j], iq[j], ik[j]});
      }
      if (best_rc[i] <= thr) alts.push_back({0, 0, -1});  // "none" last
      if (alts.size() - a0 == 1) {
        const Item it = alts.back();
        alts.pop_back();
        fix(i, it.w, it.q, it.k);
      } else {
        core.push_back(i);
        aoff.push_back(static_cast<int64_t>(alts.size()));
      }
    }
  };
  reduce(ub - static_cast<double>(lb) + margin);
  if (fixed_w > C) {  // cannot happen with a sound margin; stay exact regardless
    for (int64_t i = 0; i < n; ++i) choice[i] = -1;
    reduce(std::numeric_limits<double>::infinity());
  }
  const int64_t m = static_cast<int64_t>(core.size());
  stats[STAT_N_CORE] = m;
  stats[STAT_N_FIXED] = n_fixed;
  stats[STAT_N_CORE_ALTS] = static_cast<int64_t>(alts.size());
  if (m == 0) {
    stats[STAT_OPT] = fixed_q;
    stats[STAT_USED] = fixed_w;
    return STATUS_OK;
  }
  int64_t cap = C - fixed_w;
  {
    int64_t sum_core_maxw = 0;
    for (int64_t t = 0; t < m; ++t) {
      sum_core_maxw += alts[static_cast<size_t>(aoff[t])].w;
      if (sum_core_maxw >= cap) break;
    }
    cap = std::min(cap, sum_core_maxw);
  }
  const double lb_core = static_cast<double>(lb - fixed_q) - margin;
  double* rem = grow(ws.rem, static_cast<size_t>(m) + 1);  // best rc of later stages
  rem[m] = 0.0;
  for (int64_t t = m - 1; t >= 0; --t) rem[t] = rem[t + 1] + best_rc[core[t]];

  // ---- 5a. sparse DP with bounds
  int64_t* pick = grow(ws.pick, static_cast<size_t>(m));
  const int64_t width = cap + 1;
  const double dense_cells = static_cast<double>(m) * static_cast<double>(width);
  // State budget: the stored states and one stage's candidates (each vector may
  // hold up to twice its size while growing) stay within max_table_bytes;
  // and past an eighth of the dense table's cells the dense DP is the cheaper one
  // (a sparse state costs several times a dense cell).
  const double mem_states =
      static_cast<double>(max_table_bytes) / static_cast<double>(4 * sizeof(State));
  const int64_t budget = static_cast<int64_t>(
      dp_mode == 1 ? mem_states : std::min(mem_states, std::max(dense_cells / 8.0, 4096.0)));
  bool sparse_ok = dp_mode != 2;
  if (sparse_ok) {
    // buffers kept per thread (their capacity stays between calls)
    std::vector<State>& all = ws.states;
    std::vector<State>& cand = ws.cand;
    std::vector<size_t>& runs = ws.runs;  // run boundaries in cand
    std::vector<size_t>& merged = ws.merged;
    all.clear();
    size_t cand_peak = 0, runs_peak = 0;
    all.push_back({0, 0, -1, -1});
    size_t lo = 0, hi = 1;
    for (int64_t t = 0; t < m && sparse_ok; ++t) {
      const Item* a = alts.data() + aoff[t];
      const size_t na = static_cast<size_t>(aoff[t + 1] - aoff[t]);
      const double rb = rem[t + 1];
      cand.clear();
      runs.assign(1, 0);
      // The stored states and this stage's candidates each stay within the budget,
      // checked per push: one stage can multiply the states by its alternatives.
      const size_t room_states = static_cast<size_t>(budget);
      for (size_t r = 0; r < na && sparse_ok; ++r) {
        const int64_t aw = a[r].w, aq = a[r].q;
        for (size_t p = lo; p < hi; ++p) {
          const int64_t nw = all[p].w + aw;
          if (nw > cap) break;
          const int64_t nv = all[p].v + aq;
          if (static_cast<double>(nv) + rb + lambda * static_cast<double>(cap - nw) < lb_core)
            continue;
          if (cand.size() >= room_states) {
            sparse_ok = false;
            break;
          }
          cand.push_back({nw, nv, static_cast<int64_t>(p), static_cast<int64_t>(r)});
        }
        if (cand.size() > runs.back()) runs.push_back(cand.size());
      }
      cand_peak = std::max(cand_peak, cand.size());
      runs_peak = std::max(runs_peak, runs.size());
      if (!sparse_ok) break;
      // Each alternative's run is sorted by weight: merge the runs bottom-up,
      // O(candidates * log(alternatives)), by (weight, -value, rank).
      auto key = [](const State& x, const State& y) {
        if (x.w != y.w) return x.w < y.w;
        if (x.v != y.v) return x.v > y.v;
        return x.alt < y.alt;
      };
      while (runs.size() > 2) {
        merged.clear();
        merged.push_back(0);
        const size_t n_runs = runs.size() - 1;
        for (size_t j = 0; j + 1 < n_runs; j += 2) {
          std::inplace_merge(cand.begin() + static_cast<std::ptrdiff_t>(runs[j]),
                             cand.begin() + static_cast<std::ptrdiff_t>(runs[j + 1]),
                             cand.begin() + static_cast<std::ptrdiff_t>(runs[j + 2]), key);
          merged.push_back(runs[j + 2]);
        }
        if (n_runs % 2 == 1) merged.push_back(runs[n_runs]);
        runs.swap(merged);
      }
      lo = all.size();
      int64_t bestv = kNeg;
      for (const State& c : cand)
        if (c.v > bestv) {
          if (all.size() >= room_states) {
            sparse_ok = false;
            break;
          }
          all.push_back(c);
          bestv = c.v;
        }
      if (!sparse_ok) break;
      hi = all.size();
      // The canonical optimum's states are never pruned, so a stage is never empty;
      // should rounding ever prove that wrong, the unpruned dense DP takes over.
      if (hi == lo) sparse_ok = false;
    }
    stats[STAT_N_STATES] = static_cast<int64_t>(all.size());
    // In use at the peak; growing a vector may reserve up to twice its size, so the
    // budget (states per vector <= max_table_bytes / (4 * sizeof(State))) keeps the
    // reservations within max_table_bytes.
    stats[STAT_SPARSE_BYTES] = static_cast<int64_t>(
        (all.size() + cand_peak) * sizeof(State) + 2 * runs_peak * sizeof(size_t));
    if (sparse_ok) {
      // hi > lo: the canonical optimum is never pruned; the last state has the max value
      int64_t idx = static_cast<int64_t>(hi) - 1;
      stats[STAT_OPT] = fixed_q + all[idx].v;
      stats[STAT_USED] = fixed_w + all[idx].w;
      for (int64_t t = m - 1; t >= 0; --t) {
        pick[t] = all[idx].alt;
        idx = all[idx].parent;
      }
      stats[STAT_DP_KIND] = 1;
    }
  }

  // ---- 5b. dense DP fallback
  if (!sparse_ok && dp_mode == 1) {
    stats[STAT_TABLE_BYTES] = static_cast<int64_t>(static_cast<double>(sizeof(State)) *
                                                   static_cast<double>(stats[STAT_N_STATES]));
    return STATUS_TABLE_LIMIT;
  }
  if (!sparse_ok) {
    int64_t max_alts = 0;
    for (int64_t t = 0; t < m; ++t) max_alts = std::max(max_alts, aoff[t + 1] - aoff[t]);
    const int64_t cell = max_alts <= 256 ? 1 : max_alts <= 65536 ? 2 : 4;
    const double bytes =
        dense_cells * static_cast<double>(cell) + 16.0 * static_cast<double>(width);
    stats[STAT_TABLE_BYTES] = bytes > 9e18 ? std::numeric_limits<int64_t>::max()
                                           : static_cast<int64_t>(bytes);
    if (bytes > static_cast<double>(max_table_bytes)) return STATUS_TABLE_LIMIT;
    const size_t mm = static_cast<size_t>(m);
    if (cell == 1)
      dense_dp<uint8_t>(aoff.data(), alts.data(), mm, cap, pick);
    else if (cell == 2)
      dense_dp<uint16_t>(aoff.data(), alts.data(), mm, cap, pick);
    else
      dense_dp<uint32_t>(aoff.data(), alts.data(), mm, cap, pick);
    stats[STAT_DP_KIND] = 2;
    int64_t opt = fixed_q, wsum = fixed_w;
    for (int64_t t = 0; t < m; ++t) {
      opt += alts[static_cast<size_t>(aoff[t] + pick[t])].q;
      wsum += alts[static_cast<size_t>(aoff[t] + pick[t])].w;
    }
    stats[STAT_OPT] = opt;
    stats[STAT_USED] = wsum;
  }
  for (int64_t t = 0; t < m; ++t) choice[core[t]] = alts[static_cast<size_t>(aoff[t] + pick[t])].k;
  return STATUS_OK;
}

template <typename Src>
inline int solve_entry(const Src& src, const int64_t* wt, int64_t n, int64_t K, int64_t C,
                       int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode) {
  for (int64_t i = 0; i < n; ++i) choice[i] = -1;
  for (int s = 0; s < N_STATS; ++s) stats[s] = 0;
  stats[STAT_BAD_INDEX] = -1;
  if (n <= 0 || K <= 0) return STATUS_OK;
  const int status = solve_impl(src, wt, n, K, C, max_table_bytes, choice, stats, dp_mode);
  if (status == STATUS_BAD_WEIGHT || status == STATUS_INF_VALUE)
    for (int64_t i = 0; i < n; ++i) choice[i] = -1;
  Workspace& ws = workspace();
  if (ws.bytes() > kKeepBytes) ws = Workspace();
  return status;
}

}  // namespace detail

// Solve one instance over quantised values.  q, w: row-major n x K (q <= 0 =
// absent; w >= 1 where q > 0).  choice: n outputs (-1 = none).  stats: N_STATS
// outputs.  dp_mode (for tests): 0 automatic, 1 sparse only (state list limited by
// max_table_bytes alone), 2 dense only.  Returns a Status.
inline int solve(const int64_t* q, const int64_t* wt, int64_t n, int64_t K, int64_t C,
                 int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode = 0) {
  return detail::solve_entry(detail::QuantizedSource{q}, wt, n, K, C, max_table_bytes, choice,
                             stats, dp_mode);
}

// Quantise float values into q (n_entries), as aryl.elastic._quantize does.
// Returns STATUS_INF_VALUE (bad_index set) if a value is +-inf, else STATUS_OK.
inline int quantize(const double* v, int64_t n_entries, int64_t* q, int64_t* bad_index) {
  double vmax = 0.0;
  *bad_index = -1;
  for (int64_t t = 0; t < n_entries; ++t) {
    const double x = v[t];
    if (std::isinf(x)) {
      *bad_index = t;
      return STATUS_INF_VALUE;
    }
    if (x > vmax) vmax = x;
  }
  detail::FloatSource src{v};
  if (vmax > 0.0) src.set_max(vmax);
  for (int64_t t = 0; t < n_entries; ++t)
    q[t] = vmax > 0.0 ? src.value(static_cast<size_t>(t)) : 0;
  return STATUS_OK;
}

// Solve one instance over float values, quantised on the fly (see quantize):
// NaN = absent, values <= 0 never chosen, +-inf refused (STATUS_INF_VALUE), a
// non-NaN value with weight < 1 refused (STATUS_BAD_WEIGHT); the first offending
// flat index goes to stats[STAT_BAD_INDEX].  Otherwise as solve().
inline int solve_values(const double* v, const int64_t* wt, int64_t n, int64_t K, int64_t C,
                        int64_t max_table_bytes, int64_t* choice, int64_t* stats,
                        int dp_mode = 0) {
  const int64_t n_entries = n * K;
  double vmax = 0.0;
  int64_t bad_inf = -1, bad_w = -1;  // first +-inf value; first present weight < 1
  for (int64_t t = 0; t < n_entries; ++t) {
    const double x = v[t];
    if (std::isnan(x)) continue;
    if (x > vmax) vmax = x;
    if (std::isinf(x) || wt[t] < 1) {
      if (std::isinf(x)) {
        bad_inf = t;
        break;
      }
      if (bad_w < 0) bad_w = t;
    }
  }
  if (bad_inf >= 0 || bad_w >= 0 || !(vmax > 0.0)) {  // an error, or nothing to choose
    for (int64_t i = 0; i < n; ++i) choice[i] = -1;
    for (int s = 0; s < N_STATS; ++s) stats[s] = 0;
    stats[STAT_BAD_INDEX] = bad_inf >= 0 ? bad_inf : bad_w;
    return bad_inf >= 0 ? STATUS_INF_VALUE : bad_w >= 0 ? STATUS_BAD_WEIGHT : STATUS_OK;
  }
  detail::FloatSource src{v};
  src.set_max(vmax);
  return detail::solve_entry(src, wt, n, K, C, max_table_bytes, choice, stats, dp_mode);
}

// solve_values for a caller that has scanned the values itself: every value is
// finite or NaN, every weight of a non-NaN value is >= 1, and vmax > 0 is the largest
// value (NaN skipped).  The same result as solve_values, without its scan.
inline int solve_values_prechecked(const double* v, const int64_t* wt, int64_t n, int64_t K,
                                   int64_t C, double vmax, int64_t max_table_bytes,
                                   int64_t* choice, int64_t* stats, int dp_mode = 0) {
  detail::FloatSource src{v};
  src.set_max(vmax);
  return detail::solve_entry(src, wt, n, K, C, max_table_bytes, choice, stats, dp_mode);
}

// ------------------------------------------------------------------ the step shortcut
namespace detail {

// Step efficiencies are doubles in [2**-22, 2**40] (dq >= 1 over ds <= 2**22 steps,
// dq <= 2**40), and their bit patterns are monotone in them.  The selection's
// histogram buckets are quarter binades, taken on the bit pattern minus one (which
// the fast loop has at hand): bucket b holds (step_bucket_low(b),
// step_bucket_low(b + 1)], b = 0 .. kStepBuckets - 1 (2**-22 is in bucket 0, 2**40
// in the last).
constexpr int kStepBucketShift = 50;
constexpr uint64_t kStepBucket0 = (uint64_t(1001) << 2) - 1;
constexpr size_t kStepBuckets = (size_t(1063 - 1001) << 2) + 1;

inline size_t step_bucket_of_key(uint64_t key) {
  return static_cast<size_t>(((key - 1) >> kStepBucketShift) - kStepBucket0);
}
inline size_t step_bucket(double e) { return step_bucket_of_key(key_of(e)); }
inline double step_bucket_low(size_t b) {
  return eff_of((static_cast<uint64_t>(b) + kStepBucket0) << kStepBucketShift);
}

// solve_values_unit_steps, a class that is not the usual one (see unit_steps_impl).
// Its steps: the upper hull of the origin and the points (k + 1, q_k) of the options
// k < lim with q_k > 0 that are more valuable than every lighter option (the others
// are dominated), collinear points dropped: its slopes decrease strictly and are > 0.
// Each hull segment's efficiency dq / ds (one rounding) is written ds times to e, once
// per step of g, and counted in hist; returns the steps: k + 1 for the hull's last
// point, option k (0 when nothing is usable).  hs, hq: lim + 1 scratch.  Exact in
// int64: q <= 2**40, steps <= lim <= 2**22.
//
// The fast loop has already written (and counted) the class's first k steps: the
// increments d_t = q_t - q_t-1 of options t < k, positive and non-increasing.  Their
// points (t + 1, q_t), q_t = d_0 + ... + d_t exactly (integers < 2**53), are the hull
// of the origin and options t < k, but for its collinear points, which are kept on
// the stack here.  That changes neither the pops that follow (B on the segment AC: C
// is on or below the chord from B to a new point P exactly when it is on or below the
// chord from A to P, the two orientations differ by a factor |BC| / |AC| > 0, and then
// B is on or below AP and popped next) nor the steps written (the parts of a segment
// have its efficiency: the same ratio, correctly rounded).  So the hull goes on from
// option k, and the steps up to the last point never popped (the first `keep` points
// stand) stay as written: only the steps after it leave hist and are written again.
// Out of line: it is rare, and inlined it would crowd the fast loop's registers.
template <typename Src>
#if defined(_MSC_VER)
__declspec(noinline)
#else
__attribute__((noinline))
#endif
int64_t other_class_steps(const Src& src, size_t row, int64_t lim, int64_t k, int64_t* hs,
                          int64_t* hq, double* e, uint32_t* hist) {
  hs[0] = hq[0] = 0;
  int64_t best = 0;
  for (int64_t t = 0; t < k; ++t) {
    best += static_cast<int64_t>(e[t]);
    hs[t + 1] = t + 1;
    hq[t + 1] = best;
  }
  int64_t nh = k + 1, keep = k + 1;
  for (int64_t j = k; j < lim; ++j) {
    const int64_t q = src.value(row + static_cast<size_t>(j));
    if (q <= best) continue;
    best = q;
    const int64_t s = j + 1;
    // pop the last point b while it is on or below the chord from the one before it
    // to (s, q): slope(b, new) >= slope(before, b)
    while (nh >= 2 &&
           (q - hq[nh - 1]) * (hs[nh - 1] - hs[nh - 2]) >= (hq[nh - 1] - hq[nh - 2]) * (s - hs[nh - 1]))
      --nh;
    keep = std::min(keep, nh);
    hs[nh] = s;
    hq[nh] = q;
    ++nh;
  }
  int64_t at = hs[keep - 1];  // the steps that stand
  for (int64_t t = at; t < k; ++t) --hist[step_bucket(e[t])];
  for (int64_t t = keep; t < nh; ++t) {
    const int64_t ds = hs[t] - hs[t - 1];
    const double eff = static_cast<double>(hq[t] - hq[t - 1]) / static_cast<double>(ds);
    hist[step_bucket(eff)] += static_cast<uint32_t>(ds);
    for (int64_t j = 0; j < ds; ++j) e[at++] = eff;
  }
  return at;
}

// solve_values_unit_steps once the classes' steps are known: eff holds, class after
// class, its steps' efficiencies (strictly decreasing, > 0, each hull segment's once
// per step of g) and a 0 after them; steps_of[i]: class i's steps, S their total, hist:
// the steps per bucket (step_bucket), m = C / g >= 1: the steps of g that fit.  Writes
// out[i] = (steps class i takes) + offset (offset -1: the option index, -1 for none)
// and returns true, or returns false (refuses: a segment split by the cut, or a tie at
// it); then *thr is the cut's efficiency (the m-th largest), out[i] = (class i's steps
// above it) + offset, and sel_buf holds the *n_sel steps of thr's histogram bucket with
// their classes (all the steps equal to thr among them), by decreasing efficiency.
inline bool unit_steps_cut(const double* eff, const int64_t* steps_of, const uint32_t* hist,
                           int64_t n, size_t S, size_t m, int64_t offset, int64_t* out,
                           std::vector<CutStep>& sel_buf, double* thr_out = nullptr,
                           size_t* n_sel_out = nullptr) {
  if (S <= m) {  // everything fits
    for (int64_t i = 0; i < n; ++i) out[i] = steps_of[i] + offset;
    return true;
  }
  // The cut: the m-th largest efficiency thr must exceed the (m+1)-th, below.  The
  // bucket bc holding the m-th: fewer than m steps in the buckets above it, at
  // least m with it.  A class's steps above bc are a prefix of its run, those in
  // bc the next ones: each class takes the former, and the few latter (with their
  // class) are collected to select thr among them.
  // The scan goes four buckets at a time while all four are above bc (the sum of
  // the four buckets under the ones passed is < m - n_above), then one at a time; it
  // stops at bc >= 0, as all the S > m steps are in the histogram.
  size_t bc = kStepBuckets - 1;
  size_t n_above = 0;
  while (bc >= 3) {
    const size_t four = size_t(hist[bc]) + hist[bc - 1] + hist[bc - 2] + hist[bc - 3];
    if (n_above + four >= m) break;
    n_above += four;
    bc -= 4;
  }
  while (n_above + hist[bc] < m) n_above += hist[bc--];
  const double lo = step_bucket_low(bc), hi = step_bucket_low(bc + 1);
  CutStep* const sel = grow(sel_buf, hist[bc]);  // bc's steps
  size_t n_sel = 0;
  const double* p = eff;
  for (int64_t i = 0; i < n; ++i) {  // a class's run ends with 0 < lo
    const double* const start = p;
    const int64_t c = steps_of[i];
    if (start[0] <= lo) {  // takes nothing (an empty class included)
      out[i] = offset;
    } else if (start[c - 1] > hi) {  // takes all (c >= 1 here)
      out[i] = c + offset;
    } else {
      while (*p > hi) ++p;
      out[i] = (p - start) + offset;  // the steps above bc
      for (; *p > lo; ++p) sel[n_sel++] = CutStep{*p, i};
    }
    p = start + c + 1;
  }
  // thr is the r-th largest in bc.  Every step under bc is <= lo < thr: so the cut is
  // clean (thr above the (m+1)-th largest) unless bc's (r+1)-th equals thr.  Sorted
  // (decreasing), bc's steps above thr come first, then those equal to it.
  const size_t r = m - n_above;  // 1 <= r <= n_sel
  std::sort(sel, sel + n_sel, [](const CutStep& a, const CutStep& b) { return a.e > b.e; });
  const double thr = sel[r - 1].e;
  const bool clean = r == n_sel || sel[r].e < thr;
  size_t taken = r;  // the steps >= thr when clean, else those > thr
  if (!clean)
    while (taken > 0 && sel[taken - 1].e == thr) --taken;
  for (size_t j = 0; j < taken; ++j) ++out[sel[j].cls];
  if (!clean) {
    if (thr_out != nullptr) *thr_out = thr;
    if (n_sel_out != nullptr) *n_sel_out = n_sel;
  }
  return clean;
}

// Scratch of unit_steps_split.
struct SplitScratch {
  std::vector<double> prev_e, next_e;
  std::vector<int64_t> prev_len, next_len, core, q, w, choice;
  std::vector<char> used;
};

// The step shortcut when the cut splits one class's hull segment: unit_steps_cut's
// usual refusal (its outputs: lam = thr, out[i] = (class i's steps above lam) +
// offset, sel: the steps of lam's bucket with their classes).  Answers as
// the solver would, through a Lagrangian reduction at lam and the solver on the few
// classes left; returns false (out unspecified) when the refusal is another (steps
// equal to lam in two classes), or the reduction leaves too many classes.
//
// Weights in steps of g: option k weighs k + 1, capacity m = C / g.  Let s be the one
// class with steps equal to lam: its segment of ds such steps, from hull point A (its
// steps above lam) to B, is split: the LP takes r of them (1 <= r < ds) after every
// class's steps above lam.  Any other class i has no step equal to lam (as doubles;
// rounding is monotone, so exactly neither), so its point x*_i after its t_i steps
// above lam is a hull point, and with rc_ik = q_ik - lam * (k + 1):
//   value(x) = UB - sum_i gap_i(x_i) - lam * (m - w(x)),  UB = sum_i max_k rc_ik + lam * m,
// gap_i(k) = max rc_i - rc_ik >= 0 (x*_i, and A and B of s, are maximisers).  By the
// concavity of the hull, an option of class i weighing w < w* = t_i has gap >=
// (e_prev_i - lam) * (w* - w) >= e_prev_i - lam (e_prev_i: its last step above lam; "none"
// is w = 0), and one weighing w > w* has gap >= lam - e_next_i (e_next_i: its next step,
// < lam; without one, 0 when heavier usable options exist, q <= the hull's last, and
// -inf when none does: lims[i], the class's usable options, from the stream).
// Two incumbents: s at A with whole next segments of other classes filled into the r
// steps left (greedily), and s at B with whole last segments of other classes dropped
// (the cheapest first) to free ds - r steps; each value is UB minus its gaps and unused
// room, so UB - LB = delta is known without UB.  Every solution of value >= LB (every
// optimum, tied ones included) has sum of gaps <= delta: a class whose every
// alternative has gap > delta (up to a margin for the rounding of lam and the steps,
// far above it) takes x*_i in all of them.  So the optima are these fixed choices with
// the optima of the other classes (the core, s included, in their order) within the
// capacity left; and the solver's tie rule (value, then weight, then the classes in
// order by their options' rank) picks among the latter exactly as among the former.
// The core is solved by solve() over the quantised values (the instance's grid:
// `scale`) that row(i, &top) gives for class i (its values from option 0, top of
// them; options k < min(top, m) are usable).
template <typename RowFn>
inline bool unit_steps_split(const double* eff, const int64_t* steps_of, const int64_t* lims,
                             int64_t n, int64_t K, int64_t m, int64_t g, int64_t C, double lam,
                             const CutStep* sel, size_t n_sel, double scale, int64_t offset,
                             int64_t* out, const RowFn& row, SplitScratch& sc) {
  constexpr size_t kMaxCore = 64;  // more: leave it to the solver
  constexpr int kRounds = 8;       // segments filled into / dropped for an incumbent
  int64_t split = -1, ds = 0;      // the class at lam, its steps at lam
  for (size_t j = 0; j < n_sel; ++j)
    if (sel[j].e == lam) {
      if (split >= 0 && sel[j].cls != split) return false;  // a tie across classes
      split = sel[j].cls;
      ++ds;
    }
  const size_t nn = static_cast<size_t>(n);
  double* const prev_e = grow(sc.prev_e, nn);
  double* const next_e = grow(sc.next_e, nn);
  int64_t* const prev_len = grow(sc.prev_len, nn);
  int64_t* const next_len = grow(sc.next_len, nn);
  // each class's neighbours of x*: its last step above lam and next step (with the
  // lengths of their segments: equal steps)
  int64_t taken = 0;
  const double* p = eff;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = steps_of[i], t = out[i] - offset;
    taken += t;
    prev_len[i] = next_len[i] = 0;
    prev_e[i] = 0.0;
    // no heavier usable option: no gap upwards; only dominated ones: a gap >= lam
    next_e[i] = t < lims[i] ? 0.0 : -std::numeric_limits<double>::infinity();
    if (t >= 1) {
      int64_t j = t - 1;
      while (j > 0 && p[j - 1] == p[t - 1]) --j;
      prev_e[i] = p[t - 1];
      prev_len[i] = t - j;
    }
    if (t < c) {
      int64_t j = t;
      while (j < c && p[j] == p[t]) ++j;
      next_e[i] = p[t];
      next_len[i] = j - t;
    }
    p += c + 1;
  }
  const int64_t r = m - taken;
  if (split < 0 || !(r >= 1 && r < ds)) return false;  // (not a split segment)
  char* const used = grow(sc.used, nn);
  std::fill(used, used + nn, 0);
  // incumbent A: s at A, whole next segments filled in, best first
  double loss_a = 0.0, mag = lam * static_cast<double>(ds + r + 1);
  int64_t room = r;
  for (int round = 0; round < kRounds; ++round) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i)
      if (i != split && !used[i] && next_len[i] > 0 && next_len[i] <= room &&
          (best < 0 || next_e[i] > next_e[best]))
        best = i;
    if (best < 0) break;
    used[best] = 1;
    room -= next_len[best];
    loss_a += (lam - next_e[best]) * static_cast<double>(next_len[best]);
    mag += next_e[best] * static_cast<double>(next_len[best]);
  }
  const double delta_a = loss_a + lam * static_cast<double>(room);
  // incumbent B: s at B, whole last segments dropped, cheapest (lowest step) first
  std::fill(used, used + nn, 0);
  double loss_b = 0.0;
  int64_t freed = 0;
  const int64_t need = ds - r;
  for (int round = 0; round < kRounds && freed < need; ++round) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i)
      if (i != split && !used[i] && prev_len[i] > 0 && (best < 0 || prev_e[i] < prev_e[best]))
        best = i;
    if (best < 0) break;
    used[best] = 1;
    freed += prev_len[best];
    loss_b += (prev_e[best] - lam) * static_cast<double>(prev_len[best]);
    mag += prev_e[best] * static_cast<double>(prev_len[best]);
  }
  const double delta_b = freed >= need ? loss_b + lam * static_cast<double>(freed - need)
                                       : std::numeric_limits<double>::infinity();
  // a class is fixed when every alternative's gap exceeds delta + margin
  const double bound = std::min(delta_a, delta_b) + kMarginRel * mag;
  std::vector<int64_t>& core = sc.core;
  core.clear();
  int64_t fixed_steps = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = steps_of[i], t = out[i] - offset;
    const bool in_core = i == split ||
                         (c > 0 && ((t >= 1 && !(prev_e[i] - lam > bound)) ||
                                    !(lam - next_e[i] > bound)));
    if (in_core) {
      if (core.size() == kMaxCore) return false;
      core.push_back(i);
    } else {
      fixed_steps += t;
    }
  }
  // the core over the quantised values, in the capacity the fixed classes leave
  const size_t nc = core.size(), KK = static_cast<size_t>(K);
  int64_t* const q = grow(sc.q, nc * KK);
  int64_t* const w = grow(sc.w, nc * KK);
  int64_t* const choice = grow(sc.choice, nc);
  FloatSource src{nullptr};
  src.scale1 = scale;
  for (size_t j = 0; j < nc; ++j) {
    int64_t top = 0;
    src.v = row(core[j], &top);
    const int64_t lim = std::min(std::min(top, m), K);
    for (int64_t k = 0; k < K; ++k) {
      q[j * KK + static_cast<size_t>(k)] = k < lim ? src.value(static_cast<size_t>(k)) : 0;
      w[j * KK + static_cast<size_t>(k)] = (k + 1) * g;
    }
  }
  int64_t stats[N_STATS];
  if (solve_entry(QuantizedSource{q}, w, static_cast<int64_t>(nc), K, C - fixed_steps * g,
                  int64_t(1) << 26, choice, stats, 0) != STATUS_OK)
    return false;
  for (size_t j = 0; j < nc; ++j) out[core[j]] = choice[j] + offset + 1;
  return true;
}

// solve_values_unit_steps over the float values of src (kTwoSteps: src.two_steps);
// tops[i]: row i's columns to read; g_of[i]: class i's g (< 1: no option with q > 0,
// when !g_known).  Writes choice also when it refuses.
template <bool kTwoSteps>
inline bool unit_steps_impl(const FloatSource& src, int64_t n, int64_t K, int64_t C,
                            const int64_t* tops, const int64_t* g_of, bool g_known,
                            int64_t* choice) {
  Workspace& ws = workspace();
  const size_t nn = static_cast<size_t>(n);
  const size_t NK = nn * static_cast<size_t>(K);
  // per class, its steps' efficiencies and a 0 after them (the scan's sentinel)
  double* const eff = grow(ws.step_eff, NK + nn);
  int64_t* const steps_of = grow(ws.step_n, nn);
  int64_t* const hs = grow(ws.hull_s, static_cast<size_t>(K) + 1);
  int64_t* const hq = grow(ws.hull_q, static_cast<size_t>(K) + 1);
  uint32_t* const hist = grow(ws.step_hist, kStepBuckets);  // steps per bucket
  std::memset(hist, 0, kStepBuckets * sizeof(uint32_t));
  constexpr double kMagic = 4503599627370496.0;  // 2**52, as FloatSource::value
  const uint64_t kInfBits = key_of(std::numeric_limits<double>::infinity());
  const double* const v = src.v;
  const double scale1 = src.scale1, scale2 = src.scale2;
  int64_t g = 0;                    // the classes' common g (0: no usable option yet)
  int64_t g_row = 0, kcap_row = 0;  // the last class's g, and C / g_row
  double* e = eff;                  // where the next class's steps go
  const double* x = v;              // row i
  for (int64_t i = 0; i < n; ++i, x += K) {
    int64_t steps = 0;
    const int64_t top = std::min(tops[i], K);
    const int64_t gi = g_of[i];
    if (top > 0 && gi >= 1) {
      if (gi != g_row) {
        g_row = gi;
        kcap_row = C / gi;
      }
      const int64_t lim = std::min(top, kcap_row);  // options k with (k + 1) * gi <= C
      // The usual class: increments d_k = q_k - q_k-1 (q_-1 = 0) positive and
      // non-increasing for all k < lim.  Its hull passes through all its points, so
      // its steps' efficiencies are the increments.  FloatSource::value of x > 0 is
      // (s + 2**52) - 2**52 for s = x * scale: t = s + 2**52 is q + 2**52 exactly,
      // and d_k = t_k - t_k-1 (t_-1 = 2**52) exactly, for q_k, q_k-1 <= 2**40.  A
      // value x <= 0 or NaN makes some d_k <= 0 or NaN; any other class (such a
      // value, a bump, a fall) goes to other_class_steps.  The test 0 < d_k <= d_k-1
      // (and not NaN) is one unsigned comparison of bit patterns, which order doubles
      // >= +0 like their values: minus one wraps +0 to the top and leaves negatives
      // (sign bit) and NaN above any finite or infinite d_k-1.
      double t_prev = kMagic;
      uint64_t dprev = kInfBits;
      auto t_of = [&](int64_t j) {
        double sc = x[j] * scale1;
        if (kTwoSteps) sc *= scale2;
        return sc + kMagic;
      };
      int64_t k = 0;
      for (; k + 1 < lim; k += 2) {  // two at a time: no copies between iterations
        const double t0 = t_of(k), t1 = t_of(k + 1);
        const uint64_t d0 = key_of(t0 - t_prev), d1 = key_of(t1 - t0);
        if (d0 - 1 >= dprev || d1 - 1 >= d0) break;
        std::memcpy(e + k, &d0, sizeof d0);
        std::memcpy(e + k + 1, &d1, sizeof d1);
        ++hist[step_bucket_of_key(d0)];
        ++hist[step_bucket_of_key(d1)];
        t_prev = t1;
        dprev = d1;
      }
      if (k + 1 == lim) {
        const uint64_t d = key_of(t_of(k) - t_prev);
        if (d - 1 < dprev) {
          std::memcpy(e + k, &d, sizeof d);
          ++hist[step_bucket_of_key(d)];
          ++k;
        }
      }
      if (k < lim)
        k = other_class_steps(src, static_cast<size_t>(x - v), lim, k, hs, hq, e, hist);
      steps = k;
      if (gi != g && steps > 0) {
        if (g != 0) return false;  // a second g
        g = gi;
      }
    } else if (top > 0 && g_known) {
      return false;  // a broken promise (g < 1): leave it to the solver
    }
    e[steps] = 0.0;
    steps_of[i] = steps;
    e += steps + 1;
  }
  if (g == 0) {  // nothing usable
    for (int64_t i = 0; i < n; ++i) choice[i] = -1;
    return true;
  }
  const size_t S = static_cast<size_t>(e - eff) - nn;
  const size_t m = static_cast<size_t>(C / g);  // >= 1: some option fits
  return unit_steps_cut(eff, steps_of, hist, n, S, m, -1, choice, ws.step_sel);
}

}  // namespace detail

// The step shortcut.  For an instance whose option k of every class weighs
// (k + 1) * g, with one g >= 1 for all classes, returns true and writes to choice
// exactly what solve_values would, when it can prove that answer directly;
// otherwise returns false, choice unspecified (the caller runs the solver).
//
// Usable options are those with quantised value q > 0 and weight <= C, i.e.
// k < C / g; every feasible choice weighs a multiple of g, so at most m = C / g
// steps of g.  Per class take the upper hull H_i of the origin and the usable
// points (k + 1, q_ik) in units of g (other_class_steps); its segments' efficiencies
// dq / ds decrease strictly along the class and are > 0.  Write each segment ds
// times, once per step: S steps in all.
//  - S <= m: every class takes its hull's last point, its lightest most valuable
//    option, and that fits: maximal value, and any other choice of maximal value
//    has a heavier option in some class: rule (2) picks this one.
//  - S > m: let thr be the m-th largest step efficiency and below the (m+1)-th.
//    If thr > below, every class takes its steps >= thr; as no segment's steps
//    are split by a strict cut, that ends on a hull point of each class, and the
//    choice x* weighs exactly m * g.  Take lambda strictly between the exact
//    efficiencies of the taken and the other steps (rounding dq / ds is monotone,
//    so thr > below as doubles separates them exactly too), lambda > 0.  For
//    every feasible x:  value(x) = sum_i (q_i(x_i) - lambda w_i(x_i)) + lambda w(x)
//    <= sum_i max_k (q_ik - lambda w_ik) + lambda m g = value(x*), as x*_i
//    maximises q - lambda w over class i (hull slopes above lambda up to it,
//    below after it) and w(x) <= m g.  Equality needs every x_i to be a maximiser,
//    and x*_i is the only one: lambda equals no slope of H_i, so H_i(w) - lambda w
//    is strictly larger at x*_i than at any other weight, options below the hull
//    or dominated lie lower still, and no two options of a class weigh the same.
//    So x* is the unique optimum, and the solver returns it whatever its tie rule.
//    Otherwise (thr == below: a segment split by the cut or a tie at it) refuse.
// Refused too: option weights not of that form for some class with an option of
// q > 0 (checked here unless steps_g is given), two classes with usable options
// and different g, K > 2**22 or n * K >= 2**32 (see the code).
//
// v, wt: row-major n x K, as for solve_values_prechecked (every value finite or
// NaN, every weight of a non-NaN value >= 1, vmax > 0 the largest value).
// tops (optional, n): columns >= tops[i] of row i are NaN and not read.
// steps_g (optional, n): the caller's promise that wt[i * K + k] == (k + 1) *
// steps_g[i] (>= 1) for every non-NaN value of row i; wt is then not read (may be
// null).  Without it the weights are checked: each class's g is w / (k + 1) of its
// first option with q > 0, and every option with q > 0 must weigh (k + 1) * g.
// Cost: O(n + options read), about a dozen instructions per option of a usual
// (concave) class, with steps_g the weights unread; a hull per other class.  The
// cut is found without sorting: a histogram of the steps by quarter binade, made
// as they are written, gives the bucket holding the m-th, one pass over each
// class's leading steps takes those above it and collects the few in it, and an
// nth_element among these finds thr.  No allocation once the thread's workspace
// has grown (released after a call, as the solver's, when it exceeds kKeepBytes).
inline bool solve_values_unit_steps(const double* v, const int64_t* wt, int64_t n, int64_t K,
                                    int64_t C, double vmax, const int64_t* tops,
                                    const int64_t* steps_g, int64_t* choice) {
  if (n <= 0) return true;
  if (K <= 0 || C < 1) {  // nothing fits: every usable option weighs >= 1
    for (int64_t i = 0; i < n; ++i) choice[i] = -1;
    return true;
  }
  // the hull's int64 products; the histogram's 32-bit counters
  if (K > (int64_t(1) << 22) || static_cast<uint64_t>(n) * static_cast<uint64_t>(K) >= (uint64_t(1) << 32))
    return false;
  detail::FloatSource src{v};
  src.set_max(vmax);
  detail::Workspace& ws = detail::workspace();
  const size_t nn = static_cast<size_t>(n);
  if (tops == nullptr) {
    int64_t* all = detail::grow(ws.step_top, nn);
    std::fill(all, all + nn, K);
    tops = all;
  }
  const int64_t* g_of = steps_g;
  if (g_of == nullptr) {
    int64_t* gs = detail::grow(ws.step_g, nn);
    for (int64_t i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(i) * static_cast<size_t>(K);
      const int64_t top = std::min(tops[i], K);
      int64_t gi = 0;
      for (int64_t k = 0; k < top; ++k) {
        if (src.value(row + static_cast<size_t>(k)) <= 0) continue;
        const int64_t w = wt[row + static_cast<size_t>(k)];
        if (w % (k + 1) != 0 || (gi != 0 && w / (k + 1) != gi)) return false;
        gi = w / (k + 1);
      }
      gs[i] = gi;
    }
    g_of = gs;
  }
  const bool ok =
      src.two_steps
          ? detail::unit_steps_impl<true>(src, n, K, C, tops, g_of, steps_g != nullptr, choice)
          : detail::unit_steps_impl<false>(src, n, K, C, tops, g_of, steps_g != nullptr, choice);
  if (nn * static_cast<size_t>(K) > detail::kKeepBytes / 32 && ws.bytes() > detail::kKeepBytes)
    ws = detail::Workspace();
  return ok;
}

// The step shortcut fed class by class: solve_values_unit_steps for a caller that
// computes the values itself, row after row (aryl's table builder), so that each value
// is quantised, checked and counted while the caller has it at hand, instead of read
// back from the table afterwards.
//
// The quantising grid depends on the instance's largest value, known only at the end:
// the stream takes a guess, the frexp exponent of the last instance's largest value
// (they seldom change between consecutive instances), and answers only when the guess
// is right.  Then each value is quantised exactly as FloatSource::value does with the
// right scale, and every class's steps and the histogram are those of unit_steps_impl
// over the same values, tops and g (the same expressions in the same order, see
// Run::push; one g for every class, so there is no refusal for the weights): so is
// the answer, through the same unit_steps_cut.  Otherwise solve() says so
// (GUESS_WRONG) and the caller runs solve_values_unit_steps on the finished table.
//
// Use, for an instance of n classes, K columns (no class has more than K options),
// capacity C and option k of every class weighing (k + 1) * g:
//   Cursor cur = stream.begin(n, K, C, g);  // a local object: its fields stay in registers
//   if (cur.on()) for each class i in order:
//     lim = cur.begin_class(top_i);       // options k < lim are pushed (<= 0: none)
//     Run run = cur.run();
//     for k = 0, 1, ... < lim while run.push(x_ik) ...   (x_ik: option k's value)
//     cur.end_class(run, x_i, lim);       // x_i: the class's values (read only when
//                                         // one broke the pattern of the usual class)
//   stream.finish(cur, vmax);             // vmax > 0: the instance's largest value
//   stream.solve(C, out, offset, row);    // solve_values's choice + offset + 1
// top_i is solve_values_unit_steps's tops[i] (values of columns >= top_i are not
// read) and g every steps_g[i].  Without cur.on() (no guess yet, nothing fits, g <
// 1, beyond the kernel's limits) nothing is pushed and solve() says GUESS_WRONG.
class UnitStepStream {
 public:
  enum Result : int { ANSWERED = 0, REFUSED = 1, GUESS_WRONG = 2 };
  static constexpr double kMagic = 4503599627370496.0;  // 2**52, as FloatSource::value
  static constexpr uint64_t kTopKey = uint64_t(1023 + 40) << 52;  // key_of(2**40)

  // One class's steps in the making.  push(x) quantises option k's value x (k = 0, 1,
  // ...) and keeps the class "usual" (see unit_steps_impl: the increments d_k of the
  // quantised values positive and non-increasing, t and d as there) while it can;
  // false at the first value that breaks it (push no more of the class then).  The
  // first increment is bounded by 2**40 rather than by +inf: the same test when the
  // guess is right (a quantised value is <= 2**40), and with a wrong guess every
  // increment pushed stays in [1, 2**40] (t and t_prev are integers >= 2**52), so
  // its histogram bucket is in range.
  struct Run {
    double t_prev;
    uint64_t dprev;
    int64_t k;
    double* e;
    uint32_t* hist;
    double scale;
    bool push(double x) {
      const double t = x * scale + kMagic;
      const uint64_t d = detail::key_of(t - t_prev);
      if (d - 1 >= dprev) return false;
      std::memcpy(e + k, &d, sizeof d);
      ++hist[detail::step_bucket_of_key(d)];
      t_prev = t;
      dprev = d;
      ++k;
      return true;
    }
  };

  // The stream's state during one instance.
  class Cursor {
   public:
    bool on() const { return on_; }
    // Class i's options to push: k < lim = min(top, C / g) (those that fit; none when
    // lim <= 0).
    int64_t begin_class(int64_t top) const { return std::min(top, m_); }
    Run run() const { return Run{kMagic, kTopKey, 0, e_, hist_, scale_}; }
    // After the class's pushes: x its values (options 0 .. lim - 1).
    void end_class(const Run& r, const double* x, int64_t lim) {
      int64_t steps = r.k;
      if (steps < lim) {
        // not the usual class: its hull from scratch (as unit_steps_impl), unless a
        // value is off the guessed grid (>= 2**exp, +inf; and so the guess is wrong,
        // which finish() finds: the class keeps the steps pushed, all in range)
        bool on_grid = true;  // (NaN is absent: on it)
        for (int64_t k = 0; k < lim; ++k) on_grid = on_grid && !(x[k] >= bound_);
        if (on_grid) {
          detail::FloatSource src{x};
          src.scale1 = scale_;
          steps = detail::other_class_steps(src, 0, lim, steps, hs_, hq_, e_, hist_);
        }
      }
      e_[steps] = 0.0;
      *steps_of_++ = steps;
      *lims_++ = lim;
      e_ += steps + 1;
    }

   private:
    friend class UnitStepStream;
    double* e_ = nullptr;             // where the next class's steps go
    int64_t* steps_of_ = nullptr;     // where the next class's count of steps goes
    int64_t* lims_ = nullptr;         // ... and its usable options
    uint32_t* hist_ = nullptr;
    int64_t *hs_ = nullptr, *hq_ = nullptr;  // a hull's scratch
    double scale_ = 0.0, bound_ = 0.0;  // 2**(kQuantBits - exp), 2**exp
    int64_t m_ = 0;                     // C / g: the steps of g that fit
    bool on_ = false;
  };

  // Starts an instance of n classes of at most K options, capacity C, every option k
  // weighing (k + 1) * g.
  Cursor begin(int64_t n, int64_t K, int64_t C, int64_t g) {
    Cursor cur;
    right_ = false;
    n_ = n;
    K_ = K;
    C_ = C;
    g_ = g;
    const int shift = kQuantBits - exp_;
    // off: nothing fits (C < g), no guess yet, a two-step scale (FloatSource), or
    // beyond the limits of solve_values_unit_steps (the hull's int64 products, 32-bit
    // counters)
    cur.on_ = g >= 1 && C >= g && K >= 1 && n >= 1 && exp_ != kNoGuess && shift <= 1000 &&
              K <= (int64_t(1) << 22) &&
              static_cast<uint64_t>(n) * static_cast<uint64_t>(K) < (uint64_t(1) << 32);
    if (!cur.on_) return cur;
    const size_t nn = static_cast<size_t>(n);
    cur.e_ = detail::grow(eff_, nn * static_cast<size_t>(K) + nn);
    cur.steps_of_ = detail::grow(steps_of_, nn);
    cur.lims_ = detail::grow(lims_, nn);
    cur.hs_ = detail::grow(hs_, static_cast<size_t>(K) + 1);
    cur.hq_ = detail::grow(hq_, static_cast<size_t>(K) + 1);
    cur.hist_ = detail::grow(hist_, detail::kStepBuckets);
    std::memset(cur.hist_, 0, detail::kStepBuckets * sizeof(uint32_t));
    if (scale_exp_ != exp_) {
      scale_exp_ = exp_;
      scale_ = std::ldexp(1.0, shift);
      bound_ = std::ldexp(1.0, exp_);
    }
    cur.scale_ = scale_;
    cur.bound_ = bound_;
    cur.m_ = C / g;
    return cur;
  }
  // After the last class: vmax > 0, the instance's largest value.  Checks the guess,
  // and takes vmax's exponent as the next instance's guess.
  void finish(const Cursor& cur, double vmax) {
    int e = 0;
    std::frexp(vmax, &e);
    right_ = cur.on_ && e == exp_;
    exp_ = e;
    if (!right_) return;
    n_steps_ = static_cast<size_t>(cur.e_ - eff_.data()) - static_cast<size_t>(n_);
  }
  // The answer, for capacity C (that of begin): out[i] = the option solve_values
  // would choose for class i (-1: none) + offset + 1, and ANSWERED; or REFUSED (out
  // unspecified: run the solver), or GUESS_WRONG (run solve_values_unit_steps; the
  // stream was off, or its guess wrong).
  // Answers also when the cut splits one class's hull segment (where
  // solve_values_unit_steps refuses), by unit_steps_split: row(i, &top) gives class
  // i's values (those the stream was fed, from option 0; top: their count).
  template <typename RowFn>
  Result solve(int64_t C, int64_t* out, int64_t offset, const RowFn& row) const {
    if (!right_ || C != C_) return GUESS_WRONG;
    if (n_steps_ == 0) {  // nothing usable
      for (int64_t i = 0; i < n_; ++i) out[i] = offset;
      return ANSWERED;
    }
    const int64_t m = C_ / g_;  // >= 1: some option fits
    double thr = 0.0;
    size_t n_sel = 0;
    if (detail::unit_steps_cut(eff_.data(), steps_of_.data(), hist_.data(), n_, n_steps_,
                               static_cast<size_t>(m), offset, out, sel_, &thr, &n_sel))
      return ANSWERED;
    return detail::unit_steps_split(eff_.data(), steps_of_.data(), lims_.data(), n_, K_, m, g_,
                                    C_, thr,
                                    sel_.data(), n_sel, scale_, offset, out,
                                    row, split_)
               ? ANSWERED
               : REFUSED;
  }

 private:
  static constexpr int kNoGuess = std::numeric_limits<int>::min();
  int exp_ = kNoGuess;  // the guessed frexp exponent of the largest value
  int scale_exp_ = kNoGuess;  // the exponent of scale_ and bound_ (as Cursor's)
  double scale_ = 0.0, bound_ = 0.0;
  bool right_ = false;  // the last instance's
  int64_t n_ = 0, K_ = 0, C_ = 0, g_ = 0;
  size_t n_steps_ = 0;
  std::vector<double> eff_;
  std::vector<int64_t> steps_of_, lims_, hs_, hq_;
  std::vector<uint32_t> hist_;
  mutable std::vector<detail::CutStep> sel_;  // scratch of solve()
  mutable detail::SplitScratch split_;
};

}  // namespace mckp
}  // namespace aryl
