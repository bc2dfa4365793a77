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
// the caller knows the groups' whole slots (sum of free // g), not counted here.
template <class Groups>
inline bool bf_place(std::vector<i64>& free, const Groups& groups, i64 workers, i64 g,
                     Placement& out, i64 slots = -1) {
    out.clear();
    // the usual case first: one server of the first group holds every worker (then
    // they fit, and the loop below would take that server at once)
    const bool usual = workers > 0 && g > 0 && !groups.empty();
    const i64 first = usual ? best_fit(free, *groups.begin(), workers * g) : -1;
    if (first >= 0) {
        out.emplace_back(first, workers);
        free[static_cast<size_t>(first)] -= workers * g;
        return true;
    }
    // enough whole slots? (only the comparison matters: stop counting once it holds)
    i64 avail = slots;
    if (avail < 0) {
        avail = 0;
        for (const auto& grp : groups) {
            for (i64 s : grp) {
                avail += floordiv(free[static_cast<size_t>(s)], g);
                if (avail >= workers) break;
            }
            if (avail >= workers) break;
        }
    }
    if (avail < workers) return false;
    i64 left = workers;
    thread_local std::vector<i64> cands;  // scratch kept between calls
    bool first_group = true;  // (its best fit for every worker is known: none)
    for (const auto& grp : groups) {
        if (!left) break;
        const i64 s = first_group && usual ? -1 : best_fit(free, grp, left * g);
        first_group = false;
        if (s >= 0) {
            place_add(out, s, left);
            free[static_cast<size_t>(s)] -= left * g;
            left = 0;
            break;
        }
        // servers that hold at least one worker, most free first (ties: lower index)
        cands.clear();
        for (i64 x : grp)
            if (free[static_cast<size_t>(x)] >= g) cands.push_back(x);
        std::sort(cands.begin(), cands.end(), [&free](i64 a, i64 b) {
            const i64 fa = free[static_cast<size_t>(a)], fb = free[static_cast<size_t>(b)];
            if (fa != fb) return fa > fb;
            return a < b;
        });
        for (i64 s : cands) {
            const i64 k = py_min(left, floordiv(free[static_cast<size_t>(s)], g));
            place_add(out, s, k);
            free[static_cast<size_t>(s)] -= k * g;
            left -= k;
            if (!left) break;
        }
    }
    if (left != 0) throw std::logic_error("bf_place: workers left after the capacity check");
    return true;
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
