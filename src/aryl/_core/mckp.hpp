// Exact multiple-choice knapsack (MCKP) for Aryl's elastic allocation [Aryl].
//
// Header-only C++17, no Python dependency; wrapped by _mckp.pyx.
//
// Problem: n classes (jobs), each with K options (extra-worker counts) of integer
// value q > 0 (quantised in Python, see aryl/elastic.py) and weight w >= 1 GPUs;
// options with q <= 0 are absent.  Choose at most one option per class, total
// weight <= C, maximal total value.
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
//  1. Per class drop dominated options (heavier and not more valuable; among
//     equal (w, q) keep the lowest index -- neither can be in the canonical
//     optimum).  Weights within a class are then distinct, values increasing.
//  2. Per class, the upper convex hull of (0,0) and the options; order the hull
//     segments by incremental efficiency dq/dw (weighted quickselect, not a
//     full sort).  Greedy over them gives the LP optimum: the first segment
//     that does not fit fixes the LP multiplier lambda.  Continuing the scan
//     (over the next few thousand segments) and taking every segment that
//     still fits gives a feasible incumbent of value LB.
//  3. Lagrangian bound: for every lambda >= 0 and every feasible x,
//        value(x) <= lambda*C + sum_i max(0, max_k rc_ik) - sum_i gap_i(x_i)
//     with rc = q - lambda*w and gap_i(k) = best_i - rc_ik.  So option k of
//     class i can only appear in a solution of value >= LB if
//        gap_i(k) <= UB - LB.
//     Options (and "none") failing this test *strictly* (with a floating-point
//     safety margin, see kMarginRel) are eliminated; every optimal solution,
//     including all tied ones, survives.  Classes with one alternative left are
//     fixed; the others form the core.
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
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
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
  STAT_SPARSE_BYTES = 10,  // peak bytes reserved by the sparse DP's state vectors
  N_STATS = 11
};

enum Status : int { STATUS_OK = 0, STATUS_TABLE_LIMIT = 1 };

constexpr double kMarginRel = 1e-8;

