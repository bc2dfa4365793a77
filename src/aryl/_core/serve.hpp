// First-come-first-served request queue on a GPU count that varies over time.
//
// Header-only C++17, no Python.  The algorithm, its tie rules and its results
// are those of the pure-Python twin aryl/_reference/serving.py (fcfs_starts):
// requests start in arrival order, each at the first instant s not before its
// arrival nor the previous start at which fewer requests are in service than
// the capacity at s; a request in service is never interrupted; a request
// ending at s frees its GPU at s; a capacity step at s holds from s.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

namespace aryl {
namespace serve {

inline void fcfs_starts(int64_t n, const double* arrival, const double* service, int64_t m,
                        const double* cap_t, const int64_t* cap_v, double* out) {
    const double inf = std::numeric_limits<double>::infinity();
    std::priority_queue<double, std::vector<double>, std::greater<double>> heap;
    int64_t k = 0;
    double last = -inf;
    for (int64_t i = 0; i < n; ++i) {
        double s = arrival[i] > last ? arrival[i] : last;
        for (;;) {
            while (k + 1 < m && cap_t[k + 1] <= s) ++k;
            while (!heap.empty() && heap.top() <= s) heap.pop();
            if (static_cast<int64_t>(heap.size()) < cap_v[k]) {
                heap.push(s + service[i]);
                break;
            }
            double nxt = heap.empty() ? inf : heap.top();
            if (k + 1 < m && cap_t[k + 1] < nxt) nxt = cap_t[k + 1];
            s = nxt;
            if (s == inf) break;
        }
        out[i] = s;
        last = s;
        if (s == inf) {
            for (int64_t j = i; j < n; ++j) out[j] = inf;
            return;
        }
    }
}

}  // namespace serve
}  // namespace aryl
