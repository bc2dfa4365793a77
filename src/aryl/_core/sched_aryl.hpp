// The `aryl` policy family in C++: aryl, aryl-no-loan, aryl-no-elastic, elastic-greedy.
//
// A line-by-line port of src/aryl/scheduling/aryl.py (ArylPass, ArylPolicy.decide)
// and of the numpy table building of scheduling/kernels.py + aryl/elastic.py, bit for
// bit: the same floating-point operations in the same order (built with
// -ffp-contract=off, never -ffast-math), the same iteration orders (Python dicts are
// insertion-ordered; placements are vectors of (server, workers) in insertion order;
// st.below / st.elastic_running are OrderedSets) and the same tie rules (numpy
// lexsort / argmax, heapq and sorted() on (key, index) tuples).  Each function names
// the Python function it mirrors.
//
// Part 1 (namespace aryl_pass) has no state: the JCT-reduction tables, the solver
// glue (the MCKP through mckp.hpp, the marginal-gain greedy, the unconstrained
// choice), the slot caps and the extra-worker placement (keep, keep_exact,
// place_extras, fill_extras) over plain vectors.  Part 2 is the pass: ArylPass
// (phase 1 hooks over sched_simple.hpp's SjfPass, the typed placement with the
// loan gate, run() with the elastic memo and the fast path, elastic_phase,
// elastic_typed) and decide_aryl, which sched_pass.hpp calls for the four policies.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mckp.hpp"
#include "sched_place.hpp"
#include "sched_plan.hpp"
#include "sched_simple.hpp"
#include "sched_state.hpp"