namespace detail {

constexpr int64_t kNeg = std::numeric_limits<int64_t>::min() / 4;

struct Item {
  int64_t w;
  int64_t q;
  int64_t k;  // original option index, -1 = none
};

struct Seg {
  double eff;
  int32_t cls;
  int32_t pos;  // hull index of the segment's end point (1-based; 0 = origin)
  int64_t dw;
};

struct State {
  int64_t w;
  int64_t v;
  int64_t parent;  // index of the previous stage's state
  int64_t alt;     // rank of the alternative of this stage's class
};

// Dense exact-weight DP over the core; T is the per-cell choice type.
template <typename T>
inline void dense_dp(const std::vector<std::vector<Item>>& alts, int64_t cap,
                     std::vector<int64_t>& pick) {
  const size_t m = alts.size();
  const size_t width = static_cast<size_t>(cap) + 1;
  std::vector<T> table(m * width);
  std::vector<int64_t> f(width, kNeg), g(width);
  f[0] = 0;
  for (size_t s = 0; s < m; ++s) {
    std::fill(g.begin(), g.end(), kNeg);
    T* ch = table.data() + s * width;
    std::fill(ch, ch + width, T(0));
    const std::vector<Item>& a = alts[s];
    for (size_t r = 0; r < a.size(); ++r) {  // rank order: strict '>' keeps the best rank
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
  pick.assign(m, 0);
  for (size_t s = m; s-- > 0;) {
    const T r = table[s * width + c];
    pick[s] = static_cast<int64_t>(r);
    c -= static_cast<size_t>(alts[s][r].w);
  }
}

}  // namespace detail

// Solve one instance.  q, w: row-major n x K.  choice: n outputs (-1 = none).
// stats: N_STATS outputs.  dp_mode (for tests): 0 automatic, 1 sparse only (state
// list limited by max_table_bytes alone), 2 dense only.  Returns STATUS_OK or
// STATUS_TABLE_LIMIT.
inline int solve(const int64_t* q, const int64_t* wt, int64_t n, int64_t K, int64_t C,
                 int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode = 0) {
  using namespace detail;
  for (int64_t i = 0; i < n; ++i) choice[i] = -1;
  for (int s = 0; s < N_STATS; ++s) stats[s] = 0;

  // 1. usable, undominated options per class, sorted by weight (values increase)
  std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
  std::vector<Item> items;
  items.reserve(static_cast<size_t>(n * K));
  std::vector<Item> tmp;
  tmp.reserve(static_cast<size_t>(K));
  int64_t sum_maxw = 0;  // saturates above C
  int64_t n_classes = 0;
  for (int64_t i = 0; i < n; ++i) {
    tmp.clear();
    const int64_t* qi = q + i * K;
    const int64_t* wi = wt + i * K;
    for (int64_t k = 0; k < K; ++k)
      if (qi[k] > 0 && wi[k] <= C) tmp.push_back({wi[k], qi[k], k});
    auto by_w = [](const Item& a, const Item& b) {
      if (a.w != b.w) return a.w < b.w;
      if (a.q != b.q) return a.q > b.q;
      return a.k < b.k;
    };
    if (!std::is_sorted(tmp.begin(), tmp.end(), by_w)) std::sort(tmp.begin(), tmp.end(), by_w);
    int64_t best = 0;
    for (const Item& it : tmp)
      if (it.q > best) {
        items.push_back(it);
        best = it.q;
      }
    off[i + 1] = static_cast<int64_t>(items.size());
    if (off[i + 1] > off[i]) {
      ++n_classes;
      if (sum_maxw <= C) sum_maxw += items.back().w;
    }
  }
  stats[STAT_N_CLASSES] = n_classes;
  if (n_classes == 0) return STATUS_OK;

  if (sum_maxw <= C) {  // everything fits: each class takes its most valuable option
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i)
      if (off[i + 1] > off[i]) {
        choice[i] = items[off[i + 1] - 1].k;
        total += items[off[i + 1] - 1].q;
      }
    stats[STAT_N_FIXED] = n_classes;
    stats[STAT_LB] = stats[STAT_UB] = stats[STAT_OPT] = total;
    return STATUS_OK;
  }

  // 2. upper hulls and their segments; LP greedy and incumbent
  std::vector<int64_t> hull;  // item indices; hoff per class
  std::vector<int64_t> hoff(static_cast<size_t>(n) + 1, 0);
  std::vector<Seg> segs;
  hull.reserve(items.size());
  segs.reserve(items.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t base = hull.size();
    for (int64_t j = off[i]; j < off[i + 1]; ++j) {
      const Item& p = items[j];
      while (hull.size() > base) {
        const Item& b = items[hull.back()];
        double aw = 0.0, aq = 0.0;
        if (hull.size() > base + 1) {
          aw = static_cast<double>(items[hull[hull.size() - 2]].w);
          aq = static_cast<double>(items[hull[hull.size() - 2]].q);
        }
        // pop b when strictly below the chord from the previous hull point to p
        const double lhs = (static_cast<double>(b.q) - aq) * (static_cast<double>(p.w - b.w));
        const double rhs = (static_cast<double>(p.q - b.q)) * (static_cast<double>(b.w) - aw);
        if (lhs < rhs)
          hull.pop_back();
        else
          break;
      }
      hull.push_back(j);
    }
    hoff[i + 1] = static_cast<int64_t>(hull.size());
    int64_t pw = 0, pq = 0;
    for (int64_t h = hoff[i]; h < hoff[i + 1]; ++h) {
      const Item& p = items[hull[h]];
      const int64_t dw = p.w - pw;
      segs.push_back({static_cast<double>(p.q - pq) / static_cast<double>(dw),
                      static_cast<int32_t>(i), static_cast<int32_t>(h - hoff[i] + 1), dw});
      pw = p.w;
      pq = p.q;
    }
  }
  // Weighted quickselect for the LP break instead of a full sort: O(N) expected.
  // Within a class efficiencies do not increase and equal ones (collinear hull
  // points, kept for a finer incumbent) are ordered by position, so any order by
  // (efficiency, position) takes a prefix of every class's segments; ties across
  // classes may fall either way (this only affects the incumbent, not the result).
  auto by_eff = [](const Seg& a, const Seg& b) {
    return a.eff > b.eff || (a.eff == b.eff && a.pos < b.pos);
  };
  const size_t n_segs = segs.size();
  size_t lo = 0, hi = n_segs;
  int64_t room = C;  // [0, lo) is taken and fits
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(segs.begin() + lo, segs.begin() + mid, segs.begin() + hi, by_eff);
    int64_t sum = 0;
    for (size_t t = lo; t < mid; ++t) sum += segs[t].dw;
    if (sum <= room) {
      room -= sum;
      lo = mid;
    } else {
      hi = mid;  // the break lies in [lo, mid)
    }
  }
  std::sort(segs.begin() + lo, segs.begin() + hi, by_eff);
  size_t s = lo;
  for (; s < hi && segs[s].dw <= room; ++s) room -= segs[s].dw;
  std::vector<int32_t> hpos(static_cast<size_t>(n), 0);
  for (size_t t = 0; t < s; ++t) hpos[segs[t].cls] = std::max(hpos[segs[t].cls], segs[t].pos);
  int64_t used = C - room;
  double lambda = 0.0;
  if (s < n_segs) {
    lambda = segs[s].eff;  // s < hi here: with hi < n_segs the prefix [lo, hi) overflowed
    // incumbent: keep scanning (the next kFill segments by efficiency), taking what fits
    constexpr size_t kFill = 4096;
    const size_t end = std::min(n_segs, s + 1 + kFill);
    if (end > hi) {
      std::nth_element(segs.begin() + hi, segs.begin() + (end - 1), segs.end(), by_eff);
      std::sort(segs.begin() + hi, segs.begin() + end, by_eff);
    }
    for (size_t t = s + 1; t < end && used < C; ++t) {
      const Seg& g = segs[t];
      if (hpos[g.cls] == g.pos - 1 && used + g.dw <= C) {
        used += g.dw;
        hpos[g.cls] = g.pos;
      }
    }
  }
  int64_t lb = 0;
  std::vector<int64_t> inc(static_cast<size_t>(n), -1);  // incumbent item index per class
  for (int64_t i = 0; i < n; ++i)
    if (hpos[i] > 0) {
      inc[i] = hull[hoff[i] + hpos[i] - 1];
      lb += items[inc[i]].q;
    }

