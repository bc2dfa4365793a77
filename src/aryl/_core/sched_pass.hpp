// One scheduling pass: the twin of src/aryl/scheduling/api.py (schedule:
// reclaim, offers, the policy, settle loans) and of kernels.py's
// jobs_in_start_order / reclaim_request / plan_reclaim.
//
// The reclaim kernel is reclaim.hpp's greedy (reclaim policy "aryl", called
// directly); the comparison reclaim policies (random, fewest-jobs, most-idle,
// exact) go through a caller-supplied hook (the binding calls
// aryl.reclaiming.reclaim in Python: numpy's seeded permutation and the exact
// enumeration stay there).
//
// The aryl family (aryl, aryl-no-loan, aryl-no-elastic, elastic-greedy) is
// decided by sched_aryl.hpp's decide_aryl when that header exists; without it
// ARYL_NATIVE is false and the caller must use the Python engine for them.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "reclaim.hpp"
#include "sched_place.hpp"
#include "sched_plan.hpp"
#include "sched_simple.hpp"
#include "sched_state.hpp"

#if __has_include("sched_aryl.hpp")
#include "sched_aryl.hpp"
#define ARYL_SCHED_HAS_ARYL 1
#else
#define ARYL_SCHED_HAS_ARYL 0
#endif

namespace aryl {
namespace sched {

constexpr bool ARYL_NATIVE = ARYL_SCHED_HAS_ARYL != 0;

// Can the native pass decide for this policy?
inline bool policy_native(int kind) { return kind < P_ARYL || kind == P_CALLBACK || ARYL_NATIVE; }

// kernels.py reclaim_request: the loaned servers, the jobs on them (start order)
// and their placements, as the struct of arrays of aryl.reclaiming.ReclaimRequest
// (server ids = server indexes, job ids = job indexes).
struct ReclaimRequestArrays {
    std::vector<i64> server_id, server_gpus;
    std::vector<i64> placement_job, placement_server, placement_workers;
    std::vector<i64> job_id, job_workers, job_gpus_per_worker, job_min_workers;
    std::vector<i64> job_elastic, job_preemptible;
    i64 n_servers = 0;
};

// The comparison reclaim policies: fill `servers` (in the order taken) and
// `preempted` (job indexes) from the request.
using ReclaimHook =
    std::function<void(const ReclaimRequestArrays&, int policy, i64 seed,
                       std::vector<i64>& servers, std::vector<i64>& preempted)>;

// kernels.py jobs_in_start_order for one server: its jobs in running order.
inline void jobs_in_start_order(const State& st, i64 s, std::vector<i64>& out) {
    out.clear();
    for (const auto& e : st.jobs_on[static_cast<size_t>(s)]) out.push_back(e.first);
    std::sort(out.begin(), out.end(), [&st](i64 a, i64 b) {
        return st.run_seq[static_cast<size_t>(a)] < st.run_seq[static_cast<size_t>(b)];
    });
}

// Scratch of reclaim_request / plan_reclaim / reclaim_step, kept between reclaims.
struct ReclaimScratch {
    std::vector<int32_t> job_pos;  // per job: its index in the request's job list, -1 = none
    std::vector<std::pair<i64, i64>> on;  // one server's (run_seq, job), sorted
    std::vector<i64> pl_index, allowed;   // the greedy's placement server positions, all 1
    reclaim::Output out;                  // the greedy's result (its buffers kept)
};

// kernels.py reclaim_request: the loaned servers, the jobs on them (start order)
// and their placements, as the struct of arrays of aryl.reclaiming.ReclaimRequest
// (server ids = server indexes, job ids = job indexes).  Each job's index in the
// job list (first appearance) is kept in sc.job_pos while the request is built
// (reset before returning), and sc.pl_index gets each placement's server position.
inline void reclaim_request(const State& st, i64 n, bool elastic_policy,
                            ReclaimRequestArrays& req, ReclaimScratch& sc) {
    req.server_id.clear();
    req.server_gpus.clear();
    req.placement_job.clear();
    req.placement_server.clear();
    req.placement_workers.clear();
    req.job_id.clear();  // (the other job columns are sized and written below)
    sc.pl_index.clear();
    if (sc.job_pos.size() < static_cast<size_t>(st.n_jobs()))
        sc.job_pos.resize(static_cast<size_t>(st.n_jobs()), -1);
    for (i64 s = st.n_training(); s < st.n_servers(); ++s) {
        const auto su = static_cast<size_t>(s);
        if (st.server_status[su] != LOANED) continue;
        const i64 q = static_cast<i64>(req.server_id.size());
        req.server_id.push_back(s);
        req.server_gpus.push_back(st.server_gpus[su]);
        // jobs_in_start_order: run_seq is unique among running jobs, so sorting the
        // (run_seq, job) pairs gives the same order as sorting by rank
        const Placement& on = st.jobs_on[su];
        sc.on.clear();
        for (const auto& e : on) sc.on.emplace_back(st.run_seq[static_cast<size_t>(e.first)], e.first);
        std::sort(sc.on.begin(), sc.on.end());
        for (const auto& x : sc.on) {
            const i64 j = x.second;
            int32_t& pos = sc.job_pos[static_cast<size_t>(j)];
            if (pos < 0) {
                pos = static_cast<int32_t>(req.job_id.size());
                req.job_id.push_back(j);
            }
            req.placement_job.push_back(pos);
            req.placement_server.push_back(s);
            req.placement_workers.push_back(place_get(on, j));
            sc.pl_index.push_back(q);
        }
    }
    // the job columns (sized once, written by index: no push per value)
    const size_t nj = req.job_id.size();
    req.job_workers.resize(nj);
    req.job_gpus_per_worker.resize(nj);
    req.job_min_workers.resize(nj);
    req.job_elastic.resize(nj);
    req.job_preemptible.assign(nj, 1);
    for (size_t q = 0; q < nj; ++q) {
        const auto u = static_cast<size_t>(req.job_id[q]);
        sc.job_pos[u] = -1;
        const bool el = elastic_policy && st.elastic[u];
        req.job_workers[q] = st.workers[u];
        req.job_gpus_per_worker[q] = st.gpus_per_worker[u];
        req.job_min_workers[q] = el ? st.min_workers[u] : st.workers[u];
        req.job_elastic[q] = el ? 1 : 0;
    }
    req.n_servers = n;
}

// kernels.py plan_reclaim: (servers in the order taken, preempted job indexes)
inline void plan_reclaim(const State& st, i64 n, bool elastic_policy, const ReclaimHook& hook,
                         std::vector<i64>& servers, std::vector<i64>& preempted,
                         ReclaimRequestArrays& req, ReclaimScratch& sc) {
    reclaim_request(st, n, elastic_policy, req, sc);
    servers.clear();
    preempted.clear();
    if (st.config.reclaim_policy != RECLAIM_ARYL) {
        if (!hook)
            throw std::logic_error("reclaim policy other than 'aryl' needs the Python hook");
        hook(req, st.config.reclaim_policy, st.config.seed, servers, preempted);
        return;
    }
    // the server *positions* of the request (sc.pl_index), as aryl.reclaiming passes them
    const i64 m = static_cast<i64>(req.server_id.size());
    sc.allowed.assign(static_cast<size_t>(m), 1);
    reclaim::Input in;
    in.n_servers = m;
    in.server_id = req.server_id.data();
    in.server_gpus = req.server_gpus.data();
    in.server_allowed = sc.allowed.data();
    in.n_placements = static_cast<i64>(sc.pl_index.size());
    in.placement_job = req.placement_job.data();
    in.placement_server = sc.pl_index.data();
    in.placement_workers = req.placement_workers.data();
    in.n_jobs = static_cast<i64>(req.job_id.size());
    in.job_workers = req.job_workers.data();
    in.job_gpus_per_worker = req.job_gpus_per_worker.data();
    in.job_min_workers = req.job_min_workers.data();
    in.job_elastic = req.job_elastic.data();
    in.job_preemptible = req.job_preemptible.data();
    in.n_return = n;
    reclaim::Output& out = sc.out;
    reclaim::greedy(in, out);
    for (i64 s : out.taken) servers.push_back(req.server_id[static_cast<size_t>(s)]);
    for (i64 j : out.preempted) preempted.push_back(req.job_id[static_cast<size_t>(j)]);
}

// Scratch of a pass, kept between passes by the caller (no allocation per pass).
struct PassWorkspace {
    std::vector<i64> free_offered;
    std::vector<i64> servers, preempted, on;
    ReclaimRequestArrays req;
    ReclaimScratch rsc;
    std::vector<int32_t> loan_pos;  // settle: per server, its position in `loaned`, -1 = none
    std::vector<uint8_t> joined;    // settle: per loaned position, a job of the plan goes there
    std::vector<uint8_t> gone;      // settle: per job, the plan moves it (0 again after)
    std::vector<i64> for_base, affected;
    Placement base;
    PassContext ctx;           // this pass's context (its vectors keep their capacity)
    std::vector<i64> offered;  // idle inference servers offered to this pass
    std::vector<i64> held;     // servers on loan before this pass (when some are offered)
    i64 n_idle_loans = 0;      // servers on loan without jobs before this pass (settle)
    bool record_requests = false;
    std::vector<ReclaimRequestArrays> requests;  // the reclaim log (if recorded)
#if ARYL_SCHED_HAS_ARYL
    ArylWorkspace aryl;  // the aryl family's pass scratch
#endif
};

// The policy's decide step, by kind (registry.py + each class's decide).
inline void decide(const Policy& pol, const State& st, const PassContext& ctx, Plan& plan,
                   PassWorkspace& ws) {
    switch (pol.kind) {
        case P_FIFO:
            decide_fifo(pol, st, ctx, plan);
            return;
        case P_FIFO_BACKFILL:
            decide_fifo_backfill(pol, st, ctx, plan);
            return;
        case P_SJF:
            decide_sjf(pol, st, ctx, plan);
            return;
        case P_TIRESIAS:
            decide_tiresias(pol, st, ctx, plan);
            return;
        case P_CALLBACK:  // a Python policy (the binding's callback, sched_callback.hpp checks)
            pol.callback(pol, st, ctx, plan);
            return;
        default:
#if ARYL_SCHED_HAS_ARYL
            decide_aryl(pol, st, ctx, plan, ws.aryl);
            return;
#else
            (void)ws;
            throw std::logic_error(std::string("policy '") + policy_name(pol.kind) +
                                   "' has no native pass in this build (use engine='python')");
#endif
    }
}

// api.py _reclaim: return n loaned servers; jobs there shrink or are preempted.
inline void reclaim_step(const State& st, const Policy& pol, i64 n, Plan& plan,
                         const ReclaimHook& hook, PassWorkspace& ws) {
    plan_reclaim(st, n, pol.elastic, hook, ws.servers, ws.preempted, ws.req, ws.rsc);
    plan.reclaim_shortfall = n - static_cast<i64>(ws.servers.size());
    std::vector<i64>& affected = ws.affected;
    affected.clear();
    for (i64 s : ws.servers) {
        jobs_in_start_order(st, s, ws.on);
        for (i64 j : ws.on)
            if (std::find(affected.begin(), affected.end(), j) == affected.end())
                affected.push_back(j);
    }
    for (i64 j : affected) {
        const Placement& place = st.placement[static_cast<size_t>(j)];
        Placement left;
        left.reserve(place.size());  // (one allocation: at most every entry stays)
        for (const auto& e : place)
            if (std::find(ws.servers.begin(), ws.servers.end(), e.first) == ws.servers.end())
                left.push_back(e);
        const i64 w = place_workers(left);
        const bool pre =
            std::find(ws.preempted.begin(), ws.preempted.end(), j) != ws.preempted.end();
        if (pre || w < pol.base_workers(st, j))
            plan.reclaim_actions.push_back(ReclaimMove{j, true, Placement(), RECLAIM_PREEMPT});
        else
            plan.reclaim_actions.push_back(ReclaimMove{j, false, std::move(left), RECLAIM_SCALE_IN});
    }
    plan.reclaimed_servers.insert(plan.reclaimed_servers.end(), ws.servers.begin(),
                                  ws.servers.end());
}

// api.py _settle: borrow the offered servers the plan uses; return loans left empty.
// `loaned` holds the servers on loan (status LOANED) and the offered ones (IDLE,
// so without jobs: jobs run on training and loaned servers only): "not offered"
// is "status LOANED".  When no entry of the plan is on an inference server (index
// >= n_training, as every loaned or offered one is), no job joins or leaves a
// loaned server: no offered server is borrowed and the loaned ones without jobs
// go back.  Otherwise only whether each loaned server holds a job after the plan
// matters (Python builds the job sets of the servers the plan touches): a job of
// it now (jobs_on: j is there exactly when the server is in j's placement) that the
// plan neither preempts nor resizes (ws.gone marks those: looked up on the loaned
// servers' job lists, no walk of the moved jobs' placements), or any job a resize
// or start puts there (ws.joined, by position in `loaned`).  A server's position is
// ws.loan_pos[s], filled here, -1 again after.
// ws.n_idle_loans: the servers on loan without jobs now (schedule counts them).
inline void settle(const State& st, const Policy& pol, Plan& plan, const std::vector<i64>& loaned,
                   const std::vector<i64>& offered, PassWorkspace& ws) {
    const i64 nt = st.n_training();
    auto on_inference = [nt](const Placement& p) {
        for (const auto& e : p)
            if (e.first >= nt) return true;
        return false;
    };
    bool touched = false;
    for (const auto& p : plan.preemptions)
        if (!touched) touched = on_inference(st.placement[static_cast<size_t>(p.first)]);
    for (const auto& r : plan.resizes)
        if (!touched)
            touched = on_inference(st.placement[static_cast<size_t>(r.job)]) || on_inference(r.place);
    for (const auto& s : plan.starts)
        if (!touched) touched = on_inference(s.place);
    if (!touched) {
        if (ws.n_idle_loans == 0) return;
        for (i64 s : loaned) {
            const auto su = static_cast<size_t>(s);
            if (st.server_status[su] == LOANED && st.jobs_on[su].empty())
                plan.returned_servers.emplace_back(s, IDLE_LOAN);
        }
        return;
    }
    const size_t nl = loaned.size();
    std::vector<int32_t>& pos = ws.loan_pos;
    if (pos.size() != st.server_gpus.size()) pos.assign(st.server_gpus.size(), -1);
    for (size_t q = 0; q < nl; ++q) pos[static_cast<size_t>(loaned[q])] = static_cast<int32_t>(q);
    std::vector<uint8_t>& joined = ws.joined;
    joined.assign(nl, 0);
    std::vector<uint8_t>& gone = ws.gone;  // per job: jobs_after(s).discard(j) where it is
    if (gone.size() < static_cast<size_t>(st.n_jobs())) gone.resize(static_cast<size_t>(st.n_jobs()), 0);
    auto join = [&](const Placement& p) {  // jobs_after(s).add(j) on each loaned server
        bool any = false;
        for (const auto& e : p) {
            const int32_t q = pos[static_cast<size_t>(e.first)];
            if (q >= 0) {
                joined[static_cast<size_t>(q)] = 1;
                any = true;
            }
        }
        return any;
    };
    for (const auto& p : plan.preemptions) gone[static_cast<size_t>(p.first)] = 1;
    for (const auto& r : plan.resizes) gone[static_cast<size_t>(r.job)] = 1;
    for (const auto& r : plan.resizes) join(r.place);
    std::vector<i64>& for_base = ws.for_base;
    for_base.clear();
    Placement& base = ws.base;
    for (const auto& s : plan.starts)
        if (join(s.place)) {
            split_placement(s.place, pol.base_workers(st, s.job), &base, nullptr);
            for (const auto& e : base)
                if (pos[static_cast<size_t>(e.first)] >= 0) for_base.push_back(e.first);
        }
    // busy(s) of a loaned server by its position q: a job joins, or one there stays
    auto busy_at = [&](size_t q) -> bool {
        if (joined[q]) return true;
        for (const auto& e : st.jobs_on[static_cast<size_t>(loaned[q])])
            if (!gone[static_cast<size_t>(e.first)]) return true;
        return false;
    };
    for (i64 s : offered)  // (every offered server is in `loaned`)
        if (busy_at(static_cast<size_t>(pos[static_cast<size_t>(s)]))) {
            const bool fb = std::find(for_base.begin(), for_base.end(), s) != for_base.end();
            plan.borrowed_servers.emplace_back(s, fb ? LOAN_FOR_BASE : LOAN_FOR_EXTRA);
        }
    for (size_t q = 0; q < nl; ++q) {
        const i64 s = loaned[q];
        pos[static_cast<size_t>(s)] = -1;
        if (st.server_status[static_cast<size_t>(s)] == LOANED && !busy_at(q))
            plan.returned_servers.emplace_back(s, IDLE_LOAN);
    }
    for (const auto& p : plan.preemptions) gone[static_cast<size_t>(p.first)] = 0;
    for (const auto& r : plan.resizes) gone[static_cast<size_t>(r.job)] = 0;
}

// api.py time_after: the first double t with t - origin >= span
inline double time_after(double origin, double span) {
    double t = origin + span;
    while (t - origin < span) t = std::nextafter(t, kInf);
    return t;
}

// Policy.next_wakeup_s of each policy (the policy's own timed rules)
inline double policy_wakeup(const Policy& pol, const State& st, const Plan& plan) {
    switch (pol.kind) {
        case P_TIRESIAS:
            return tiresias_wakeup(pol, st, plan);
        default:
            return kInf;
    }
}

// api.py next_wakeup_s: st is the pass's view (after its reclaim step)
inline double next_wakeup(const State& st, const Policy& pol, const Plan& plan) {
    const Config& cfg = st.config;
    double t = policy_wakeup(pol, st, plan);
    t = py_min(t, st.next_reclaim_deadline_s());
    if (pol.loans && st.now_s - st.last_reclaim_s < cfg.loan_cooldown_s) {
        const i64 loanable = st.not_loaned() + static_cast<i64>(plan.returned_servers.size()) -
                             st.servers_needed - cfg.loan_reserve_servers;
        if (loanable > 0) t = py_min(t, time_after(st.last_reclaim_s, cfg.loan_cooldown_s));
    }
    return t;
}

// api.py schedule, applied in place for its reclaim part: fills `plan` (cleared
// here) with the decisions of one pass at st.now_s.  Unlike the Python function,
// which applies the reclaim to a copy, the reclaim part of the plan (steps 1-2
// of SchedulePlan.apply and set_serving) is applied to `st` here with `obs`;
// the caller applies the rest with apply_rest(st, plan, obs, validate,
// !plan.reclaimed_servers.empty()).  Applying the whole plan to the state before
// the pass gives the same state: set_serving is a function of the loans and the
// demand, and no server is offered in a pass that reclaims (nothing is loanable
// after a reclaim).
template <class Obs>
void schedule(State& st, const Policy& pol, Plan& plan, Obs* obs, const ReclaimHook& hook,
              PassWorkspace& ws) {
    plan.clear(st.now_s);
    plan.memo_left = st.memo_left;
    plan.memo_loaned = st.memo_loaned;
    // 1. reclaim
    if (st.n_loaned) {
        const i64 n = st.reclaim_due(st.now_s);
        if (n > 0) {
            if (ws.record_requests) {
                ReclaimRequestArrays r;
                reclaim_request(st, n, pol.elastic, r, ws.rsc);
                ws.requests.push_back(std::move(r));
            }
            reclaim_step(st, pol, n, plan, hook, ws);
            apply_reclaim(st, plan, obs, false);
            st.set_serving();
        }
        // loaned servers without training work that the inference side has asked
        // for (due later) go back now instead of taking new work
        i64 asked = st.reclaim_asked();
        if (asked > 0) {
            bool any = false;
            for (i64 s = st.n_training(); s < st.n_servers() && asked > 0; ++s) {
                const auto su = static_cast<size_t>(s);
                if (st.server_status[su] != LOANED || !st.jobs_on[su].empty()) continue;
                st.give_back(s, true, st.now_s);
                if (obs) obs->server_returned(s, RECLAIMED);
                plan.reclaimed_servers.push_back(s);
                --asked;
                any = true;
            }
            if (any) st.set_serving();
        }
    }
    // 2. offer idle inference servers
    const Config& cfg = st.config;
    std::vector<i64>& offered = ws.offered;
    offered.clear();
    if (pol.loans) {
        i64 loanable = st.not_loaned() - st.servers_needed - cfg.loan_reserve_servers;
        const bool cooling = st.now_s - st.last_reclaim_s < cfg.loan_cooldown_s;
        if (loanable > 0 && !cooling && pol.wants_loan(st)) {
            // the highest idle ones, at most loanable (written into a list of that
            // size at most, then cut and turned ascending)
            offered.resize(static_cast<size_t>(py_min(loanable, st.n_servers() - st.n_training())));
            size_t k = 0;
            for (i64 s = st.n_servers() - 1; s >= st.n_training() && k < offered.size(); --s)
                if (st.server_status[static_cast<size_t>(s)] == IDLE) offered[k++] = s;
            offered.resize(k);
            std::reverse(offered.begin(), offered.end());
        }
    }
    PassContext& ctx = ws.ctx;
    // st.loaned_servers(): the LOANED servers, ascending (kept by the state); with
    // offered servers, sorted(loaned + offered) is the merge of the two lists
    std::vector<i64>& loaned = ctx.loaned;
    std::vector<i64>& held = offered.empty() ? loaned : ws.held;
    ws.n_idle_loans = 0;  // (for settle) loaned servers without jobs
    if (st.n_loaned) {
        held = st.on_loan;
        for (i64 s : held)
            if (st.jobs_on[static_cast<size_t>(s)].empty()) ++ws.n_idle_loans;
    } else {
        held.clear();
    }
    // training GPUs + GPUs of every loaned server (st.loaned_gpus) + of every offered one
    i64 capacity = st.training_gpus + st.loaned_gpus;
    if (!offered.empty()) {
        ws.free_offered = st.free;
        for (i64 s : offered) {
            const i64 gpus = st.server_gpus[static_cast<size_t>(s)];
            ws.free_offered[static_cast<size_t>(s)] = gpus;
            capacity += gpus;
        }
        loaned.resize(held.size() + offered.size());
        std::merge(held.begin(), held.end(), offered.begin(), offered.end(), loaned.begin());
        ctx.free = &ws.free_offered;
        ctx.held = &held;
    } else {
        ctx.free = &st.free;
        ctx.held = nullptr;
    }
    ctx.capacity_gpus = capacity;
    const bool keep_all = pol.loans && !pol.return_idle_loans;
    ctx.offered.clear();
    if (keep_all && !offered.empty()) {
        for (auto it = offered.rbegin(); it != offered.rend(); ++it)
            plan.borrowed_servers.emplace_back(*it, LOAN_KEPT);
    } else {
        ctx.offered.assign(offered.begin(), offered.end());
    }
    // 3. the policy
    decide(pol, st, ctx, plan, ws);
    // 4. settle loans
    if (pol.loans && pol.return_idle_loans && !loaned.empty())
        settle(st, pol, plan, loaned, offered, ws);
    // 5. when a timed rule could change a decision
    plan.next_wakeup_s = next_wakeup(st, pol, plan);
}

}  // namespace sched
}  // namespace aryl