namespace aryl {
namespace sched {
namespace aryl_pass {

// A server list viewed without copying (a group of bf_place's groups).
struct Span {
  const i64* b = nullptr;
  const i64* e = nullptr;
  Span() = default;
  explicit Span(const std::vector<i64>& v) : b(v.data()), e(v.data() + v.size()) {}
  const i64* begin() const { return b; }
  const i64* end() const { return e; }
  bool empty() const { return b == e; }
  size_t size() const { return static_cast<size_t>(e - b); }
  bool operator==(const Span& o) const { return b == o.b && e == o.e; }
};
using Groups = std::vector<Span>;

// placement.py best_fit over a Span (sched_place.hpp's best_fit: the server with
// the fewest free GPUs that are >= need, ties: first in the list; -1 if none),
// faster on a run of consecutive servers (as the training servers 0 ..
// n_training - 1 are).  On such a run it reads `free` directly, four servers a
// step: gap = free - need as an unsigned number is >= 2**63 exactly when free <
// need (both are small and >= 0), so the smallest gap below 2**63 is the best
// fit, and a step's smallest gap replaces the best only when smaller (ties stay
// with the first).
inline i64 best_fit_span(const std::vector<i64>& free, const Span& servers, i64 need) {
  const i64 n = static_cast<i64>(servers.size());
  if (n == 0 || servers.b[n - 1] - servers.b[0] != n - 1) return best_fit(free, servers, need);
  const i64 first = servers.b[0];
  const i64* f = free.data() + first;
  const uint64_t un = static_cast<uint64_t>(need);
  auto gap = [f, un](i64 q) { return static_cast<uint64_t>(f[q]) - un; };
  uint64_t best_gap = uint64_t(1) << 63;
  i64 best = -1;
  i64 q = 0;
  for (; q + 4 <= n; q += 4) {
    const uint64_t g0 = gap(q), g1 = gap(q + 1), g2 = gap(q + 2), g3 = gap(q + 3);
    const uint64_t m = std::min(std::min(g0, g1), std::min(g2, g3));
    if (m < best_gap) {
      best_gap = m;
      best = q + (g0 == m ? 0 : g1 == m ? 1 : g2 == m ? 2 : 3);
      if (m == 0) return first + best;
    }
  }
  for (; q < n; ++q) {
    const uint64_t gq = gap(q);
    if (gq < best_gap) {
      best_gap = gq;
      best = q;
      if (gq == 0) break;
    }
  }
  return best < 0 ? -1 : first + best;
}

// aryl._reference.mckp.MAX_TABLE_BYTES (the default of aryl.elastic.solve_mckp)
constexpr i64 kMaxTableBytes = 100000000;

// ------------------------------------------------------------------ JCT-reduction tables
// One row of a JCT-reduction table: a candidate job.
struct RowIn {
  const double* tput;  // tput[c]: the throughput on base + c workers, c = 0..min(K, extra)
  double r;            // remaining work
  i64 c_now;           // today's column: cur - base
  i64 extra;           // the job's extra workers at most
  i64 g;               // GPUs a worker
  bool add_p;          // + p: p > 0 and the row's own pause is 0 (a job starting now)
};

// Row-major n x K values (NaN = absent option) and weights, as the numpy arrays.
struct Table {
  i64 n = 0;
  i64 K = 0;
  std::vector<double> v;
  std::vector<i64> w;
  // Set by build_table: the largest value (NaN skipped, -inf if none) and whether
  // every value is finite or NaN and every weight >= 1.  With ``checked`` and
  // vmax > 0 the solver skips its own scan of the table for them (it would find
  // the same vmax and nothing to refuse).  A table made otherwise leaves it false.
  double vmax = -std::numeric_limits<double>::infinity();
  bool checked = false;
  // Set by build_table: what each row's weights and NaN tail were written for (the
  // next build_table skips rewriting what is already there: weights c * g for the
  // same g and K, columns already NaN).  Empty (a table made otherwise): nothing.
  std::vector<i64> row_g;    // g the row's weights were written for, -1 = unknown
  std::vector<i64> row_top;  // columns >= row_top[i] already NaN (when row_g[i] >= 0)
  i64 rows_K = -1;           // the K of row_g / row_top
  // Set by build_table given a capacity: the MCKP step shortcut fed with the rows'
  // values (steps_fed), and the rows, not written to v and w yet (pending: the
  // caller's rows, read until its next build; write_pending writes them, which
  // solve_extras does whenever it needs the values).
  mckp::UnitStepStream steps;
  bool steps_fed = false;
  const RowIn* pending = nullptr;
  double pending_p = 0.0;
  std::vector<double> row_scratch;  // a fed row's values
  std::vector<double> pause_terms;  // table_rows' pause term of each column
};

// aryl.elastic._table_from_throughput over the rows, then the pause correction of
// kernels._table / extras_table_from_throughput: rows whose own pause is 0 (jobs
// starting now) get ``+ p`` where p = max(pause) > 0.  The test hooks feed it from
// arrays; ArylPass::elastic_phase straight from the state (the same rows).  Columns
// past a job's maximum are NaN whatever they would hold (NaN + p is NaN), so only
// c <= extra is computed; weights c * g.  Records the largest value and whether the
// table holds only finite or NaN values and weights >= 1 (Table::vmax,
// Table::checked).
//
// Per cell the numpy arithmetic, in its order: time_s = rem / tput (0 where rem ==
// 0), jct = time_s + p * (base + c != cur), value = jct[0] - jct[c] (+ p).  The
// product p * (target != cur) is p * 1.0 or p * 0.0: both are taken once per table
// (the same two floats); the column of today's size (c == cur - base) adds p * 0.0.
// table_rows reads the term of column c from an array, pt[c], holding p * 1.0 but
// at c_now: the float pterm[c == c_now] would give, without a comparison per cell.
//
// One cell: jct[0] - jct[c] (+ p), from j0 = jct[0], time_c = time_s of column c and
// pt = its pause term.
inline double table_cell(double j0, double time_c, double pt, bool add_p, double p) {
  double x = j0 - (time_c + pt);
  if (add_p) x += p;
  return x;
}

// build_table's loop over the rows: writes them to the table (!kFeed: the values,
// their weights and NaN tails, keeping what the last build of the same K wrote and
// is still right), or feeds them to the step shortcut through `cur` (kFeed: row i's
// options c = 1..min(K, extra) weigh c * g, its top is what a written table's
// row_top[i] would hold), each row's values in row_scratch only (every row's g is
// the stream's: build_table sees to it).
template <bool kFeed>
inline void table_rows(Table& out, const RowIn* rows, size_t n, i64 K, double p,
                       mckp::UnitStepStream::Cursor& cur_io) {
  using Stream = mckp::UnitStepStream;
  double* const v = kFeed ? mckp::detail::grow(out.row_scratch, static_cast<size_t>(K))
                          : out.v.data();
  i64* const w = out.w.data();
  i64* const row_g = out.row_g.data();
  i64* const row_top = out.row_top.data();
  // The pause term of each column c = 0..K of row i: pt[c] = p * 1.0 (p * (target !=
  // cur): differs), but pt[c_now] = p * 0.0 (the same size).  pt = terms + (K + 1) -
  // now, over terms[0 .. 2K + 1] = p * 1.0 but terms[K + 1] = p * 0.0: pt[c] is
  // terms[K + 1] exactly when c == now, and now = c_now, or K + 1 for a c_now outside
  // 0..K (no column is then: pt[c] = terms[c]).  No rows: none (K may be huge then).
  const double pt_differs = p * 1.0, pt_same = p * 0.0;
  const size_t now_none = static_cast<size_t>(K) + 1;
  const size_t n_terms = n > 0 ? 2 * now_none : 0;
  double* const terms = mckp::detail::grow(out.pause_terms, n_terms);
  std::fill(terms, terms + n_terms, pt_differs);
  if (n > 0) terms[now_none] = pt_same;
  double hi = -kInf, lo = kInf;  // the extremes (NaN compares false: skipped, as the
                                 // solver's own scan skips it; the order of the values
                                 // does not matter: of equal ones only zeros differ)
  bool weights_ok = true;        // every row with an option weighs >= 1 GPU a worker
  Stream::Cursor cur = cur_io;   // (a local object: its fields stay in registers)
  for (size_t i = 0; i < n; ++i) {
    const RowIn& in = rows[i];
    const i64 g = in.g, c_now = in.c_now;
    const i64 top = std::min(K, in.extra);
    if (!kFeed && g < 1 && top >= 1) weights_ok = false;  // (fed: g >= 1, see begin)
    double* const vrow = kFeed ? v : v + i * static_cast<size_t>(K);
    if (!kFeed) {
      const i64 had_g = row_g[i], had_top = row_top[i];
      row_g[i] = top >= 0 ? g : -1;
      row_top[i] = top;
      if (had_g == g && top >= 0) {
        // kept: its weights are there, and NaN past its last top
        for (i64 c = top + 1; c <= std::min(K, had_top); ++c) vrow[c - 1] = kNaN;
      } else {
        i64* const wrow = w + i * static_cast<size_t>(K);
        for (i64 c = 1; c <= K; ++c) wrow[c - 1] = c * g;
        for (i64 c = std::max<i64>(top, 0) + 1; c <= K; ++c) vrow[c - 1] = kNaN;
      }
    }
    // the stream takes options c = 1..lim (lim <= top)
    const i64 lim = kFeed ? cur.begin_class(top) : 0;
    Stream::Run run = cur.run();
    if (top >= 1) {
      // jct[0] - jct[c] (+ p), c = 1..top, each jct computed once
      const double* const t = in.tput;
      const double r = in.r;
      const bool add_p = in.add_p;
      const double* const pt = terms + (now_none - std::min(static_cast<size_t>(c_now), now_none));
      auto time_of = [&](i64 c) { return r == 0.0 ? 0.0 : r / t[c]; };
      const double j0 = time_of(0) + pt[0];
      auto track = [&](double x) {
        hi = x > hi ? x : hi;
        lo = x < lo ? x : lo;
      };
      auto value = [&](i64 c) {
        const double x = table_cell(j0, time_of(c), pt[c], add_p, p);
        vrow[c - 1] = x;
        return x;
      };
      i64 c = 1;
      if (kFeed && top == 1 && r != 0.0) {
        // A row of one option (most rows): the lean loop below without its loop
        // (lim = min(top, C / g) is 1: the stream is on, so C >= g).
        const double x = table_cell(j0, r / t[1], pt[1], add_p, p);
        vrow[0] = x;
        if (run.push(x)) hi = x > hi ? x : hi;
        else track(x);
        c = 2;
      } else if (kFeed && r != 0.0) {
        // A lean loop over the values pushed.  They increase strictly (their
        // quantised steps d are > 0) and are > 0: their largest is the last, and
        // they do not bear on lo (which only tells whether a value is -inf).
        // Then the values past lim (tracked only), in the same with_p instance.
        auto lean = [&](auto with_p) {
          auto cell = [&](i64 c) { return table_cell(j0, r / t[c], pt[c], with_p, p); };
          for (; c <= lim; ++c) {
            const double x = cell(c);
            vrow[c - 1] = x;
            if (!run.push(x)) {
              track(x);
              ++c;
              break;
            }
          }
          if (run.k > 0) {
            const double x = vrow[run.k - 1];
            hi = x > hi ? x : hi;
          }
          for (; c <= top; ++c) {
            const double x = cell(c);
            vrow[c - 1] = x;
            track(x);
          }
        };
        if (add_p) lean(std::true_type{});
        else lean(std::false_type{});
      } else if (kFeed) {
        for (; c <= lim; ++c) {
          const double x = value(c);
          track(x);
          if (!run.push(x)) {
            ++c;
            break;
          }
        }
      }
      for (; c <= top; ++c) track(value(c));
    }
    if (kFeed) cur.end_class(run, vrow, lim);
  }
  cur_io = cur;
  out.vmax = hi;
  out.checked = hi < kInf && lo > -kInf && weights_ok;
}

// build_table writing the rows to the table.
inline void write_rows(Table& out, const RowIn* rows, size_t n, i64 K, double p) {
  out.v.resize(n * static_cast<size_t>(K));
  out.w.resize(n * static_cast<size_t>(K));
  // a row kept from the last build (same K: the same place in v and w) keeps its
  // weights when its g is the same, and its NaN tail past row_top
  if (out.rows_K != K) {
    out.row_g.clear();
    out.rows_K = K;
  }
  out.row_g.resize(n, -1);
  out.row_top.resize(n, 0);
  mckp::UnitStepStream::Cursor none;
  table_rows<false>(out, rows, n, K, p, none);
}

// The table of n rows (K columns, pause p).  Given a capacity (>= 0), feeds the MCKP
// step shortcut (Table::steps) with the rows' values instead of writing them (when
// it can guess the instance's grid and every row has the same g; else it writes
// them): solve_extras asks the shortcut first, and writes the rows when it needs the
// values.  same_g: the caller knows that every row has the same g.
inline void build_table(Table& out, const RowIn* rows, size_t n, i64 K, double p,
                        i64 capacity = -1, bool same_g = false) {
  out.n = static_cast<i64>(n);
  out.K = K;
  out.steps_fed = false;
  out.pending = nullptr;
  if (capacity < 0) {
    write_rows(out, rows, n, K, p);
    return;
  }
  const i64 g = n > 0 ? rows[0].g : 0;
  mckp::UnitStepStream::Cursor cur = out.steps.begin(static_cast<i64>(n), K, capacity, g);
  // (the stream takes one g for all rows)
  if (cur.on() && !same_g) {
    same_g = true;
    for (size_t i = 1; i < n && same_g; ++i) same_g = rows[i].g == g;
  }
  if (cur.on() && same_g) {
    table_rows<true>(out, rows, n, K, p, cur);
    out.pending = rows;
    out.pending_p = p;
  } else {
    write_rows(out, rows, n, K, p);
    cur = mckp::UnitStepStream::Cursor();  // (not fed)
  }
  out.steps_fed = true;
  // (the stream learns the grid from every instance, fed or not)
  if (out.checked && out.vmax > 0.0) out.steps.finish(cur, out.vmax);
}

// The values and weights of the rows build_table fed to the step shortcut (the
// same vmax and checked).
inline void write_pending(Table& t) {
  if (t.pending == nullptr) return;
  const RowIn* rows = t.pending;
  t.pending = nullptr;
  write_rows(t, rows, static_cast<size_t>(t.n), t.K, t.pending_p);
}

// Row i's values (columns c = 1..*top) of a table that build_table fed to the step
// shortcut: from v when written, else computed into row_scratch as build_table
// computes them (table_cell).
inline const double* fed_row(Table& t, i64 i, i64* top) {
  const auto iu = static_cast<size_t>(i);
  if (t.pending == nullptr) {
    *top = t.row_top[iu];
    return t.v.data() + iu * static_cast<size_t>(t.K);
  }
  const RowIn& in = t.pending[iu];
  double* const x = mckp::detail::grow(t.row_scratch, static_cast<size_t>(t.K));
  *top = std::min(t.K, in.extra);
  if (*top < 1) return x;
  const double p = t.pending_p;
  const double pterm[2] = {p * 1.0, p * 0.0};
  auto time_of = [&](i64 c) { return in.r == 0.0 ? 0.0 : in.r / in.tput[c]; };
  const double j0 = time_of(0) + pterm[in.c_now == 0];
  for (i64 c = 1; c <= *top; ++c)
    x[c - 1] = table_cell(j0, time_of(c), pterm[c == in.c_now], in.add_p, p);
  return x;
}

// float(pause.max()) if pause.size else 0.0 (kernels._table's scalar pause)
inline double max_pause(const std::vector<double>& pause) {
  if (pause.empty()) return 0.0;
  double p = pause[0];
  for (size_t i = 1; i < pause.size(); ++i)
    if (pause[i] > p) p = pause[i];
  return p;
}

// aryl.elastic._table_from_throughput on a throughput table (row stride K + 1);
// capacity: as build_table's.
inline void table_from_throughput(const std::vector<double>& rem, const std::vector<i64>& cur,
                                  const std::vector<i64>& base,
                                  const std::vector<i64>& extra, const std::vector<i64>& g,
                                  const std::vector<double>& tput, const std::vector<double>& pause,
                                  i64 K, Table& out, std::vector<RowIn>& rows,
                                  i64 capacity = -1) {
  const size_t n = rem.size();
  const size_t stride = static_cast<size_t>(K) + 1;
  const double p = max_pause(pause);
  rows.resize(n);
  for (size_t i = 0; i < n; ++i)
    rows[i] = {tput.data() + i * stride, rem[i], cur[i] - base[i], extra[i], g[i],
               p > 0 && pause[i] == 0};
  build_table(out, rows.data(), n, K, p, capacity);
}

// kernels.extras_table / kernels._table (homogeneous speeds): aryl.elastic.throughput
// ``w / (1.0 + alpha * (w - 1.0))`` of base + c workers, K = max(mx - base).
inline void extras_table(const std::vector<double>& rem, const std::vector<i64>& cur,
                         const std::vector<i64>& base, const std::vector<i64>& mx,
                         const std::vector<i64>& g, const std::vector<double>& alpha,
                         const std::vector<double>& pause, Table& out,
                         std::vector<i64>& extra) {
  const size_t n = rem.size();
  extra.resize(n);
  i64 K = 0;
  for (size_t i = 0; i < n; ++i) {
    extra[i] = mx[i] - base[i];
    if (i == 0 || extra[i] > K) K = extra[i];
  }
  const double p = max_pause(pause);
  // the throughputs read: c = 0..min(K, extra), row stride K + 1
  const size_t stride = static_cast<size_t>(std::max<i64>(K, 0)) + 1;
  std::vector<double> tput(n * stride);
  std::vector<RowIn> rows(n);
  for (size_t i = 0; i < n; ++i) {
    double* t = tput.data() + i * stride;
    for (i64 c = 0; c <= std::min(K, extra[i]); ++c)
      t[c] = elastic_throughput(base[i] + c, alpha[i]);
    rows[i] = {t, rem[i], cur[i] - base[i], extra[i], g[i], p > 0 && pause[i] == 0};
  }
  build_table(out, rows.data(), n, K, p);
}

// kernels.extras_table_from_throughput: ``tput`` (n x (K + 1), NaN past a job's maximum)
// is read with NaN -> 1.0 (those columns are cut anyway).  rows: the table's rows
// (read by the table until its next build); capacity: as build_table's.
inline void extras_table_from_throughput(const std::vector<double>& rem,
                                         const std::vector<i64>& cur,
                                         const std::vector<i64>& base,
                                         const std::vector<i64>& mx,
                                         const std::vector<i64>& g, std::vector<double>& tput,
                                         i64 K, const std::vector<double>& pause, Table& out,
                                         std::vector<i64>& extra, std::vector<RowIn>& rows,
                                         i64 capacity = -1) {
  const size_t n = rem.size();
  extra.resize(n);
  for (size_t i = 0; i < n; ++i) extra[i] = mx[i] - base[i];
  for (double& x : tput)
    if (std::isnan(x)) x = 1.0;
  table_from_throughput(rem, cur, base, extra, g, tput, pause, K, out, rows, capacity);
}

// ------------------------------------------------------------------ solvers
// kernels._greedy: marginal JCT reduction per GPU, one worker at a time (heapq on
// (-gain / g, i) tuples: ties to the lower position), until no positive gain fits.
inline void greedy(const std::vector<double>& values, const std::vector<i64>& weights,
                   i64 n, i64 K, i64 capacity, std::vector<i64>& ext) {
  ext.assign(static_cast<size_t>(n), 0);
  using Entry = std::pair<double, i64>;
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      // priority_queue pops the "largest": make that the smallest tuple
      return a.first != b.first ? a.first > b.first : a.second > b.second;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> heap;
  const double ninf = -std::numeric_limits<double>::infinity();
  auto val = [&](i64 i, i64 c) {
    const double x = values[static_cast<size_t>(i * K + c)];
    return std::isnan(x) ? ninf : x;
  };
  auto gw = [&](i64 i) -> i64 { return K > 0 ? weights[static_cast<size_t>(i * K)] : 1; };
  for (i64 i = 0; i < n; ++i)
    if (K && val(i, 0) > 0) heap.emplace(-val(i, 0) / static_cast<double>(gw(i)), i);
  i64 cap = capacity;
  while (!heap.empty()) {
    const i64 i = heap.top().second;
    heap.pop();
    const i64 gi = gw(i);
    if (gi > cap) continue;
    cap -= gi;
    const i64 k = ++ext[static_cast<size_t>(i)];
    if (k < K && std::isfinite(val(i, k))) {
      const double gain = val(i, k) - val(i, k - 1);
      if (gain > 0) heap.emplace(-gain / static_cast<double>(gi), i);
    }
  }
}

enum class Solver { mckp, greedy };

// kernels.solve_extras: extra workers per row; false (``None``) when
// ``unconstrained_only`` and the rows' own best options do not fit together.
// ``caps`` (optional, n): options above it are cut (NaN).  ``cut`` is scratch.
// Writes the rows build_table left pending whenever it needs the values, and when
// given caps (the repair rounds of ArylPass::elastic_phase pass them, and
// fill_extras reads the values after them).
inline bool solve_extras(Table& t, i64 capacity, Solver solver, bool unconstrained_only,
                         const std::vector<i64>* caps, std::vector<i64>& out,
                         std::vector<double>& cut) {
  const i64 n = t.n, K = t.K;
  // zeros (as the paths below the step shortcut expect), but when the shortcut answers:
  // then it has written every row's answer
  out.resize(static_cast<size_t>(n));
  if (n == 0) return true;
  bool cuts = false;  // a cap below K
  if (caps != nullptr && K)
    for (i64 i = 0; i < n && !cuts; ++i)
      if ((*caps)[static_cast<size_t>(i)] < K) cuts = true;
  // The step shortcut fed by build_table (over the table's own values: nothing cut)
  // answers most instances exactly as the solver would (the MCKP branch below),
  // writing the extra workers (the option + 1) directly, without the table written
  // when the chosen values' total needs no check (see check_total below).
  using Stream = mckp::UnitStepStream;
  Stream::Result streamed = Stream::GUESS_WRONG;
  if (t.steps_fed && !cuts && !unconstrained_only && solver == Solver::mckp && K != 0 &&
      t.checked && t.vmax > 0.0) {
    auto row = [&t](i64 i, i64* top) { return fed_row(t, i, top); };
    streamed = t.steps.solve(capacity, out.data(), 0, row);
    if (streamed == Stream::GUESS_WRONG && t.pending != nullptr) {
      // fed on a wrong grid: feed the pending rows again, on the grid it has learned
      build_table(t, t.pending, static_cast<size_t>(n), K, t.pending_p, capacity);
      streamed = t.steps.solve(capacity, out.data(), 0, row);
    }
    if (streamed == Stream::ANSWERED && caps == nullptr &&
        static_cast<double>(n) * t.vmax < 1e300)
      return true;
  }
  if (streamed != Stream::ANSWERED) std::fill(out.begin(), out.end(), 0);
  write_pending(t);
  const std::vector<double>* values = &t.v;
  if (cuts) {
    cut = t.v;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (i64 i = 0; i < n; ++i) {
      const i64 c0 = std::max<i64>((*caps)[static_cast<size_t>(i)], 0);
      for (i64 c = c0; c < K; ++c) cut[static_cast<size_t>(i * K + c)] = nan;
    }
    values = &cut;
  }
  if (unconstrained_only) {
    if (K == 0) return true;
    const double ninf = -std::numeric_limits<double>::infinity();
    i64 total = 0;
    for (i64 i = 0; i < n; ++i) {
      // np.argmax over the row with NaN -> -inf: the first maximum
      const double* row = values->data() + i * K;
      i64 best = 0;
      double bv = std::isnan(row[0]) ? ninf : row[0];
      for (i64 c = 1; c < K; ++c) {
        const double x = std::isnan(row[c]) ? ninf : row[c];
        if (x > bv) {
          bv = x;
          best = c;
        }
      }
      if (bv > 0) {
        total += t.w[static_cast<size_t>(i * K + best)];
        out[static_cast<size_t>(i)] = best + 1;
      }
    }
    if (total > capacity) return false;
    return true;
  }
  if (solver == Solver::greedy) {
    greedy(*values, t.w, n, K, capacity, out);
    return true;
  }
  // aryl.elastic.solve_mckp(values, weights, capacity, backend="native", validate=False)
  if (K == 0) return true;  // _mckp.solve_values: every choice -1
  // solve_mckp's check that the chosen values' total is finite (it overflows only for
  // values near the float64 limit); out[i] + shift is row i's option.  Needless when
  // n * vmax of a checked table is far below the limit: the chosen values are
  // positive (q > 0) and <= vmax, and each partial sum is rounded up by at most a
  // factor 1 + 2**-53.
  auto check_total = [&](i64 shift) {
    if (t.checked && static_cast<double>(n) * t.vmax < 1e300) return;
    double total = 0.0;
    for (i64 i = 0; i < n; ++i) {
      const i64 c = out[static_cast<size_t>(i)] + shift;
      if (c >= 0) total += (*values)[static_cast<size_t>(i * K + c)];
    }
    if (!std::isfinite(total))
      throw InvalidInput(
          "values too large: the chosen options' total overflows float64 (scale them down)");
  };
  // the table's own values, scanned by build_table: the solver need not scan them again
  const bool prechecked = values == &t.v && t.checked && t.vmax > 0.0;
  if (streamed == Stream::ANSWERED) {
    check_total(-1);
    return true;
  }
  // The step shortcut (unless the stream refused the instance) over build_table's
  // rows (weights (k + 1) * row_g[i], NaN past row_top[i]): it answers most instances
  // as the solver would, and refuses the others.
  const bool rows = t.row_g.size() == static_cast<size_t>(n) && t.rows_K == K;
  const bool stepped =
      prechecked && streamed == Stream::GUESS_WRONG &&
      mckp::solve_values_unit_steps(values->data(), t.w.data(), n, K, capacity, t.vmax,
                                    rows ? t.row_top.data() : nullptr,
                                    rows ? t.row_g.data() : nullptr, out.data());
  i64 stats[mckp::N_STATS];
  const int status =
      stepped ? mckp::STATUS_OK :
      prechecked ? mckp::solve_values_prechecked(values->data(), t.w.data(), n, K, capacity,
                                                 t.vmax, kMaxTableBytes, out.data(), stats, 0)
                 : mckp::solve_values(values->data(), t.w.data(), n, K, capacity, kMaxTableBytes,
                                      out.data(), stats, 0);
  if (status != mckp::STATUS_OK) {  // aryl.elastic._kernel_error
    const i64 bad = stats[mckp::STAT_BAD_INDEX];
    if (status == mckp::STATUS_INF_VALUE)
      throw InvalidInput("values must be finite or NaN (absent option); found inf at values[" +
                         std::to_string(bad / K) + ", " + std::to_string(bad % K) + "]");
    if (status == mckp::STATUS_BAD_WEIGHT)
      throw InvalidInput("weights must be >= 1 GPU for every present (non-NaN) option; weights[" +
                         std::to_string(bad / K) + ", " + std::to_string(bad % K) + "]");
    throw InvalidInput("MCKP table of " + std::to_string(stats[mckp::STAT_TABLE_BYTES]) +
                       " bytes exceeds max_table_bytes=" + std::to_string(kMaxTableBytes) +
                       " (core of " + std::to_string(stats[mckp::STAT_N_CORE]) +
                       " jobs, capacity " + std::to_string(capacity) + ")");
  }
  check_total(0);
  for (auto& x : out) x += 1;  // option c (c + 1 extra workers) or -1 (none)
  return true;
}

// ArylPass.slot_caps: min(max_extra, sum_s free_s // g) per job of g > 1 GPUs per worker.
inline void slot_caps(const std::vector<i64>& free, const std::vector<i64>& g,
                      const std::vector<i64>& max_extra, std::vector<i64>& caps) {
  caps = max_extra;
  std::vector<i64> sizes(g);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (i64 gv : sizes) {
    if (gv <= 1) continue;
    i64 slots = 0;
    for (i64 f : free) slots += floordiv(f, gv);
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] == gv && slots < caps[i]) caps[i] = slots;
  }
}

// ------------------------------------------------------------------ extra placement
// Candidate-indexed data of one elastic phase (cand[i] = job index; old_at(i) = the
// job's extras now (``extras_now.get(cand[i])``), nullptr when it has none).
struct ExtrasInput {
  const std::vector<i64>* cand = nullptr;
  // the extras now: ``old[i]`` when given, else State::ex_job of cand[i] where
  // ext[i] > 0 (the pass: an elastic running job runs above its base exactly when
  // it has extras, State::track_extras; a job starting now has ext 0)
  const std::vector<const Placement*>* old = nullptr;
  const PlacementTable* ex_job = nullptr;
  const std::vector<i64>* ext = nullptr;  // cur - base (extras today: old's workers, each > 0)
  const std::vector<i64>* g = nullptr;
  i64 n_run = 0;
  const Groups* groups_extra = nullptr;
  // optional (keep_exact): free less the GPUs of every extra in ``old``.  Below 0 at a
  // server where free does not hold the extras there (phase 1 put base workers on
  // their GPUs): then ``short_pos`` lists (ascending) every position with an extra on
  // such a server (others may be listed too), and those keep as Python's keep.
  const std::vector<i64>* free_wo_extras = nullptr;
  const std::vector<i64>* short_pos = nullptr;
  // optional (keep): per server, at least the GPUs of the candidates' extras there
  // (State::ex_srv, the GPUs of every extra worker): where free holds that many, the
  // extras there all fit, whatever the order
  const std::vector<i64>* extras_bound = nullptr;