  // 3. Lagrangian bound at lambda
  std::vector<double> best_rc(static_cast<size_t>(n), 0.0);
  double sum_best = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double b = 0.0;
    for (int64_t j = off[i]; j < off[i + 1]; ++j)
      b = std::max(b, static_cast<double>(items[j].q) - lambda * static_cast<double>(items[j].w));
    best_rc[i] = b;
    sum_best += b;
  }
  const double ub = lambda * static_cast<double>(C) + sum_best;
  const double margin = 1.0 + kMarginRel * (lambda * static_cast<double>(C) + sum_best +
                                            static_cast<double>(lb));
  stats[STAT_LB] = lb;
  stats[STAT_UB] = static_cast<int64_t>(ub);

  // 4. reduction: keep alternatives with best_rc - rc <= gap + margin
  std::vector<int64_t> core;               // class ids, descending
  std::vector<std::vector<Item>> alts;     // per core class, in rank order
  int64_t fixed_w = 0, fixed_q = 0, n_fixed = 0, core_alts = 0;
  auto reduce = [&](double thr) {
    core.clear();
    alts.clear();
    fixed_w = fixed_q = n_fixed = core_alts = 0;
    std::vector<Item> keep;
    for (int64_t i = n - 1; i >= 0; --i) {
      if (off[i + 1] == off[i]) continue;
      keep.clear();
      for (int64_t j = off[i + 1] - 1; j >= off[i]; --j) {  // heavier first = rank order
        const double rc =
            static_cast<double>(items[j].q) - lambda * static_cast<double>(items[j].w);
        if (best_rc[i] - rc <= thr) keep.push_back(items[j]);
      }
      if (best_rc[i] <= thr) keep.push_back({0, 0, -1});  // "none" last
      if (keep.size() == 1) {
        choice[i] = keep[0].k;
        fixed_w += keep[0].w;
        fixed_q += keep[0].q;
        ++n_fixed;
      } else {
        core.push_back(i);
        alts.push_back(keep);
        core_alts += static_cast<int64_t>(keep.size());
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
  stats[STAT_N_CORE_ALTS] = core_alts;
  if (m == 0) {
    stats[STAT_OPT] = fixed_q;
    return STATUS_OK;
  }
  int64_t cap = C - fixed_w;
  {
    int64_t sum_core_maxw = 0;
    for (const auto& a : alts) {
      sum_core_maxw += a.front().w;
      if (sum_core_maxw >= cap) break;
    }
    cap = std::min(cap, sum_core_maxw);
  }
  const double lb_core = static_cast<double>(lb - fixed_q) - margin;
  std::vector<double> rem(static_cast<size_t>(m) + 1, 0.0);  // best rc of later stages
  for (int64_t t = m - 1; t >= 0; --t) rem[t] = rem[t + 1] + best_rc[core[t]];

  // 5a. sparse DP with bounds
  std::vector<int64_t> pick;
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
    std::vector<State> all;
    std::vector<State> cand;
    std::vector<size_t> runs, merged;  // run boundaries in cand
    all.push_back({0, 0, -1, -1});
    size_t lo = 0, hi = 1;
    for (int64_t t = 0; t < m && sparse_ok; ++t) {
      const std::vector<Item>& a = alts[t];
      const double rb = rem[t + 1];
      cand.clear();
      runs.assign(1, 0);
      // The stored states and this stage's candidates each stay within the budget,
      // checked per push: one stage can multiply the states by its alternatives.
      const size_t room = static_cast<size_t>(budget);
      for (size_t r = 0; r < a.size() && sparse_ok; ++r) {
        const int64_t aw = a[r].w, aq = a[r].q;
        for (size_t p = lo; p < hi; ++p) {
          const int64_t nw = all[p].w + aw;
          if (nw > cap) break;
          const int64_t nv = all[p].v + aq;
          if (static_cast<double>(nv) + rb + lambda * static_cast<double>(cap - nw) < lb_core)
            continue;
          if (cand.size() >= room) {
            sparse_ok = false;
            break;
          }
          cand.push_back({nw, nv, static_cast<int64_t>(p), static_cast<int64_t>(r)});
        }
        if (cand.size() > runs.back()) runs.push_back(cand.size());
      }
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
          if (all.size() >= room) {
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
    stats[STAT_SPARSE_BYTES] = static_cast<int64_t>(
        (all.capacity() + cand.capacity()) * sizeof(State) +
        (runs.capacity() + merged.capacity()) * sizeof(size_t));
    if (sparse_ok) {
      // hi > lo: the canonical optimum is never pruned; the last state has the max value
      pick.assign(static_cast<size_t>(m), 0);
      int64_t idx = static_cast<int64_t>(hi) - 1;
      stats[STAT_OPT] = fixed_q + all[idx].v;
      for (int64_t t = m - 1; t >= 0; --t) {
        pick[t] = all[idx].alt;
        idx = all[idx].parent;
      }
      stats[STAT_DP_KIND] = 1;
    }
  }

  // 5b. dense DP fallback
  if (!sparse_ok && dp_mode == 1) {
    stats[STAT_TABLE_BYTES] = static_cast<int64_t>(static_cast<double>(sizeof(State)) *
                                                   static_cast<double>(stats[STAT_N_STATES]));
    return STATUS_TABLE_LIMIT;
  }
  if (!sparse_ok) {
    size_t max_alts = 0;
    for (const auto& a : alts) max_alts = std::max(max_alts, a.size());
    const int64_t cell = max_alts <= 256 ? 1 : max_alts <= 65536 ? 2 : 4;
    const double bytes =
        dense_cells * static_cast<double>(cell) + 16.0 * static_cast<double>(width);
    stats[STAT_TABLE_BYTES] = bytes > 9e18 ? std::numeric_limits<int64_t>::max()
                                           : static_cast<int64_t>(bytes);
    if (bytes > static_cast<double>(max_table_bytes)) return STATUS_TABLE_LIMIT;
    if (cell == 1)
      dense_dp<uint8_t>(alts, cap, pick);
    else if (cell == 2)
      dense_dp<uint16_t>(alts, cap, pick);
    else
      dense_dp<uint32_t>(alts, cap, pick);
    stats[STAT_DP_KIND] = 2;
    int64_t opt = fixed_q;
    for (int64_t t = 0; t < m; ++t) opt += alts[t][pick[t]].q;
    stats[STAT_OPT] = opt;
  }
  for (int64_t t = 0; t < m; ++t) choice[core[t]] = alts[t][pick[t]].k;
  return STATUS_OK;
}

}  // namespace mckp
}  // namespace aryl
