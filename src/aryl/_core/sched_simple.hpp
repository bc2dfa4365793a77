// The simple policies and the SJF base phase: the twins of
// src/aryl/scheduling/fifo.py, fifo_backfill.py, sjf.py (SjfPass, SjfPolicy)
// and tiresias.py.
//
// SjfPass is also phase 1 of the aryl family (sched_aryl.hpp): derive from it
// and override capacity_view / place / take, exactly as aryl.py's ArylPass
// overrides sjf.py's SjfPass.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "sched_place.hpp"
#include "sched_plan.hpp"
#include "sched_state.hpp"

namespace aryl {
namespace sched {

// sjf.py SjfPass: one base phase over a state.  Its scratch lists are the
// caller's (`free_buf`, `started_buf`: kept from one pass to the next, no
// allocation once grown).
class SjfPass {
public:
    SjfPass(const Policy& pol, const State& st, const PassContext& ctx,
            std::vector<i64>& free_buf, std::vector<i64>& started_buf)
        : pol(pol), st(st), ctx(ctx), started(started_buf), free(free_buf), bound(pol.bound(st)) {
        started.clear();
    }
    virtual ~SjfPass() = default;

    // hooks (aryl.py ArylPass overrides them) --------------------------------
    // SjfPass.capacity_view: fills `free` (the scratch free-GPU list) and returns
    // the total free GPUs usable by base demands.
    virtual i64 capacity_view(std::vector<i64>& free_out) {
        free_out = *ctx.free;
        i64 avail = 0;
        for (i64 s : st.training_servers) avail += free_out[static_cast<size_t>(s)];
        return avail;
    }
    // SjfPass.place: false = None
    virtual bool place(std::vector<i64>& free_io, i64 j, Placement& out) {
        return gang_place_typed(st, free_io, j, pol.base_workers(st, j), out);
    }
    // SjfPass.take
    virtual void take(std::vector<i64>& free_io, const Placement& p, i64 j) {
        sched::take(free_io, p, st.gpus_per_worker[static_cast<size_t>(j)]);
    }

    // SjfPass.base_phase: fills plan.starts; leaves the scratch in `free` and
    // returns the free GPUs left (Python returns both).
    i64 base_phase(Plan& plan) {
        i64 avail = capacity_view(free);
        const double now = st.now_s;
        bool blocked = false;
        // each start takes p over, and the next placement gets a kept buffer
        Placement p = plan.take_place();
        // 1. starving jobs, oldest first; the first that does not fit blocks.
        for (const auto& e : st.sorted_queue(Q_WAIT_ORIGIN)) {
            const double o = e.first;
            const i64 j = e.second;
            if (now - o < bound) break;  // every job behind is younger: none starving
            const i64 need = pol.base_workers(st, j) * st.gpus_per_worker[static_cast<size_t>(j)];
            const bool ok = need <= avail && place(free, j, p);
            if (!ok) {
                blocked = true;
                break;
            }
            take(free, p, j);
            avail -= need;
            started.push_back(j);
            plan.starts.push_back(JobMove{j, std::move(p), STARVATION_GUARD});
            p = plan.take_place();
        }
        if (blocked) {
            plan.give_place(std::move(p));
            return avail;
        }
        std::sort(started.begin(), started.end());
        const size_t n_starving = started.size();
        // 2. SJF order with backfill
        std::vector<std::pair<i64, i64>> failed;  // gpus per worker -> smallest failed count
        bool first = true;
        for (const auto& e : st.sorted_queue(pol.sjf_queue_key())) {
            if (avail <= 0) break;
            const i64 j = e.second;
            if (n_starving && std::binary_search(started.begin(),
                                                 started.begin() + static_cast<std::ptrdiff_t>(n_starving), j))
                continue;
            const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
            const i64 w = pol.base_workers(st, j);
            i64* f = nullptr;
            for (auto& fe : failed)
                if (fe.first == g) f = &fe.second;
            if (w * g > avail || (f != nullptr && w >= *f)) {
                first = false;
                continue;
            }
            if (!place(free, j, p)) {
                if (f == nullptr) failed.emplace_back(g, w);
                else *f = py_min(*f, w);
                first = false;
                continue;
            }
            take(free, p, j);
            avail -= w * g;
            started.push_back(j);
            plan.starts.push_back(JobMove{j, std::move(p), first ? SJF_ORDER : BACKFILL});
            p = plan.take_place();
        }
        plan.give_place(std::move(p));
        return avail;
    }