  const Placement* old_at(size_t i) const {
    if (old != nullptr) return (*old)[i];
    return (*ext)[i] > 0 ? &(*ex_job)[static_cast<size_t>((*cand)[i])] : nullptr;
  }
};

// place_extras' result: new extras per candidate position (empty = none), the
// running positions that may change, {position: workers placed} of the short jobs.
// new_extra holds at least one entry per candidate; `written` lists the entries the
// last call wrote (every other one is empty: the next call clears only those).
// A running job that keeps exactly its extras (its count unchanged, every extra where
// it is) gets no entry and is not in touched: Python gives it an entry equal to its
// extras (no resize follows) in the keep pass and none in keep_exact.
struct Placed {
  std::vector<Placement> new_extra;
  std::vector<i64> touched;
  std::vector<std::pair<i64, i64>> shorts;
  std::vector<i64> written;
};

// Scratch of place_extras (reused across calls): the positions to visit in order
// and the workers each still has to place (aligned with order).
struct PlaceScratch {
  std::vector<i64> order, want;
  std::vector<std::pair<uint64_t, i64>> keyed;  // (packed sort key, position)
  Placement got;
  // keep, per server (all 0 between calls): the GPUs of the extras wanted there, and
  // 1 where they may not all fit, 2 where they do not
  std::vector<i64> demand;
  std::vector<char> hot;
  std::vector<i64> hot_srv;  // the servers marked in hot
  // keep, per server (0 between calls): 1 where free is below the bound
  std::vector<char> maybe;
  std::vector<i64> maybe_srv;  // the servers marked in maybe
  std::vector<i64> deferred;   // keep: positions with an extra on such a server
  std::vector<i64> touched2;   // touched positions found after the first walk
  // by position: the workers still to place, and what to do in order_a order
  // (kLeft: place them; kLate: keep first; kGrow: keep every extra first)
  std::vector<i64> left;
  std::vector<char> kind;
  std::vector<char> listed;  // keep_exact: the positions of short_pos (0 between calls)
};
constexpr char kLeft = 0, kLate = 1, kGrow = 2;

// place_extras' order_a: ``positions`` sorted by worker size descending, extra GPUs
// (k * g) descending, job index ascending (numpy lexsort((ci, -(k * g), -g))).  The
// key is a strict total order (candidates are distinct jobs), so sorting a subset
// gives order_a's sequence filtered to it.  When every key fits in 64 bits
// (g < 2**7, k * g < 2**26, job < 2**31: the usual case) the positions are sorted
// by one packed integer, in the same order.
inline void sort_order_a(std::vector<i64>& positions, const std::vector<i64>& cand,
                         const std::vector<i64>& g, const std::vector<i64>& k,
                         std::vector<std::pair<uint64_t, i64>>& keyed) {
  if (positions.size() < 2) return;  // (the usual case: one job places workers)
  constexpr i64 kMaxG = (i64(1) << 7) - 1, kMaxKg = (i64(1) << 26) - 1;
  keyed.clear();
  for (i64 i : positions) {
    const auto u = static_cast<size_t>(i);
    const i64 gi = g[u], kg = k[u] * gi, j = cand[u];
    if (gi < 0 || gi > kMaxG || kg < 0 || kg > kMaxKg || j < 0 || j > INT32_MAX) {
      std::sort(positions.begin(), positions.end(), [&](i64 a, i64 b) {
        const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
        if (g[x] != g[y]) return g[x] > g[y];
        const i64 kx = k[x] * g[x], ky = k[y] * g[y];
        if (kx != ky) return kx > ky;
        return cand[x] < cand[y];
      });
      return;
    }
    const uint64_t key = (static_cast<uint64_t>(kMaxG - gi) << 57) |
                         (static_cast<uint64_t>(kMaxKg - kg) << 31) | static_cast<uint64_t>(j);
    keyed.emplace_back(key, i);
  }
  std::sort(keyed.begin(), keyed.end());
  for (size_t q = 0; q < keyed.size(); ++q) positions[q] = keyed[q].second;
}

// ArylPass.keep for one job: it keeps up to `want` of its extras `old` where they
// are (walking them backwards: loaned servers, the highest ids, first), taken from
// free; returns the workers still to place.
inline i64 keep_one(std::vector<i64>& free, const Placement& old, i64 gi, i64 want,
                    Placement& kept) {
  for (auto it = old.rbegin(); it != old.rend(); ++it) {
    const i64 s = it->first;
    i64 t = it->second;
    if (t > want) t = want;
    const i64 room = floordiv(free[static_cast<size_t>(s)], gi);
    if (t > room) t = room;
    if (t > 0) {
      kept.emplace_back(s, t);
      free[static_cast<size_t>(s)] -= t * gi;
      want -= t;
      if (!want) break;
    }
  }
  return want;
}

namespace keep_detail {
// Job i (k > 0, extras now) keeps where every extra it has finds room (Python's keep
// on servers that hold every extra there): min(k, its extras), walking them
// backwards (keep_one; all of them, a reversed copy, when k covers them).  A running
// job that keeps exactly its extras gets no entry; else `touched` gets it.
inline void keep_roomy(std::vector<i64>& free, const ExtrasInput& in, const std::vector<i64>& k,
                       size_t i, std::vector<i64>& touched, Placed& out, PlaceScratch& sc) {
  const Placement& had = *in.old_at(i);
  const i64 ki = k[i], gi = (*in.g)[i];
  i64 total = 0;
  bool positive = true;
  for (const auto& e : had) {
    total += e.second;
    positive = positive && e.second > 0;
  }
  i64 left;
  if (positive && ki >= total) {  // keep_one keeps them all
    for (const auto& e : had) free[static_cast<size_t>(e.first)] -= e.second * gi;
    if (ki == total && static_cast<i64>(i) < in.n_run) return;  // no change: no entry
    out.new_extra[i].assign(had.rbegin(), had.rend());
    left = ki - total;
  } else {
    left = keep_one(free, had, gi, ki, out.new_extra[i]);
  }
  out.written.push_back(static_cast<i64>(i));
  if (static_cast<i64>(i) < in.n_run) touched.push_back(static_cast<i64>(i));
  sc.kind[i] = kLeft;
  sc.left[i] = left;
  if (left > 0) sc.order.push_back(static_cast<i64>(i));
}

// Job i (k > 0) waits for the order_a walk: it keeps then (kLate, or kGrow) or has
// nothing to keep (kLeft).
inline void keep_later(const ExtrasInput& in, size_t i, char kind, i64 left,
                       std::vector<i64>& touched, Placed& out, PlaceScratch& sc) {
  out.written.push_back(static_cast<i64>(i));
  if (static_cast<i64>(i) < in.n_run) touched.push_back(static_cast<i64>(i));
  sc.kind[i] = kind;
  sc.left[i] = left;
  sc.order.push_back(static_cast<i64>(i));
}

// Python's keep for `positions` (ascending), jobs whose extras can compete only among
// themselves and only at the servers where maybe(s): the extras of the jobs given
// some (k > 0) are summed there; where they exceed free the server is contended, and
// a job with an extra on one keeps in order_a order (kLate); the others keep at once
// (keep_roomy).  Free at those servers must be as it came.  Touched positions go to
// sc.touched2 (ascending); sc.hot and sc.demand are left all 0.
template <typename Maybe>
inline void keep_among(std::vector<i64>& free, const ExtrasInput& in, const std::vector<i64>& k,
                       const std::vector<i64>& positions, Maybe&& maybe, Placed& out,
                       PlaceScratch& sc) {
  const std::vector<i64>& g = *in.g;
  std::vector<i64>& demand = sc.demand;
  std::vector<char>& hot = sc.hot;
  sc.hot_srv.clear();
  for (i64 ii : positions) {
    const auto i = static_cast<size_t>(ii);
    const Placement* had = k[i] > 0 ? in.old_at(i) : nullptr;
    if (had == nullptr) continue;
    for (const auto& e : *had) {
      const auto su = static_cast<size_t>(e.first);
      if (!maybe(su)) continue;
      if (!hot[su]) {
        hot[su] = 1;
        sc.hot_srv.push_back(e.first);
      }
      demand[su] += e.second * g[i];
    }
  }
  for (i64 s : sc.hot_srv) {
    const auto su = static_cast<size_t>(s);
    if (demand[su] > free[su]) hot[su] = 2;
  }
  std::vector<i64>& touched = sc.touched2;
  touched.clear();
  for (i64 ii : positions) {
    const auto i = static_cast<size_t>(ii);
    if (k[i] <= 0) {  // drops every extra it has
      if (ii < in.n_run && (*in.ext)[i] > 0) touched.push_back(ii);
      continue;
    }
    const Placement* had = in.old_at(i);
    if (had == nullptr) {
      keep_later(in, i, kLeft, k[i], touched, out, sc);
      continue;
    }
    bool late = false;
    for (const auto& e : *had)
      if (hot[static_cast<size_t>(e.first)] == 2) {
        late = true;
        break;
      }
    if (late) keep_later(in, i, kLate, k[i], touched, out, sc);
    else keep_roomy(free, in, k, i, touched, out, sc);
  }
  for (i64 s : sc.hot_srv) {
    hot[static_cast<size_t>(s)] = 0;
    demand[static_cast<size_t>(s)] = 0;
  }
}

// out.touched gets sc.touched2 merged in (both ascending)
inline void merge_touched(Placed& out, const PlaceScratch& sc) {
  const std::vector<i64>& add = sc.touched2;
  std::vector<i64>& t = out.touched;
  size_t a = t.size(), b = add.size();
  if (!b) return;
  t.resize(a + b);
  while (b) {
    if (a && t[a - 1] > add[b - 1]) t[a + b - 1] = t[a - 1], --a;
    else t[a + b - 1] = add[b - 1], --b;
  }
}

// sc.order sorted as order_a, then each keeps what it keeps in that order (kLate:
// keep_one; kGrow: every extra, walked backwards) and ``want`` gets its workers left
inline void order_and_keep(std::vector<i64>& free, const ExtrasInput& in,
                           const std::vector<i64>& k, Placed& out, PlaceScratch& sc) {
  const std::vector<i64>& g = *in.g;
  sort_order_a(sc.order, *in.cand, g, k, sc.keyed);
  for (i64 i : sc.order) {
    const auto iu = static_cast<size_t>(i);
    const char kind = sc.kind[iu];
    if (kind == kLate) {
      sc.left[iu] = keep_one(free, *in.old_at(iu), g[iu], k[iu], out.new_extra[iu]);
    } else if (kind == kGrow) {
      const Placement* had = in.old_at(iu);
      if (had != nullptr) out.new_extra[iu].assign(had->rbegin(), had->rend());
    }
    sc.want.push_back(sc.left[iu]);
  }
}

inline void size_scratch(size_t n, size_t n_srv, PlaceScratch& sc) {
  if (sc.hot.size() < n_srv) {
    sc.hot.resize(n_srv, 0);
    sc.demand.resize(n_srv, 0);
    sc.maybe.resize(n_srv, 0);
  }
  if (sc.left.size() < n) {
    sc.left.resize(n);
    sc.kind.resize(n);
    sc.listed.resize(n, 0);
  }
}
}  // namespace keep_detail

// ArylPass.keep over order_a (the jobs given extras, k > 0, sorted as order_a),
// then the order of the best-fit loop: ``order`` gets the jobs left with workers to
// place, in order_a order, and ``want`` their workers.  Keep depends on the order
// only at the servers where the extras these jobs have do not all fit (free < their
// GPUs there): a job with no extra on such a server keeps min(k, its extras)
// wherever it comes (each of its servers has room for every extra there), and takes
// nothing where the others compete.  So those jobs keep first, in position order,
// and only the others (keep_one in order_a order) and the jobs left with workers to
// place are sorted (order_a filtered to them: the key is a strict total order).
// A server can be contended only where free is below in.extras_bound (when given):
// the jobs with an extra on such a "hot" server keep after the others (keep_among),
// which touch none of those servers.
// A running job that keeps exactly its extras gets no entry (Placed); ``touched``
// gets the running positions that may change (Python's: k > 0 or extras now, less
// those), ascending.
inline void keep(std::vector<i64>& free, const ExtrasInput& in, const std::vector<i64>& k,
                 Placed& out, PlaceScratch& sc) {
  namespace kd = keep_detail;
  const std::vector<i64>& g = *in.g;
  const std::vector<i64>& ext = *in.ext;
  const size_t n = k.size();
  const size_t n_run = static_cast<size_t>(in.n_run);
  const size_t n_srv = free.size();
  kd::size_scratch(n, n_srv, sc);
  std::vector<char>& maybe = sc.maybe;
  std::vector<i64>& maybe_srv = sc.maybe_srv;
  maybe_srv.clear();
  const std::vector<i64>* bound = in.extras_bound;
  if (bound != nullptr && bound->size() >= n_srv) {
    const i64* b = bound->data();
    for (size_t s = 0; s < n_srv; ++s)
      if (free[s] < b[s]) {
        maybe[s] = 1;
        maybe_srv.push_back(static_cast<i64>(s));
      }
  } else {
    for (size_t s = 0; s < n_srv; ++s) {
      maybe[s] = 1;
      maybe_srv.push_back(static_cast<i64>(s));
    }
  }
  sc.deferred.clear();
  for (size_t i = 0; i < n; ++i) {
    if (k[i] <= 0) {  // drops every extra it has
      if (i < n_run && ext[i] > 0) out.touched.push_back(static_cast<i64>(i));
      continue;
    }
    const Placement* had = in.old_at(i);
    if (had == nullptr) {
      kd::keep_later(in, i, kLeft, k[i], out.touched, out, sc);
      continue;
    }
    const PlaceEntry* e = had->data();
    const size_t m = had->size();
    if (k[i] == ext[i] && i < n_run) {
      // the usual case: its count does not change; with no extra on a hot server it
      // keeps exactly its extras (keep_roomy), in one walk (undone at a hot server)
      const i64 gi = g[i];
      size_t q = 0;
      for (; q < m; ++q) {
        const auto su = static_cast<size_t>(e[q].first);
        if (maybe[su]) break;
        free[su] -= e[q].second * gi;
      }
      if (q == m) continue;
      for (size_t r = 0; r < q; ++r) free[static_cast<size_t>(e[r].first)] += e[r].second * gi;
      sc.deferred.push_back(static_cast<i64>(i));
      continue;
    }
    bool on_hot = false;
    for (size_t q = 0; q < m && !on_hot; ++q) on_hot = maybe[static_cast<size_t>(e[q].first)];
    if (on_hot) sc.deferred.push_back(static_cast<i64>(i));
    else kd::keep_roomy(free, in, k, i, out.touched, out, sc);
  }
  if (!sc.deferred.empty()) {
    // free at the hot servers is as it came (only deferred jobs have extras there)
    kd::keep_among(free, in, k, sc.deferred, [&maybe](size_t s) { return maybe[s] != 0; },
                   out, sc);
    kd::merge_touched(out, sc);
  }
  for (i64 s : maybe_srv) maybe[static_cast<size_t>(s)] = 0;
  kd::order_and_keep(free, in, k, out, sc);
}

// The first position i >= from with a[i] != b[i] (n: none): four positions a step
// while they all match (keep_exact's walk: most counts do not change).
inline size_t next_change(const i64* a, const i64* b, size_t from, size_t n) {
  size_t i = from;
  for (; i + 4 <= n; i += 4)
    if (((a[i] ^ b[i]) | (a[i + 1] ^ b[i + 1]) | (a[i + 2] ^ b[i + 2]) | (a[i + 3] ^ b[i + 3])) != 0)
      break;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// ArylPass.keep_exact: the keep pass when free = free_wo_extras + every extra in
// ``old``.  One walk over the positions: the running ones whose count changes go to
// ``touched`` (ascending), the shrinking ones (k < ext) keep their extras as keep
// would (walking them backwards) and give the rest back to free, the growing ones
// (k > ext) go to ``order`` (then sorted as order_a) and keep every extra (want:
// k - ext still to place).  Every other position keeps exactly its extras: no entry.
// Where free_wo_extras < 0 (free short of the extras there) the jobs of short_pos
// take their extras back into free (as it came there) and keep as Python's keep
// (keep_among) after that walk: free is then exactly keep's (the result of
// Python's keep, less the entries of the jobs that keep exactly their extras).
inline void keep_exact(std::vector<i64>& free, const ExtrasInput& in,
                       const std::vector<i64>& k, Placed& out, PlaceScratch& sc) {
  namespace kd = keep_detail;
  const std::vector<i64>& wo = *in.free_wo_extras;
  free = wo;
  const std::vector<i64>& ext = *in.ext;
  const std::vector<i64>& g = *in.g;
  const size_t n = k.size();
  const size_t n_run = static_cast<size_t>(in.n_run);
  kd::size_scratch(n, free.size(), sc);
  const std::vector<i64>* listed =
      in.short_pos != nullptr && !in.short_pos->empty() ? in.short_pos : nullptr;
  if (listed != nullptr)
    for (i64 p : *listed) {
      const auto pu = static_cast<size_t>(p);
      sc.listed[pu] = 1;
      if (const Placement* had = in.old_at(pu))
        for (const auto& e : *had) free[static_cast<size_t>(e.first)] += e.second * g[pu];
    }
  const i64* kp = k.data();
  const i64* ep = ext.data();
  for (size_t i = next_change(kp, ep, 0, n); i < n; i = next_change(kp, ep, i + 1, n)) {
    const i64 ki = kp[i], ei = ep[i];
    if (listed != nullptr && sc.listed[i]) continue;
    if (i < n_run) out.touched.push_back(static_cast<i64>(i));
    if (ki > ei) {  // growing: keeps every extra in order_a order, then places the rest
      sc.kind[i] = kGrow;
      sc.left[i] = ki - ei;
      sc.order.push_back(static_cast<i64>(i));
      out.written.push_back(static_cast<i64>(i));
      continue;
    }
    i64 want = ki;  // shrinking: same walk as keep
    const i64 gi = g[i];
    const Placement& had = *in.old_at(i);
    Placement& kept = out.new_extra[i];
    out.written.push_back(static_cast<i64>(i));
    for (auto it = had.rbegin(); it != had.rend(); ++it) {
      i64 t = it->second;
      if (t > want) t = want;
      if (t > 0) {
        kept.emplace_back(it->first, t);
        want -= t;
        if (!want) break;
      }
    }
    for (const auto& e : had) {
      const i64 back = e.second - place_get(kept, e.first);
      if (back) free[static_cast<size_t>(e.first)] += back * gi;
    }
  }
  if (listed != nullptr) {
    kd::keep_among(free, in, k, *listed, [&wo](size_t s) { return wo[s] < 0; }, out, sc);
    for (i64 p : *listed) sc.listed[static_cast<size_t>(p)] = 0;
    kd::merge_touched(out, sc);
  }
  kd::order_and_keep(free, in, k, out, sc);
}

// ArylPass.place_extras: place k[i] extra workers of every candidate; takes them from
// ``free``.  Kept extras first, then best-fit decreasing (worker size, extra GPUs
// descending, job index ascending) over groups_extra; one worker at a time when a
// job's workers do not fit together.
inline void place_extras(std::vector<i64>& free, const ExtrasInput& in,
                         const std::vector<i64>& k, Placed& out, PlaceScratch& sc) {
  const std::vector<i64>& g = *in.g;
  const size_t n = k.size();
  if (out.new_extra.size() < n) out.new_extra.resize(n);  // (never shrunk: buffers kept)
  for (i64 i : out.written) out.new_extra[static_cast<size_t>(i)].clear();
  out.written.clear();
  out.touched.clear();
  out.shorts.clear();
  sc.order.clear();
  sc.want.clear();
  if (in.free_wo_extras != nullptr) keep_exact(free, in, k, out, sc);
  else keep(free, in, k, out, sc);
  const Groups& groups_extra = *in.groups_extra;
  for (size_t q = 0; q < sc.order.size(); ++q) {
    const i64 want = sc.want[q];
    if (!want) continue;
    const i64 i = sc.order[q];
    const size_t iu = static_cast<size_t>(i);
    const i64 gi = g[iu];
    Placement& got = sc.got;
    if (!bf_place(free, groups_extra, want, gi, got)) {
      // not enough slots: as many as fit, one worker at a time
      got.clear();
      i64 placed = 0;
      for (i64 r = 0; r < want; ++r) {
        i64 s = -1;
        for (const auto& grp : groups_extra) {
          s = best_fit(free, grp, gi);
          if (s >= 0) break;
        }
        if (s < 0) break;
        free[static_cast<size_t>(s)] -= gi;
        place_add(got, s, 1);
        ++placed;
      }
      const i64 missing = want - placed;
      if (missing) out.shorts.emplace_back(i, k[iu] - missing);
    }
    Placement& ex = out.new_extra[iu];
    for (const auto& e : got) place_add(ex, e.first, e.second);
  }
}

// ArylPass.fill_extras: after a repair, add one extra worker at a time (best marginal
// value per GPU first, ties: position) while a whole re-placement from free0 succeeds
// and the marginal value is > 0.  ``place(k, placed)`` re-places into ``free``.
template <typename PlaceFn>
inline void fill_extras(const Table& values, std::vector<i64>& k,
                        const std::vector<i64>& max_extra, const std::vector<i64>& g,
                        std::vector<i64>& free, const std::vector<i64>& free0,
                        Placed& placed, PlaceFn&& place) {
  std::vector<i64> best_free(free);
  const size_t n = k.size();
  const i64 K = values.K;
  std::vector<std::pair<double, i64>> cands;
  std::vector<i64> k2;
  Placed res;
  while (true) {
    cands.clear();
    for (size_t i = 0; i < n; ++i) {
      const i64 ki = k[i];
      if (ki >= max_extra[i]) continue;
      const double nxt = values.v[i * static_cast<size_t>(K) + static_cast<size_t>(ki)];
      if (std::isnan(nxt)) continue;
      const double gain =
          nxt - (ki ? values.v[i * static_cast<size_t>(K) + static_cast<size_t>(ki - 1)] : 0.0);
      if (gain > 0) cands.emplace_back(-gain / static_cast<double>(g[i]), static_cast<i64>(i));
    }
    std::sort(cands.begin(), cands.end());
    bool accepted = false;
    for (const auto& c : cands) {
      k2 = k;
      k2[static_cast<size_t>(c.second)] += 1;
      free = free0;
      place(k2, res);
      if (res.shorts.empty()) {
        k.swap(k2);
        std::swap(placed, res);
        best_free = free;
        accepted = true;
        break;
      }
    }
    if (!accepted) break;
  }
  free = best_free;
}

// elastic_phase's placement of a resize: the base part of `place` (state.py
// split_placement: its first `base` workers in ascending server order), then the new
// extras `ex` (Python's ``newp = dict(b0); newp[s] = newp.get(s, 0) + c``: a server
// already there gains them, a new one goes last) into `out` (overwritten).  Returns
// newp's workers.  Both placements are dicts (distinct servers).  The base part
// usually lies on one or two servers: they are picked one at a time, the lowest
// server above the last (a walk of `place` each), until `base` workers are taken;
// split_placement orders a larger one.  Most placements were built by a resize (base
// part first in ascending servers, then the extras, see extra_part): when the entries
// up to the one that completes `base` ascend and every later one is above them, those
// are the lowest servers in order, the ones picked (one check of `place` instead of a
// walk per pick).  Written in place (no push per entry).
inline i64 resize_placement(const Placement& place, i64 base, const Placement& ex,
                            Placement& out) {
  constexpr size_t kPicks = 4;  // base servers picked one at a time, at most
  i64 b_srv[kPicks], b_k[kPicks];
  size_t n_base = 0;
  i64 left = base;
  i64 last = std::numeric_limits<i64>::min();  // the highest base server
  if (left > 0) {  // the ascending prefix (entries with workers) that completes base
    const size_t n = place.size();
    size_t i = 0;
    bool ok = true;
    for (; i < n && i < kPicks; ++i) {
      const PlaceEntry& e = place[i];
      ok &= (e.first > last) & (e.second > 0);
      if (!ok || e.second >= left) break;
      b_srv[i] = e.first;
      b_k[i] = e.second;
      left -= e.second;
      last = e.first;
    }
    if (ok && i < n && i < kPicks) {  // place[i] completes base: the rest above it?
      const i64 pivot = place[i].first;
      for (size_t r = i + 1; r < n; ++r) ok &= place[r].first > pivot;
      if (ok) {
        b_srv[i] = pivot;
        b_k[i] = left;
        n_base = i + 1;
        left = 0;
        last = pivot;
      }
    }
    if (left > 0) {  // not so: the picks one at a time
      left = base;
      last = std::numeric_limits<i64>::min();
    }
  }
  while (left > 0) {
    if (n_base == kPicks) {  // a base part on many servers
      split_placement(place, base, &out, nullptr);
      for (const auto& e : ex) place_add(out, e.first, e.second);
      return place_workers(out);
    }
    i64 low = std::numeric_limits<i64>::max(), low_k = 0;  // the lowest server above last
    for (const auto& e : place)
      if (e.first > last && e.first < low) {
        low = e.first;
        low_k = e.second;
      }
    if (low == std::numeric_limits<i64>::max()) break;  // (fewer workers than base)
    const i64 take = low_k < left ? low_k : left;
    if (take) {
      b_srv[n_base] = low;
      b_k[n_base++] = take;
      left -= take;
    }
    last = low;
  }
  // place_add of ex: only a base server (<= last) can hold one of its servers already
  auto in_base = [&](i64 s) {
    size_t q = 0;
    if (s <= last)
      while (q < n_base && b_srv[q] != s) ++q;
    return s <= last ? q : n_base;
  };
  i64 workers = base - left;
  size_t n_new = 0;
  for (const auto& e : ex) {
    workers += e.second;
    const size_t q = in_base(e.first);
    if (q < n_base) b_k[q] += e.second;
    else ++n_new;
  }
  out.resize(n_base + n_new);
  PlaceEntry* o = out.data();
  for (size_t q = 0; q < n_base; ++q) o[q] = PlaceEntry(b_srv[q], b_k[q]);
  size_t m = n_base;
  for (const auto& e : ex)
    if (in_base(e.first) == n_base) o[m++] = e;
  return workers;
}

}  // namespace aryl_pass

// ====================================================================== the pass
// Scratch vectors of the pass, kept from one pass to the next (by the caller of
// decide_aryl), so a pass allocates nothing once they have grown: the replay runs
// thousands of passes.
struct ArylWorkspace {
  // ArylPass members (Python: attributes of the pass object)
  std::vector<i64> real, scratch, held, loan_set;
  aryl_pass::Groups groups, groups_extra;
  std::vector<std::vector<i64>> held_t, off_t;
  std::vector<aryl_pass::Groups> groups_t, groups_extra_t;
  std::array<aryl_pass::Span, 3> groups_key;  // set_groups: the lists its groups view
  bool groups_kept = false;                   // groups and groups_extra are groups_key's
  std::vector<char> fin_built;
  std::vector<std::vector<std::pair<double, i64>>> finishes;
  // run / elastic_typed
  std::vector<i64> fast, sub, cand_all, servers, new_t;
  std::vector<std::vector<i64>> by_type;
  std::vector<std::pair<i64, i64>> new_types;
  // elastic_phase
  std::vector<i64> cand, g, ext, max_extra, caps, caps_r, k, free0, slot_free;
  std::vector<i64> free_wo, short_pos, short_srv;  // keep after phase 1 displaced extras
  std::vector<int32_t> pos_of;          // by job: its candidate position (when cand[it] is it)
  std::vector<size_t> new_idx;
  std::vector<double> tput, cut;
  std::vector<aryl_pass::RowIn> rows;
  aryl_pass::Table table;
  aryl_pass::Placed placed;
  aryl_pass::PlaceScratch psc;
  // SjfPass::started of the pass (kept for its capacity)
  std::vector<i64> started;
};

// aryl.py ArylPass: one pass of the aryl family over a state (scratch data lives
// here).  Phase 1 is sched_simple.hpp's SjfPass::base_phase with the hooks below;
// SjfPass::free is Python's ``self.real`` (the truly free GPUs; capacity_view fills
// it and ``place`` takes from it).
class ArylPass : public SjfPass {
 public:
  using Groups = aryl_pass::Groups;
  using Span = aryl_pass::Span;

