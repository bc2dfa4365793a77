// Placement helpers on a scratch vector of free GPUs per server: the twin of
// src/aryl/scheduling/placement.py (best_fit, gang_place, bf_place,
// gang_place_typed).  Ties always go to the lower server index.
//
// Header-only C++17.  A "range of servers" is any container of i64 server
// indexes (std::vector<i64>, ...); `groups` is any container of such ranges.
#pragma once

#include <algorithm>
#include <vector>

#include "sched_state.hpp"

namespace aryl {
namespace sched {

// placement.py best_fit: the server with the fewest free GPUs that are >= need
// (ties: first in `servers`, which must be ascending); -1 if none. O(len(servers)).
template <class Servers>
inline i64 best_fit(const std::vector<i64>& free, const Servers& servers, i64 need) {
    i64 best = -1;
    i64 best_free = i64(1) << 62;
    for (i64 s : servers) {
        const i64 f = free[static_cast<size_t>(s)];
        if (need <= f && f < best_free) {
            best = s;
            best_free = f;
            if (f == need) break;
        }
    }
    return best;
}

// placement.py _one_server: best-fit server for `workers` workers on one server,
// -1 if none.  Eligible: not in `taken`, workers * g GPUs free, and fewer workers
// than the server's capacity (server_gpus[s] // g) or the server whole free.
// Fewest free GPUs first, ties: first in `servers` (ascending).
template <class Servers>
inline i64 one_server(const std::vector<i64>& free, const Servers& servers, i64 workers, i64 g,
                      const std::vector<i64>& server_gpus, const Placement& taken) {
    const i64 need = workers * g;
    i64 best = -1;
    i64 best_free = i64(1) << 62;
    for (i64 s : servers) {
        const i64 f = free[static_cast<size_t>(s)];
        if (need <= f && f < best_free && !place_has(taken, s)) {
            const i64 size = server_gpus[static_cast<size_t>(s)];
            if (workers < floordiv(size, g) || f == size) {
                best = s;
                best_free = f;
                if (f == need) break;
            }
        }
    }
    return best;
}

// placement.py gang_place: fifo gang placement [Aryl]; false if it does not fit now.
// Each server's own size (server_gpus, indexed by server); a server holds
// server_gpus[s] // g workers (its capacity).  Fewer workers than a server's
// capacity, or exactly a whole free server's: one best-fit server.  Otherwise
// whole free servers, largest capacity first (ties: lower index), each while the
// workers left fill it, then one best-fit server for the rest (fewer than its
// capacity).  With one size: workers // (S // g) whole free servers (lowest
// index first) plus one best-fit server for the remaining workers.
template <class Servers>
inline bool gang_place(const std::vector<i64>& free, const Servers& servers, i64 workers, i64 g,
                       const std::vector<i64>& server_gpus, Placement& out) {
    out.clear();
    const i64 one = one_server(free, servers, workers, g, server_gpus, out);
    if (one >= 0) {
        out.emplace_back(one, workers);
        return true;
    }
    thread_local std::vector<i64> whole;  // scratch kept between calls
    whole.clear();
    bool uniform = true;
    i64 cap0 = -1;
    for (i64 s : servers) {
        const i64 size = server_gpus[static_cast<size_t>(s)];
        if (free[static_cast<size_t>(s)] == size && size >= g) {
            const i64 cap = floordiv(size, g);
            if (cap0 < 0) cap0 = cap;
            else if (cap != cap0) uniform = false;
            whole.push_back(s);
        }
    }
    if (!uniform)
        std::stable_sort(whole.begin(), whole.end(), [&server_gpus, g](i64 a, i64 b) {
            return floordiv(server_gpus[static_cast<size_t>(a)], g) >
                   floordiv(server_gpus[static_cast<size_t>(b)], g);
        });
    i64 left = workers;
    for (i64 s : whole) {
        const i64 cap = floordiv(server_gpus[static_cast<size_t>(s)], g);
        if (left >= cap) {
            out.emplace_back(s, cap);
            left -= cap;
            if (!left) break;
        }
    }
    if (left) {
        const i64 s = one_server(free, servers, left, g, server_gpus, out);
        if (s < 0) {
            out.clear();
            return false;
        }
        out.emplace_back(s, left);
    }
    return true;
}

// placement.py bf_place: best-fit placement of `workers` workers of g GPUs over
// ordered server groups; takes the GPUs from `free`.  Returns false (free
// untouched) when they do not fit.  O(n_servers log n_servers).  `slots` >= 0:
// the caller knows the groups' whole slots (sum of free // g): fewer than `workers`,
// false at once.
//
// Python counts the slots first (false when fewer than `workers`), then per group
// takes one best-fit server for every worker left, or else chunks on the servers
// with the most free GPUs.  Here the groups are walked at once: every group either
// holds the workers left on one server or gives all its slots, so the walk ends
// with workers left exactly when the slots are too few; it then gives back what it
// took.  One scan per group finds the best fit and the servers that hold at least
// one worker (the chunks' candidates, all below the best fit's need when none is
// found).
template <class Groups>
inline bool bf_place(std::vector<i64>& free, const Groups& groups, i64 workers, i64 g,
                     Placement& out, i64 slots = -1) {
  out.clear();
  if (workers <= 0) return true;  // (Python: no slot needed, nothing placed)
  if (slots >= 0 && slots < workers) return false;
  thread_local std::vector<i64> cands;  // scratch kept between calls
  i64 left = workers;
  for (const auto& grp : groups) {
    const i64 need = left * g;
    if (cands.size() < grp.size()) cands.resize(grp.size());
    i64* cand = cands.data();
    size_t n_cand = 0;
    i64 best = -1;
    i64 best_free = i64(1) << 62;
    for (i64 s : grp) {
      const i64 f = free[static_cast<size_t>(s)];
      if (f >= g) {  // (g <= need)
        if (need <= f && f < best_free) {  // best_fit(free, grp, need)
          best = s;
          best_free = f;
          if (f == need) break;
        }
        cand[n_cand++] = s;
      }
    }
    if (best >= 0) {
      place_add(out, best, left);
      free[static_cast<size_t>(best)] -= need;
      return true;
    }
    // servers that hold at least one worker, most free first (ties: lower index)
    std::sort(cand, cand + n_cand, [&free](i64 a, i64 b) {
      const i64 fa = free[static_cast<size_t>(a)], fb = free[static_cast<size_t>(b)];
      if (fa != fb) return fa > fb;
      return a < b;
    });
    for (size_t q = 0; q < n_cand; ++q) {
      const i64 s = cand[q];
      const i64 k = py_min(left, floordiv(free[static_cast<size_t>(s)], g));
      place_add(out, s, k);
      free[static_cast<size_t>(s)] -= k * g;
      left -= k;
      if (!left) return true;
    }
  }
  // too few slots: give back what the walk took
  for (const auto& e : out) free[static_cast<size_t>(e.first)] += e.second * g;
  out.clear();
  return false;
}

// placement.py gang_place_typed: gang_place on the training servers of one GPU
// type, the fastest type for job j that fits it now (ties: type order); every
// training server on a single-type cluster or when types may mix.
inline bool gang_place_typed(const State& st, const std::vector<i64>& free, i64 j, i64 workers,
                             Placement& out) {
    const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
    if (!st.multi_type() || st.config.mix_gpu_types) {
        const auto& servers = st.training_servers;
        if (servers.empty()) {
            out.clear();
            return false;
        }
        return gang_place(free, servers, workers, g, st.server_gpus, out);
    }
    std::vector<i64> types;
    for (i64 t = 0; t < st.n_types(); ++t)
        if (!st.training_by_type[static_cast<size_t>(t)].empty()) types.push_back(t);
    for (i64 t : st.type_order(j, workers, types)) {
        const auto& servers = st.training_by_type[static_cast<size_t>(t)];
        if (gang_place(free, servers, workers, g, st.server_gpus, out))
            return true;
    }
    out.clear();
    return false;
}

// Take a placement's GPUs from a scratch free list (the policies' _take).
inline void take(std::vector<i64>& free, const Placement& place, i64 g) {
    for (const auto& e : place) free[static_cast<size_t>(e.first)] -= e.second * g;
}

}  // namespace sched
}  // namespace aryl