    // Was job j started by this pass's phase 1 (Python: j in self.started)?
    bool is_started(i64 j) const {
        return std::find(started.begin(), started.end(), j) != started.end();
    }

    const Policy& pol;
    const State& st;
    const PassContext& ctx;
    std::vector<i64>& started;  // jobs started by base_phase (starving ones first, sorted)
    std::vector<i64>& free;     // the scratch free list of base_phase (capacity_view fills it)
    double bound;
};

// fifo.py FifoPolicy.decide
inline void decide_fifo(const Policy&, const State& st, const PassContext& ctx, Plan& plan) {
    if (st.queued.empty()) return;
    const QueueIndex& queue = st.sorted_queue(Q_ARRIVAL);
    const std::vector<i64>& free = *ctx.free;
    i64 avail = st.training_gpus - (st.busy - st.busy_loaned);  // training servers' free
    std::vector<i64> scratch;
    bool have_scratch = false;
    Placement p;
    for (const auto& e : queue) {
        const i64 j = e.second;
        const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
        const i64 w = st.ref_workers[static_cast<size_t>(j)];
        if (w * g > avail) break;
        if (!gang_place_typed(st, have_scratch ? scratch : free, j, w, p)) break;
        if (!have_scratch) {
            scratch = free;
            have_scratch = true;
        }
        take(scratch, p, g);
        avail -= w * g;
        plan.starts.push_back(JobMove{j, p, FIFO_HEAD});
    }
}

// fifo_backfill.py _gpus_on: GPUs of a placement on the servers of `pool` (empty:
// every server, or the first nt when nt >= 0).
inline i64 fifo_backfill_gpus_on(const Placement& place, const std::vector<char>& pool, i64 g,
                                 i64 nt) {
    i64 w = 0;
    for (const auto& e : place)
        if (pool.empty() ? (nt < 0 || e.first < nt) : pool[static_cast<size_t>(e.first)] != 0)
            w += e.second;
    return w * g;
}

// fifo_backfill.py FifoBackfillPolicy._pool: per server, whether it is a training
// server that holds a worker of g GPUs; empty when that is every training server.
inline std::vector<char> fifo_backfill_pool(const State& st, i64 g) {
    bool all = true;
    for (i64 s : st.training_servers)
        if (st.server_gpus[static_cast<size_t>(s)] < g) all = false;
    std::vector<char> pool;
    if (all) return pool;
    pool.assign(st.server_gpus.size(), 0);
    for (i64 s : st.training_servers)
        pool[static_cast<size_t>(s)] = st.server_gpus[static_cast<size_t>(s)] >= g ? 1 : 0;
    return pool;
}

// fifo_backfill.py FifoBackfillPolicy._reservation: shadow time and extra GPUs.
inline std::pair<double, i64> fifo_backfill_reservation(const State& st, const Plan& plan,
                                                        i64 avail, const std::vector<i64>& free,
                                                        const std::vector<char>& pool,
                                                        i64 need) {
    const double now = st.now_s;
    const i64 nt = st.n_training();  // training servers have the lowest indexes
    i64 have = avail;
    if (!pool.empty()) {
        have = 0;
        for (i64 s : st.training_servers)
            if (pool[static_cast<size_t>(s)]) have += free[static_cast<size_t>(s)];
    }
    std::vector<std::pair<double, i64>> ends;
    for (i64 r : st.running) {
        const auto u = static_cast<size_t>(r);
        // the GPUs it frees on training servers (none on a loaned server counts)
        const i64 gpus = fifo_backfill_gpus_on(st.placement[u], pool, st.gpus_per_worker[u], nt);
        if (!gpus) continue;
        const double sp = st.speed[u];
        const double left = st.remaining_at(r, now);
        const double t_end = py_max(st.progress_at_s[u], now) + (sp > 0 ? left / sp : kInf);
        ends.emplace_back(t_end, gpus);
    }
    for (const auto& s : plan.starts) {
        const auto u = static_cast<size_t>(s.job);
        const i64 gpus = fifo_backfill_gpus_on(s.place, pool, st.gpus_per_worker[u], nt);
        if (gpus) ends.emplace_back(now + st.remaining_s[u], gpus);
    }
    std::sort(ends.begin(), ends.end());
    for (const auto& e : ends) {
        have += e.second;
        if (have >= need) return {e.first, have - need};
    }
    return {kInf, 0};
}

// fifo_backfill.py FifoBackfillPolicy.decide
inline void decide_fifo_backfill(const Policy&, const State& st, const PassContext& ctx,
                                 Plan& plan) {
    if (st.queued.empty()) return;
    const QueueIndex& queue = st.sorted_queue(Q_ARRIVAL);
    std::vector<i64> free = *ctx.free;
    i64 avail = st.training_gpus - (st.busy - st.busy_loaned);  // training servers' free
    const double now = st.now_s;
    bool have_head = false;
    std::vector<char> pool;
    double shadow = kInf;
    i64 extra = 0;
    Placement p;
    for (const auto& e : queue) {
        const i64 j = e.second;
        const auto u = static_cast<size_t>(j);
        const i64 g = st.gpus_per_worker[u];
        const i64 w = st.ref_workers[u];
        const i64 need = w * g;
        if (!have_head) {
            if (need <= avail && gang_place_typed(st, free, j, w, p)) {
                take(free, p, g);
                avail -= need;
                plan.starts.push_back(JobMove{j, p, FIFO_HEAD});
                continue;
            }
            have_head = true;
            pool = fifo_backfill_pool(st, g);
            const auto res = fifo_backfill_reservation(st, plan, avail, free, pool, need);
            shadow = res.first;
            extra = res.second;
            continue;
        }
        if (need > avail) continue;
        const double ends = now + st.remaining_s[u];
        const bool fits_before = ends <= shadow;
        if (!fits_before && need > extra && pool.empty()) continue;
        if (!gang_place_typed(st, free, j, w, p)) continue;
        if (!fits_before) {
            const i64 used = fifo_backfill_gpus_on(p, pool, g, -1);
            if (used > extra) continue;
            extra -= used;
        }
        take(free, p, g);
        avail -= need;
        plan.starts.push_back(JobMove{j, p, BACKFILL});
    }
}

// sjf.py SjfPolicy.decide
inline void decide_sjf(const Policy& pol, const State& st, const PassContext& ctx, Plan& plan) {
    if (st.queued.empty()) return;
    std::vector<i64> free, started;
    SjfPass pass(pol, st, ctx, free, started);
    pass.base_phase(plan);
}

// tiresias.py TiresiasPolicy.level: bisect_right(thresholds, gpu_s)
inline i64 las_level(const Policy& pol, double gpu_s) {
    const auto& th = pol.las_thresholds;
    return static_cast<i64>(std::upper_bound(th.begin(), th.end(), gpu_s) - th.begin());
}

// tiresias.py TiresiasPolicy._preempt_for
inline void tiresias_preempt_for(const Policy& pol, const State& st, Plan& plan,
                                 const std::vector<i64>& free, double lv, i64 j) {
    const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
    const i64 w = pol.base_workers(st, j);
    const i64 need = w * g;
    std::vector<std::pair<i64, i64>> victims;  // (-level, -job)
    const double now = st.now_s;
    std::vector<i64> started;
    for (const auto& s : plan.starts) started.push_back(s.job);
    std::sort(started.begin(), started.end());
    for (i64 r : st.running) {
        if (std::binary_search(started.begin(), started.end(), r)) continue;
        const i64 rl = las_level(pol, st.attained_at(r, now));
        if (static_cast<double>(rl) > lv) victims.emplace_back(-rl, -r);
    }
    if (victims.empty()) return;
    std::sort(victims.begin(), victims.end());
    std::vector<i64> scratch = free;
    i64 avail = 0;
    for (i64 s : st.training_servers) avail += scratch[static_cast<size_t>(s)];
    std::vector<i64> chosen;
    Placement p;
    for (const auto& v : victims) {
        const i64 r = -v.second;
        const auto ru = static_cast<size_t>(r);
        const i64 gr = st.gpus_per_worker[ru];
        for (const auto& e : st.placement[ru]) scratch[static_cast<size_t>(e.first)] += e.second * gr;
        avail += st.workers[ru] * gr;
        chosen.push_back(r);
        if (avail >= need && gang_place_typed(st, scratch, j, w, p)) {
            for (i64 r2 : chosen) plan.preemptions.emplace_back(r2, LAS_PREEMPT);
            plan.starts.push_back(JobMove{j, p, LAS_PRIORITY});
            return;
        }
    }
}

// tiresias.py TiresiasPolicy._crossing
inline double tiresias_crossing(const Policy& pol, double a0, double t0, i64 rate, double now,
                                i64 lv_min) {
    const auto& th = pol.las_thresholds;
    const double r = static_cast<double>(rate);
    const i64 k = py_max(las_level(pol, a0 + r * (now - t0)), lv_min);
    if (k >= static_cast<i64>(th.size()) || rate <= 0) return kInf;
    const double target = th[static_cast<size_t>(k)];
    double t = t0 + (target - a0) / r;
    while (a0 + r * (t - t0) < target) t = std::nextafter(t, kInf);
    return t;
}

// tiresias.py TiresiasPolicy.next_wakeup_s
inline double tiresias_wakeup(const Policy& pol, const State& st, const Plan& plan) {
    const double now = st.now_s;
    std::vector<i64> started, preempted;
    for (const auto& s : plan.starts) started.push_back(s.job);
    for (const auto& p : plan.preemptions) preempted.push_back(p.first);
    std::sort(started.begin(), started.end());
    std::sort(preempted.begin(), preempted.end());
    auto has = [](const std::vector<i64>& v, i64 j) { return std::binary_search(v.begin(), v.end(), j); };
    i64 lv_min = static_cast<i64>(pol.las_thresholds.size());
    for (i64 j : st.queued)
        if (!has(started, j))
            lv_min = py_min(lv_min, las_level(pol, st.attained_gpu_s[static_cast<size_t>(j)]));
    for (i64 j : preempted) lv_min = py_min(lv_min, las_level(pol, st.attained_at(j, now)));
    double t = kInf;
    if (lv_min >= static_cast<i64>(pol.las_thresholds.size())) return t;
    for (i64 r : st.running) {
        const auto u = static_cast<size_t>(r);
        if (!has(preempted, r) && !has(started, r))
            t = py_min(t, tiresias_crossing(pol, st.attained_gpu_s[u], st.attained_at_s[u],
                                            st.workers[u] * st.gpus_per_worker[u], now, lv_min));
    }
    for (const auto& s : plan.starts) {
        const auto u = static_cast<size_t>(s.job);
        t = py_min(t, tiresias_crossing(pol, st.attained_gpu_s[u], now,
                                        place_workers(s.place) * st.gpus_per_worker[u], now,
                                        lv_min));
    }
    return t;
}

// tiresias.py TiresiasPolicy.decide
inline void decide_tiresias(const Policy& pol, const State& st, const PassContext& ctx,
                            Plan& plan) {
    if (st.queued.empty()) return;
    const QueueIndex& lst = st.sorted_queue(Q_LAS, &pol.las_thresholds);
    std::vector<i64> free = *ctx.free;
    i64 avail = 0;
    for (i64 s : st.training_servers) avail += free[static_cast<size_t>(s)];
    bool blocked = false;
    double blocked_lv = 0.0;
    i64 blocked_j = -1;
    Placement p;
    for (const auto& e : lst) {
        const i64 j = e.second;
        const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
        const i64 w = pol.base_workers(st, j);
        const bool ok = w * g <= avail && gang_place_typed(st, free, j, w, p);
        if (!ok) {
            if (!blocked) {
                blocked = true;
                blocked_lv = e.first;
                blocked_j = j;
            }
            if (avail == 0) break;
            continue;
        }
        take(free, p, g);
        avail -= w * g;
        plan.starts.push_back(JobMove{j, p, blocked ? BACKFILL : LAS_PRIORITY});
    }
    if (blocked) tiresias_preempt_for(pol, st, plan, free, blocked_lv, blocked_j);
}

}  // namespace sched
}  // namespace aryl