  ArylPass(const Policy& pol_, const State& st_, const PassContext& ctx_, ArylWorkspace& ws_)
      : SjfPass(pol_, st_, ctx_, ws_.real, ws_.started),  // free: Python's self.real
        ws(ws_),
        el_any(pol_.elastic && !st_.elastic_running.empty()),
        typed(st_.multi_type() && !st_.config.mix_gpu_types),
        groups_extra(ws_.groups_extra) {
    ws.fin_built.clear();
    // (the groups, held and loan_set are the last pass's until set_groups, which
    // every use of them follows, builds them: groups_built is false)
  }
  ArylPass(const ArylPass&) = delete;
  ArylPass& operator=(const ArylPass&) = delete;

  // ArylPass.set_groups: base workers on training, then servers already on loan,
  // then servers merely offered; extras on loaned, then training, then offered.
  // A pass calls it with ctx.loaned only (capacity_view, run), so the groups are
  // built once per pass: a second call with the same list finds them built
  // (groups_built; elastic_typed, which changes groups_extra, clears it).
  void set_groups(const std::vector<i64>& loaned_in) {
    if (groups_built && loaned == &loaned_in) return;
    loaned = &loaned_in;
    groups_built = true;
    static const std::vector<i64> kNone;
    const std::vector<i64>& offered = loaned_in.empty() ? kNone : ctx.offered;
    const std::vector<i64>* held_p = &loaned_in;
    if (!offered.empty()) {
      // loaned minus offered: the offered servers are idle until the plan borrows
      // them, the others on loan (status LOANED; schedule has that list)
      if (ctx.held != nullptr && &loaned_in == &ctx.loaned) {
        held_p = ctx.held;
      } else {
        ws.held.clear();
        for (i64 s : loaned_in)
          if (st.server_status[static_cast<size_t>(s)] == LOANED) ws.held.push_back(s);
        held_p = &ws.held;
      }
    }
    const Span tr(st.training_servers), hd(*held_p), of(offered);
    // the groups are views of these lists: the last pass's groups are these ones
    // when the lists are the same vectors at the same sizes (their contents may
    // differ), unless elastic_typed changed them
    const std::array<Span, 3> key{tr, hd, of};
    if (typed || !ws.groups_kept || !(key == ws.groups_key)) {
      ws.groups.clear();
      groups_extra.clear();
      for (const Span& grp : {tr, hd, of})
        if (!grp.empty()) ws.groups.push_back(grp);
      for (const Span& grp : {hd, tr, of})
        if (!grp.empty()) groups_extra.push_back(grp);
      ws.groups_key = key;
      ws.groups_kept = !typed;
    }
    if (typed) {
      ws.loan_set = loaned_in;  // ascending (ctx.loaned is)
      const size_t nt = static_cast<size_t>(st.n_types());
      ws.held_t.resize(nt);
      ws.off_t.resize(nt);
      ws.groups_t.resize(nt);
      ws.groups_extra_t.resize(nt);
      for (size_t t = 0; t < nt; ++t) {
        ws.held_t[t].clear();
        ws.off_t[t].clear();
        ws.groups_t[t].clear();
        ws.groups_extra_t[t].clear();
      }
      auto type_of = [this](i64 x) {
        return static_cast<size_t>(st.server_type[static_cast<size_t>(x)]);
      };
      for (i64 x : *held_p) ws.held_t[type_of(x)].push_back(x);
      for (i64 x : offered) ws.off_t[type_of(x)].push_back(x);
      for (size_t t = 0; t < nt; ++t) {
        const Span tr_t(st.training_by_type[t]), hd_t(ws.held_t[t]), of_t(ws.off_t[t]);
        for (const Span& grp : {tr_t, hd_t, of_t})
          if (!grp.empty()) ws.groups_t[t].push_back(grp);
        for (const Span& grp : {hd_t, tr_t, of_t})
          if (!grp.empty()) ws.groups_extra_t[t].push_back(grp);
      }
    }
  }

  // ArylPass.capacity_view: the truly free GPUs (into free_out, which is `free`);
  // returns the GPUs usable by base demands (free + GPUs of the current extras).
  i64 capacity_view(std::vector<i64>& free_out) override {
    free_out = *ctx.free;
    has_scratch = false;
    displaced = false;
    displaced_gpus = 0;
    set_groups(ctx.loaned);
    // every running job is at or above its base; only the scalable ones above it
    const i64 ex_total = pol.elastic ? st.busy - st.base_busy : 0;
    const i64 avail = ctx.capacity_gpus - st.busy;
    real_left = avail;
    return avail + ex_total;
  }

  // ArylPass.build_scratch: free GPUs (`real`: Python's self.real, `free` unless
  // run reads ctx.free itself) plus the GPUs of every current extra worker.
  std::vector<i64>& build_scratch(const std::vector<i64>& real) {
    if (!has_scratch) {
      const size_t n = real.size();
      if (st.ex_srv.size() != n) throw std::logic_error("build_scratch: zip(strict=True)");
      ws.scratch.resize(n);
      for (size_t s = 0; s < n; ++s) ws.scratch[s] = real[s] + st.ex_srv[s];
      has_scratch = true;
    }
    return ws.scratch;
  }

  // ArylPass.place: best fit on truly free GPUs first; else also on extras' GPUs.
  bool place(std::vector<i64>& /*free_io: == free*/, i64 j, Placement& out) override {
    if (typed) return place_typed(j, out);
    const i64 w = pol.base_workers(st, j);
    const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
    std::vector<i64>& real = free;
    // bf_place, its usual case first (one server of the first group holds every
    // worker: place_one); otherwise bf_place spreads the workers or fails without
    // touching real.  With one GPU a worker the groups' slots are their free GPUs,
    // real_left (the capacity - busy of capacity_view, less every take since; the
    // other servers have none free): bf_place need not count them, and fails
    // exactly when real_left < w.
    const bool usual = w > 0 && g > 0 && !ws.groups.empty();
    if (usual && place_one(real, w, g, out)) {
      took_free(out, w, g);
      return true;
    }
    const bool spread = !usual || g != 1 || real_left >= w;
    if (spread && bf_place(real, ws.groups, w, g, out, g == 1 ? real_left : -1)) {
      took_free(out, w, g);
      return true;
    }
    if (!el_any) return false;
    std::vector<i64>& sc = build_scratch(free);
    if (!(usual && place_one(sc, w, g, out)) && !bf_place(sc, ws.groups, w, g, out)) return false;
    take_real(out, g);
    return true;
  }

  // bf_place's usual case on `v`: one server of the first group holds all w
  // workers of g GPUs (false, out empty: none does)
  bool place_one(std::vector<i64>& v, i64 w, i64 g, Placement& out) const {
    out.clear();
    const i64 s = best_fit_span(v, ws.groups[0], w * g);
    if (s < 0) return false;
    out.emplace_back(s, w);
    v[static_cast<size_t>(s)] -= w * g;
    return true;
  }

  // ArylPass.take: place already took the GPUs
  void take(std::vector<i64>&, const Placement&, i64) override {}

  // ------------------------------------------------ several GPU types (typed)
  // ArylPass.place_typed: the base workers on one GPU type, fastest first, truly free
  // GPUs first, else also extras' GPUs; a placement on loaned or offered servers only
  // when loan_worth_it.
  bool place_typed(i64 j, Placement& out) {
    const i64 w = pol.base_workers(st, j);
    const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
    std::vector<i64> types;
    for (i64 t = 0; t < st.n_types(); ++t)
      if (!ws.groups_t[static_cast<size_t>(t)].empty()) types.push_back(t);
    const std::vector<i64> order = st.type_order(j, w, types);
    std::vector<i64>& real = free;
    for (i64 t : order) {
      if (!bf_place(real, ws.groups_t[static_cast<size_t>(t)], w, g, out)) continue;
      if (!ws.loan_set.empty() && on_loan(out) && !loan_worth_it(j, t, w)) {
        for (const auto& e : out)  // real[:] = before
          real[static_cast<size_t>(e.first)] += e.second * g;
        continue;
      }
      real_left -= w * g;
      if (has_scratch)
        for (const auto& e : out) ws.scratch[static_cast<size_t>(e.first)] -= e.second * g;
      return true;
    }
    if (!el_any) return false;
    std::vector<i64>& sc = build_scratch(free);
    for (i64 t : order) {
      if (!bf_place(sc, ws.groups_t[static_cast<size_t>(t)], w, g, out)) continue;
      if (!ws.loan_set.empty() && on_loan(out) && !loan_worth_it(j, t, w)) {
        for (const auto& e : out)  // scratch[:] = before
          sc[static_cast<size_t>(e.first)] += e.second * g;
        continue;
      }
      take_real(out, g);
      return true;
    }
    out.clear();
    return false;
  }

  // ArylPass.loan_worth_it: start on w workers of type t (loaned servers) now, or wait
  // for a faster training type?
  bool loan_worth_it(i64 j, i64 t, i64 w) {
    const auto u = static_cast<size_t>(j);
    const double sp_t = st.throughput_on(j, t, w);
    const double rem = st.remaining_s[u] * st.ref_throughput[u];  // work
    const i64 need = w * st.gpus_per_worker[u];
    double best = kInf;
    for (i64 v = 0; v < st.n_types(); ++v) {
      if (st.training_by_type[static_cast<size_t>(v)].empty()) continue;
      const double sp_u = st.throughput_on(j, v, w);
      if (sp_u <= sp_t) continue;
      const double wait = wait_for(v, need, st.gpus_per_worker[u]);
      best = py_min(best, wait + rem / sp_u);
    }
    return rem / sp_t <= best;
  }

  // ArylPass.wait_for: seconds until `need` GPUs of type u's training servers are free
  // (free now + running jobs there released at their expected finish).
  // Only servers that hold a worker of g GPUs count (all of them when the type's
  // servers have one size; the estimate is then kept for the pass).
  double wait_for(i64 u, i64 need, i64 g) {
    const auto uu = static_cast<size_t>(u);
    const std::vector<i64>& all = st.training_by_type[uu];
    bool small = false;
    for (i64 s : all)
      if (st.server_gpus[static_cast<size_t>(s)] < g) small = true;
    std::vector<i64> fit;
    if (small)
      for (i64 s : all)
        if (st.server_gpus[static_cast<size_t>(s)] >= g) fit.push_back(s);
    const std::vector<i64>& tr = small ? fit : all;
    i64 have = 0;
    for (i64 s : tr) have += free[static_cast<size_t>(s)];
    if (have >= need) return 0.0;
    if (ws.fin_built.size() != static_cast<size_t>(st.n_types())) {
      ws.fin_built.assign(static_cast<size_t>(st.n_types()), 0);
      ws.finishes.resize(static_cast<size_t>(st.n_types()));
    }
    std::vector<std::pair<double, i64>> own;
    std::vector<std::pair<double, i64>>& fin = small ? own : ws.finishes[uu];
    if (small || !ws.fin_built[uu]) {
      fin.clear();
      const double now = st.now_s;
      for (i64 r : st.running) {
        const auto ru = static_cast<size_t>(r);
        i64 k_on = 0;
        for (const auto& e : st.placement[ru])
          if (std::binary_search(tr.begin(), tr.end(), e.first)) k_on += e.second;
        const i64 gpus = k_on * st.gpus_per_worker[ru];
        if (gpus) {
          const double left = st.remaining_at(r, now);
          const double sp = st.speed[ru];
          const double t_end = py_max(st.progress_at_s[ru], now) + (sp > 0 ? left / sp : kInf);
          fin.emplace_back(t_end - now, gpus);
        }
      }
      std::sort(fin.begin(), fin.end());
      if (!small) ws.fin_built[uu] = 1;
    }
    for (const auto& f : fin) {
      have += f.second;
      if (have >= need) return f.first;
    }
    return kInf;
  }

  // ArylPass.base_type: the GPU type of a placement's lowest server.
  i64 base_type(const Placement& p) const {
    if (p.empty()) throw std::logic_error("base_type: no placement");
    i64 lo = p[0].first;
    for (const auto& e : p) lo = std::min(lo, e.first);
    return st.server_type[static_cast<size_t>(lo)];
  }

  // ArylPass.elastic_typed: phase 2 per GPU type, one exact MCKP per type over its
  // jobs and capacity.
  void elastic_typed(Plan& d, std::vector<i64>& free_io) {
    const size_t nt = static_cast<size_t>(st.n_types());
    std::vector<std::vector<i64>>& by_type = ws.by_type;
    by_type.resize(nt);
    for (auto& v : by_type) v.clear();
    for (i64 j : st.elastic_running)  // self.el (the policy is elastic here)
      by_type[static_cast<size_t>(base_type(st.placement[static_cast<size_t>(j)]))].push_back(j);
    std::vector<std::pair<i64, i64>>& new_types = ws.new_types;  // (job, type) of elastic starts
    new_types.clear();
    for (const auto& s : d.starts)
      if (pol.scalable(st, s.job)) new_types.emplace_back(s.job, base_type(s.place));
    std::vector<i64>& servers = ws.servers;
    std::vector<i64>& new_t = ws.new_t;
    std::vector<i64>& fast = ws.fast;
    for (size_t t = 0; t < nt; ++t) {
      const std::vector<i64>& cand = by_type[t];
      bool has_new = false;
      for (const auto& x : new_types)
        if (x.second == static_cast<i64>(t)) has_new = true;
      if (cand.empty() && !has_new) continue;
      servers.clear();
      for (const Span& grp : ws.groups_t[t]) servers.insert(servers.end(), grp.begin(), grp.end());
      if (servers.empty()) continue;
      groups_extra = ws.groups_extra_t[t];
      groups_built = false;  // groups_extra is one type's now
      new_t.clear();
      for (const auto& x : new_types)
        if (x.second == static_cast<i64>(t)) new_t.push_back(x.first);
      // every job's own best option fitting at once is the optimum: no solver
      fast = free_io;
      if (elastic_phase(d, fast, cand, true, nullptr, &servers, static_cast<i64>(t), &new_t,
                        kSumFree, nullptr)) {
        free_io.swap(fast);
        continue;
      }
      elastic_phase(d, free_io, cand, false, nullptr, &servers, static_cast<i64>(t), &new_t,
                    kSumFree, nullptr);
    }
  }

  // ArylPass.run: phase 1 (when jobs wait), then phase 2 when capacity changed since
  // it last ran (the elastic memo), by the fast exact path or the solver.
  void run(Plan& d) {
    const bool phase1 = !st.queued.empty();
    if (phase1) base_phase(d);
    const std::vector<i64>* loaned_p = &ctx.loaned;
    if (!pol.elastic) {
      d.memo_left = st.memo_left;
      d.memo_loaned = st.memo_loaned;
      return;
    }
    const std::vector<i64>* real_p = ctx.free;
    if (phase1) {
      loaned_p = loaned;
      real_p = &free;
    }
    const i64 n_loaned_now = static_cast<i64>(loaned_p->size());
    const bool disp = phase1 && displaced;
    i64 left = phase1 ? real_left : ctx.capacity_gpus - st.busy;
    const i64 last_left = st.memo_left, last_loaned = st.memo_loaned;
    bool new_el = false;
    for (const auto& s : d.starts)
      if (pol.scalable(st, s.job)) {
        new_el = true;
        break;
      }
    bool run_ = new_el || disp || n_loaned_now != last_loaned || left > last_left;
    if (run_ && !new_el && !disp)
      // only capacity changed: nothing to do if every elastic job is at its maximum
      run_ = !st.below.empty() || n_loaned_now < last_loaned;
    if (run_ && (el_any || new_el) && typed) {
      if (!phase1) capacity_view(free);
      std::vector<i64>& free_t = build_scratch(free);
      elastic_typed(d, free_t);
      left = sum(free_t);
    } else if (run_ && (el_any || new_el)) {
      // left becomes sum(free) of the free GPUs chosen (Python's ``left =
      // sum(free)``), derived instead of summed: sum(*real_p) is left (capacity -
      // busy, less every take of phase 1: real_left; inference servers not on loan
      // have none free), and elastic_phase reports the GPUs its choice takes beyond
      // the candidates' extras now (`taken`: free after = its capacity - the
      // candidates' extras now - taken)
      assert(left == sum(*real_p));
      bool done = false;
      i64 taken = 0;
      // the free GPUs the phase places on, as elastic_phase writes them when it needs
      // them (free_lazy: real + the candidates' extras, Python's fast and scratch)
      std::vector<i64>& fast = ws.fast;
      if (!disp && !new_el && st.below.empty() && left >= 0) {
        // the fast path without a candidate (the gate holds: 0 <= left):
        // elastic_phase would return at once, leaving the free GPUs as they are
        done = true;
      } else if (!disp) {
        // Fast exact path: jobs at their maximum keep their extras; if the others'
        // unconstrained best options fit the free GPUs, that is the MCKP optimum.
        set_groups(*loaned_p);
        i64 upper = 0;    // GPUs the candidates could take at most
        i64 cap = left;   // free GPUs + GPUs of the extras of the jobs below their max
        for (i64 j : st.below) {
          const auto u = static_cast<size_t>(j);
          const i64 g = st.gpus_per_worker[u];
          upper += (st.max_workers[u] - st.min_workers[u]) * g;
          cap += (st.workers[u] - st.min_workers[u]) * g;
        }
        for (const auto& s : d.starts)
          if (pol.scalable(st, s.job)) {
            const auto u = static_cast<size_t>(s.job);
            upper += (st.max_workers[u] - st.min_workers[u]) * st.gpus_per_worker[u];
          }
        // Gate: when everyone at their maximum would not fit, go to the solver.
        if (upper <= cap) {
          std::vector<i64>& sub = ws.sub;  // the jobs below their maximum, in start order
          sub.clear();
          if (st.below.size() > 1) {
            for (i64 j : st.elastic_running)
              if (st.below.contains(j)) sub.push_back(j);
          } else {
            for (i64 j : st.below) sub.push_back(j);
          }
          // Python's fast: real + the extras of the jobs below their maximum; its
          // sum is cap (left + the GPUs of those extras: workers - base of each)
          done = elastic_phase(d, fast, sub, true, real_p, nullptr, -1, nullptr, cap, &taken,
                               true);
        }
        if (done) left -= taken;
      }
      if (!done) {
        // (Python's capacity_view when phase 1 did not run: real = ctx.free, which
        // the solver path only reads; set_groups ran above, as displaced is false)
        std::vector<i64>& cand = ws.cand_all;
        cand.resize(static_cast<size_t>(st.elastic_running.size()));
        size_t i = 0;
        for (i64 j : st.elastic_running) cand[i++] = j;
        // not displaced: the scratch is exactly real + every current extra (every
        // candidate's: the elastic running jobs'), written by elastic_phase when
        // needed, its sum left + st.ex_gpus (sum(ex_srv)); displaced: the scratch
        // phase 1 built, its sum that less displaced_gpus
        std::vector<i64>& sc = disp ? build_scratch(*real_p) : fast;
        const i64 capacity = left + st.ex_gpus - (disp ? displaced_gpus : 0);
        elastic_phase(d, sc, cand, false, disp ? nullptr : real_p, nullptr, -1, nullptr,
                      capacity, &taken, !disp);
        left = capacity - st.ex_gpus - taken;
      }
    }
    d.memo_left = left;
    d.memo_loaned = n_loaned_now;
  }

  // ArylPass.elastic_phase: phase 2 over the running jobs `cand_run` (elastic running
  // jobs: extras now, Python's ``ex``, in State::ex_job) and the elastic starts of d
  // (those in `new_filter` when given) on `free_io`.  `servers`/`gpu_type` (>= 0):
  // one GPU type's servers and speeds (elastic_typed).  Returns false only with
  // unconstrained_only when the unconstrained choice does not fit or cannot be
  // placed (nothing changed then).
  // `capacity_in`: the free GPUs (the sum of free_io, or of its `servers`) when the
  // caller knows them, kSumFree to sum them here.  `taken_out` (optional, set when
  // it returns true): the GPUs of the candidates' extras after, less those of their
  // extras now; free_io's sum after is its sum before less that.  `free_lazy`:
  // free_io is free_wo_extras + the running candidates' extras, not written yet
  // (written here where read: by slot_caps, or free0 by a repair; keep_exact rewrites
  // it from free_wo_extras; unwritten after an early return).
  static constexpr i64 kSumFree = std::numeric_limits<i64>::min();
  bool elastic_phase(Plan& d, std::vector<i64>& free_io, const std::vector<i64>& cand_run,
                     bool unconstrained_only,
                     const std::vector<i64>* free_wo_extras, const std::vector<i64>* servers,
                     i64 gpu_type, const std::vector<i64>* new_filter, i64 capacity_in,
                     i64* taken_out, bool free_lazy = false) {
    namespace ap = aryl_pass;
    if (taken_out != nullptr) *taken_out = 0;
    std::vector<size_t>& new_idx = ws.new_idx;  // index in d.starts of each new candidate
    new_idx.clear();
    for (size_t q = 0; q < d.starts.size(); ++q) {
      const i64 j = d.starts[q].job;
      if (!pol.scalable(st, j)) continue;
      if (new_filter != nullptr &&
          std::find(new_filter->begin(), new_filter->end(), j) == new_filter->end())
        continue;
      new_idx.push_back(q);
    }
    // the candidates: the running ones, then the elastic starts (no extras yet); the
    // caller's lists themselves when no job starts
    const bool has_new = !new_idx.empty();
    if (has_new) {
      ws.cand.assign(cand_run.begin(), cand_run.end());
      for (size_t q : new_idx) ws.cand.push_back(d.starts[q].job);
    }
    const std::vector<i64>& cand = has_new ? ws.cand : cand_run;
    const i64 n_run = static_cast<i64>(cand_run.size());
    if (cand.empty()) return true;
    // servers not in a group (not on loan) have none free
    i64 capacity = capacity_in;
    if (capacity_in == kSumFree) {
      capacity = 0;
      if (servers == nullptr) capacity = sum(free_io);
      else
        for (i64 s : *servers) capacity += free_io[static_cast<size_t>(s)];
    }
    assert(free_lazy || capacity_in == kSumFree || servers != nullptr ||
           capacity == sum(free_io));
    if (capacity <= 0 &&
        std::all_of(cand_run.begin(), cand_run.end(),
                    [this](i64 j) { return st.ex_job[static_cast<size_t>(j)].empty(); }))
      return true;
    const size_t n = cand.size();
    std::vector<i64>&g = ws.g, &ext = ws.ext;
    for (auto* v : {&g, &ext}) v->resize(n);
    std::vector<ap::RowIn>& rows = ws.rows;
    rows.resize(n);
    // (through plain pointers: the vectors' own would be read again after every store)
    i64* const g_p = g.data();
    i64* const ext_p = ext.data();
    ap::RowIn* const rows_p = rows.data();
    // ArylPass.elastic_phase: the table sized by what can be placed (capacity // g
    // extra workers at most), not by max_workers: mx = min(max_workers, base +
    // capacity // g); K = max(mx - base), the table's columns.
    // kernels._table (extras_table_from_throughput on one GPU type) over the
    // candidates: rem = remaining_work, cur (base for a job starting now), base, mx, g,
    // alpha, pause = rescale_pause_s for a running job and 0.0 for one starting now:
    // p = max(pause), and + p (a pause of 0) on the starting rows
    const double now = st.now_s;
    const double p = n_run > 0 ? st.config.rescale_pause_s : 0.0;
    i64 K = std::numeric_limits<i64>::min(), gmax = K, gmin = std::numeric_limits<i64>::max();
    // the first row whose throughputs are to be computed into ws.tput (n: none)
    size_t tput_missing = gpu_type >= 0 ? 0 : n;
    size_t i = 0;
    // the last row's g and capacity // g: rows mostly share one g, so gmin/gmax and the
    // quotient change only where g does (min(mx, b + q) - b is min(mx - b, q))
    i64 g_last = std::numeric_limits<i64>::min(), per_g = 0;
    auto new_g = [&](i64 gi) {
      g_last = gi;
      per_g = gi == 1 ? capacity : capacity / gi;
      gmax = std::max(gmax, gi);
      gmin = std::min(gmin, gi);
    };
    // the running candidates (elastic running jobs) from their GatherRows (State::
    // gather_row): the same values as below, read from one record each (remaining_work:
    // remaining_at's operations on a running job's values, in the same order), and
    // their homogeneous throughputs (one GPU type: never missing)
    const size_t n_rows = gpu_type < 0 ? static_cast<size_t>(n_run) : 0;
    // (the rows' throughputs are in the GatherRows themselves: none may move)
    if (n_rows > 0) st.gather_reserve(n_rows);
    for (; i < n_rows; ++i) {
      const GatherRow* r = st.gather_row(cand[i]);
      if (r == nullptr) break;  // (not one: the general gather below)
      const i64 b = r->base, gi = r->gpus;
      if (gi != g_last) new_g(gi);
      const i64 e = std::min<i64>(r->max_workers - b, per_g);
      const i64 c_now = r->workers - b;  // cur - base
      g_p[i] = gi;
      ext_p[i] = c_now;
      K = std::max(K, e);
      double rem = r->remaining_s;
      if (now > r->progress_at_s) {
        rem = rem - (now - r->progress_at_s) * r->speed;
        rem = rem > 0.0 ? rem : 0.0;
      }
      const double* t = e < r->n_tput ? r->tput() : st.gather_tput(cand[i], e + 1);
      rows_p[i] = {t, rem * r->ref_throughput, c_now, e, gi, false};
    }
    for (; i < n; ++i) {
      const i64 j = cand[i];
      const auto u = static_cast<size_t>(j);
      const i64 b = st.min_workers[u], gi = st.gpus_per_worker[u];
      if (gi != g_last) new_g(gi);
      const i64 e = std::min<i64>(st.max_workers[u] - b, per_g);
      const bool running = static_cast<i64>(i) < n_run;
      const i64 c_now = running ? st.workers[u] - b : 0;  // cur - base
      g_p[i] = gi;
      ext_p[i] = c_now;
      K = std::max(K, e);
      // a started job's throughputs are kept with its record (State::records)
      const double* t =
          gpu_type < 0 ? st.records.throughput_row(u, st.alpha[u], b, e + 1) : nullptr;
      if (t == nullptr && tput_missing == n) tput_missing = i;
      rows_p[i] = {t, st.remaining_work(j, now), c_now, e, gi, !running && p > 0};
    }
    if (tput_missing < n) {
      // kernels.throughput_rows on gpu_type, or the homogeneous throughputs of a job
      // without a record: tput[i, c] on base + c workers, c = 0..max (row stride K + 1)
      std::vector<double>& tput = ws.tput;
      const size_t stride = static_cast<size_t>(K) + 1;
      tput.resize(n * stride);
      for (size_t i = tput_missing; i < n; ++i) {
        if (rows[i].tput != nullptr) continue;
        const i64 j = cand[i];
        const auto u = static_cast<size_t>(j);
        const i64 b = st.min_workers[u];
        double* const t = tput.data() + i * stride;
        for (i64 c = 0; c <= rows[i].extra; ++c)
          t[c] = gpu_type >= 0 ? st.throughput_on(j, gpu_type, b + c)
                               : elastic_throughput(b + c, st.alpha[u]);
        rows[i].tput = t;
      }
    }
    ap::Table& table = ws.table;
    const ap::Solver solver = pol.greedy_solver ? ap::Solver::greedy : ap::Solver::mckp;
    // the MCKP's step shortcut fed as the table is built (not for the unconstrained
    // choice; one g for all the candidates)
    const bool feed = solver == ap::Solver::mckp && !unconstrained_only && gmin == gmax;
    ap::build_table(table, rows.data(), n, K, p, feed ? capacity : -1, true);
    // the rows' extra workers at most, as a list: for the per-job caps and the repair
    // only (rare)
    std::vector<i64>& max_extra = ws.max_extra;
    auto fill_max_extra = [&]() {
      max_extra.resize(n);
      for (size_t i = 0; i < n; ++i) max_extra[i] = rows[i].extra;
    };
    // (1) per-job caps from per-server worker slots (1-GPU workers always fit)
    std::vector<i64>& caps = ws.caps;
    const bool use_caps = gmax > 1;
    if (use_caps) {
      fill_max_extra();
      if (free_lazy) {
        write_free(free_io, *free_wo_extras, cand, n_run);
        free_lazy = false;
      }
      if (servers == nullptr) {
        ap::slot_caps(free_io, g, max_extra, caps);
      } else {
        std::vector<i64>& slot_free = ws.slot_free;
        slot_free.clear();
        for (i64 s : *servers) slot_free.push_back(free_io[static_cast<size_t>(s)]);
        ap::slot_caps(slot_free, g, max_extra, caps);
      }
    }
    std::vector<i64>& k = ws.k;
    std::vector<double>& cut = ws.cut;
    if (!ap::solve_extras(table, capacity, solver, unconstrained_only, use_caps ? &caps : nullptr,
                          k, cut))
      return false;
    ap::ExtrasInput in;
    in.cand = &cand;
    in.ex_job = &st.ex_job;
    in.ext = &ext;
    in.g = &g;
    in.n_run = n_run;
    in.groups_extra = &groups_extra;
    in.free_wo_extras = free_wo_extras;
    in.extras_bound = &st.ex_srv;  // the candidates' extras are some of every extra
    if (free_wo_extras == nullptr && servers == nullptr &&
        n_run == static_cast<i64>(st.elastic_running.size()) &&
        free_io.size() == st.ex_srv.size())
      set_short(free_io, cand, n_run, in);
    // free0: free_io as it came; keep_exact rebuilds free_io from free_wo_extras (the
    // buffers are swapped, nothing copied), keep starts from it (a copy)
    std::vector<i64>& free0 = ws.free0;
    if (in.free_wo_extras != nullptr) free0.swap(free_io);
    else free0 = free_io;
    ap::Placed& placed = ws.placed;
    ap::PlaceScratch& psc = ws.psc;
    ap::place_extras(free_io, in, k, placed, psc);
    if (!placed.shorts.empty()) {
      if (unconstrained_only) return false;  // free_io is the caller's scratch copy
      if (free_lazy) write_free(free0, *free_wo_extras, cand, n_run);
      // (2) repair: cap the jobs whose extras did not all fit, solve again
      std::vector<i64>& caps_r = ws.caps_r;
      if (!use_caps) fill_max_extra();
      caps_r = use_caps ? caps : max_extra;
      while (!placed.shorts.empty()) {
        for (const auto& sh : placed.shorts) caps_r[static_cast<size_t>(sh.first)] = sh.second;
        free_io = free0;
        ap::solve_extras(table, capacity, solver, false, &caps_r, k, cut);
        ap::place_extras(free_io, in, k, placed, psc);
      }
      d.n_extra_repairs += 1;
      // (3) fill: no placeable extra worker of positive marginal value is left
      ap::fill_extras(table, k, max_extra, g, free_io, free0, placed,
                      [&](const std::vector<i64>& kv, ap::Placed& res) {
                        ap::place_extras(free_io, in, kv, res, psc);
                      });
    }
    // --- turn into decisions
    // taken: every candidate now holds its k[i] extra workers (no short is left
    // after the repair; fill_extras keeps k and placed together), a running one
    // ext[i] before; a running position not in touched keeps its count (k == ext:
    // keep and keep_exact put every running position with k != ext in touched)
    i64 taken = 0;
    for (size_t q = 0; q < new_idx.size(); ++q) {
      const size_t iq = static_cast<size_t>(n_run) + q;
      taken += k[iq] * g_p[iq];
      const Placement& ex = placed.new_extra[iq];
      if (!ex.empty()) {
        Placement& merged = d.starts[new_idx[q]].place;
        for (const auto& e : ex) place_add(merged, e.first, e.second);
      }
    }
    // the running jobs that may change, in candidate order (the order of the resizes)
    for (i64 i : placed.touched) {
      const auto iu = static_cast<size_t>(i);
      const i64 j = cand[iu];
      const auto u = static_cast<size_t>(j);
      taken += (k[iu] - ext_p[iu]) * g_p[iu];
      const Placement& ex = placed.new_extra[iu];
      const Placement& was = st.ex_job[u];  // (running: i < n_run)
      if (place_equal(ex, was)) continue;
      Placement newp = d.take_place();
      const i64 w_new = ap::resize_placement(st.placement[u], st.min_workers[u], ex, newp);
      const i64 wk = st.workers[u];
      const int reason = w_new > wk ? pol.scale_out_reason
                                    : (w_new < wk ? pol.scale_in_reason : MCKP_MOVE);
      d.resizes.push_back(JobMove{j, std::move(newp), reason});
    }
    if (taken_out != nullptr) *taken_out = taken;
#ifndef NDEBUG
    i64 ext_gpus = 0;  // the GPUs of the running candidates' extras now
    for (i64 i = 0; i < n_run; ++i) ext_gpus += ext_p[i] * g_p[i];
    assert(servers != nullptr || sum(free_io) == capacity - ext_gpus - taken);
#endif
    return true;
  }

 private:
  // elastic_phase's free_io when free_lazy (into `out`): free_wo_extras + the extras
  // of every running candidate (ws.ext > 0: its ex_job; ws.g: GPUs a worker)
  void write_free(std::vector<i64>& out, const std::vector<i64>& free_wo_extras,
                  const std::vector<i64>& cand, i64 n_run) const {
    out = free_wo_extras;
    for (i64 i = 0; i < n_run; ++i) {
      const auto iu = static_cast<size_t>(i);
      if (ws.ext[iu] <= 0) continue;
      for (const auto& e : st.ex_job[static_cast<size_t>(cand[iu])])
        out[static_cast<size_t>(e.first)] += e.second * ws.g[iu];
    }
  }
  // The keep pass of elastic_phase when every job with extras is a candidate (every
  // elastic running job, with its ex_job): free less State::ex_srv is then free
  // without the candidates' extras (keep_exact's free_wo_extras), below 0 only where
  // phase 1 put base workers on extras' GPUs; short_pos gets the candidates on those
  // servers (State::jobs_on: every job with an extra there), ascending.
  void set_short(const std::vector<i64>& free_io, const std::vector<i64>& cand, i64 n_run,
                 aryl_pass::ExtrasInput& in) {
    std::vector<i64>& wo = ws.free_wo;
    std::vector<i64>& listed = ws.short_pos;
    std::vector<int32_t>& pos_of = ws.pos_of;
    const size_t n_srv = free_io.size();
    if (wo.size() != n_srv) wo.resize(n_srv);
    listed.clear();
    in.free_wo_extras = &wo;
    in.short_pos = &listed;
    std::vector<i64>& short_srv = ws.short_srv;
    short_srv.clear();
    const i64 *f = free_io.data(), *x = st.ex_srv.data();
    i64* w = wo.data();
    for (size_t s = 0; s < n_srv; ++s) {
      w[s] = f[s] - x[s];
      if (w[s] < 0) short_srv.push_back(static_cast<i64>(s));
    }
    if (short_srv.empty()) return;
    if (pos_of.size() < static_cast<size_t>(st.n_jobs()))
      pos_of.resize(static_cast<size_t>(st.n_jobs()), -1);
    for (i64 i = 0; i < n_run; ++i)
      pos_of[static_cast<size_t>(cand[static_cast<size_t>(i)])] = static_cast<int32_t>(i);
    for (i64 s : short_srv)
      for (const auto& e : st.jobs_on[static_cast<size_t>(s)]) {
        const i64 p = pos_of[static_cast<size_t>(e.first)];
        if (p >= 0 && p < n_run && cand[static_cast<size_t>(p)] == e.first) listed.push_back(p);
      }
    if (listed.size() > 1) {
      std::sort(listed.begin(), listed.end());
      listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
    }
  }
  // Python's sum(v): four running sums (integer addition, so the same total in any
  // order), which the compiler turns into twice as many additions a step
  static i64 sum(const std::vector<i64>& v) {
    const i64* x = v.data();
    const size_t n = v.size();
    i64 t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      t0 += x[i];
      t1 += x[i + 1];
      t2 += x[i + 2];
      t3 += x[i + 3];
    }
    for (; i < n; ++i) t0 += x[i];
    return (t0 + t1) + (t2 + t3);
  }
  bool on_loan(const Placement& p) const {
    for (const auto& e : p)
      if (std::binary_search(ws.loan_set.begin(), ws.loan_set.end(), e.first)) return true;
    return false;
  }
  // ArylPass._took_free: `p` (w workers) was placed on truly free GPUs: take them
  // from the scratch view too
  void took_free(const Placement& p, i64 w, i64 g) {
    real_left -= w * g;
    if (has_scratch)
      for (const auto& e : p) ws.scratch[static_cast<size_t>(e.first)] -= e.second * g;
  }
  // a placement made on the scratch: take what it can from the truly free GPUs
  void take_real(const Placement& p, i64 g) {
    for (const auto& e : p) {
      const auto su = static_cast<size_t>(e.first);
      const i64 kg = e.second * g;
      if (free[su] < kg) displaced = true;
      const i64 took = py_min(free[su], kg);
      free[su] -= took;
      real_left -= took;
      displaced_gpus += kg - took;
    }
  }

 public:
  ArylWorkspace& ws;
  const bool el_any;  // Python: bool(self.el)
  const bool typed;   // several GPU types and no mixing
  i64 real_left = 0;
  bool has_scratch = false;
  bool displaced = false;
  // the GPUs placements on the scratch took beyond real (take_real): the scratch
  // sums to sum(real) + sum(ex_srv) - displaced_gpus (built as real + ex_srv, every
  // other take from both)
  i64 displaced_gpus = 0;
  // the pass's lists are the workspace's (ws.scratch, ws.groups, ...)
  const std::vector<i64>* loaned = nullptr;  // Python's self.loaned (set_groups' list)
  bool groups_built = false;                 // set_groups ran for `loaned` this pass
  Groups& groups_extra;                      // ws.groups_extra
};

// aryl.py ArylPolicy.decide (every policy of the family; `pol` tells which).
// `ws`: the caller's scratch, kept from one pass to the next (sched_pass.hpp's
// PassWorkspace holds one).
inline void decide_aryl(const Policy& pol, const State& st, const PassContext& ctx, Plan& plan,
                        ArylWorkspace& ws) {
  ArylPass(pol, st, ctx, ws).run(plan);
}

}  // namespace sched
}  // namespace aryl
