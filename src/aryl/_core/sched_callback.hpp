// The decisions of a Python policy (aryl.Policy, policy kind P_CALLBACK): what
// its decide step returned, checked against the rules of one pass and turned
// into Plan entries that the compiled apply (sched_plan.hpp) then carries out
// with the engine's accounting.
//
// Header-only C++17, no Python dependency (the binding _sched.cpp reads the
// arrays).  The checks follow the order in which SchedulePlan.apply changes the
// state (preemptions, resizes, starts), on a scratch copy of the pass's free
// GPUs, so an over-commit is reported at the first decision that causes it.
#pragma once

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "sched_plan.hpp"
#include "sched_state.hpp"

namespace aryl {
namespace sched {

// A decision that breaks a rule of the pass (aryl.errors.PolicyError in Python).
struct PolicyDecisionError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// What a Python policy decided, as flat arrays (aryl.Decision.to_arrays):
// placements as CSR (ptr has one entry more than job; entries ptr[i]..ptr[i+1]).
struct DecisionArrays {
    const i64* start_job = nullptr;
    const i64* start_ptr = nullptr;
    const i64* start_server = nullptr;
    const i64* start_workers = nullptr;
    i64 n_starts = 0, n_start_entries = 0;
    const i64* resize_job = nullptr;
    const i64* resize_ptr = nullptr;
    const i64* resize_server = nullptr;
    const i64* resize_workers = nullptr;
    i64 n_resizes = 0, n_resize_entries = 0;
    const i64* preempt_job = nullptr;
    i64 n_preemptions = 0;
};

namespace detail {
// a time in messages (10 significant digits)
inline std::string time_repr(double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.10g", x);
    return buf;
}
inline std::string status_name(int8_t s) {
    switch (s) {
        case PENDING:
            return "not arrived";
        case QUEUED:
            return "queued";
        case RUNNING:
            return "running";
        case DONE:
            return "finished";
        default:
            return "infeasible";
    }
}
}  // namespace detail

// Check `d` against the rules of a pass of `pol` over `st` with context `ctx`
// and append its starts, resizes and preemptions to `plan` (reason
// POLICY_DECISION).  `job_label(j)` names job index j in messages (its job id).
// Throws PolicyDecisionError naming the policy, the pass time, the job and the
// rule:
//   * a preemption or resize of a job that is not running; a start of a job that
//     is not queued; a job listed twice (or resized and preempted);
//   * a placement that is empty, names a server out of range, an inference
//     server not on loan or offered to this pass, a server twice, or < 1 worker;
//   * a size outside the job's worker range under the policy ([min_workers,
//     max_workers] for an elastic job of an elastic policy, else exactly
//     ref_workers);
//   * a placement over several GPU types when the state does not mix them;
//   * more GPUs on a server than it has free at that point of the plan.
// O(decisions + servers).
inline void plan_decision(const Policy& pol, const State& st, const PassContext& ctx,
                          const DecisionArrays& d, Plan& plan,
                          const std::function<std::string(i64)>& job_label) {
    const i64 n = st.n_jobs();
    const i64 ns = st.n_servers();
    const i64 nt = st.n_training();
    auto fail = [&](const std::string& what, i64 j, const std::string& rule) {
        std::string msg = "policy '" + pol.label() + "' at t = " + detail::time_repr(st.now_s) + " s: " + what;
        if (j >= 0 && j < n) msg += " of job " + job_label(j) + " (index " + std::to_string(j) + ")";
        else if (j != -1) msg += " of job index " + std::to_string(j);
        throw PolicyDecisionError(msg + ": " + rule);
    };
    std::vector<i64> scratch(*ctx.free);
    std::vector<uint8_t> usable(static_cast<size_t>(ns), 0);
    for (i64 s = 0; s < nt; ++s) usable[static_cast<size_t>(s)] = 1;
    for (i64 s : ctx.loaned) usable[static_cast<size_t>(s)] = 1;
    std::unordered_set<i64> seen;  // jobs with a decision so far (O(decisions), not O(jobs))
    seen.reserve(static_cast<size_t>(d.n_preemptions + d.n_resizes + d.n_starts));
    auto check_job = [&](const char* what, i64 j, int8_t want) {
        if (j < 0 || j >= n)
            fail(what, j, "no such job (index out of range 0.." + std::to_string(n - 1) + ")");
        const auto u = static_cast<size_t>(j);
        if (!seen.insert(j).second) fail(what, j, "the job already has a decision in this pass");
        const int8_t s = st.status[u];
        if (s != want)
            fail(what, j, std::string("the job is ") + detail::status_name(s) + ", not " +
                              detail::status_name(want));
    };
    auto free_back = [&](i64 j) {
        const auto u = static_cast<size_t>(j);
        const i64 g = st.gpus_per_worker[u];
        for (const auto& e : st.placement[u]) scratch[static_cast<size_t>(e.first)] += e.second * g;
    };
    // check a placement (CSR entries a..b) of job j and take its GPUs from scratch
    auto take_place = [&](const char* what, i64 j, const i64* server, const i64* workers, i64 a,
                          i64 b, Placement& out) {
        const auto u = static_cast<size_t>(j);
        out.clear();
        if (b <= a) fail(what, j, "the placement is empty");
        const i64 g = st.gpus_per_worker[u];
        i64 w = 0;
        i64 type = -1;
        for (i64 q = a; q < b; ++q) {
            const i64 s = server[q], k = workers[q];
            if (s < 0 || s >= ns)
                fail(what, j, "server " + std::to_string(s) + " does not exist (0.." +
                                  std::to_string(ns - 1) + ")");
            if (!usable[static_cast<size_t>(s)])
                fail(what, j, "server " + std::to_string(s) +
                                  " is an inference server neither on loan nor offered to this pass");
            if (k < 1) fail(what, j, std::to_string(k) + " workers on server " + std::to_string(s) + " (at least 1)");
            if (place_has(out, s)) fail(what, j, "server " + std::to_string(s) + " is listed twice");
            const i64 t = st.server_type[static_cast<size_t>(s)];
            if (type >= 0 && t != type && !st.config.mix_gpu_types)
                fail(what, j, "the placement mixes GPU types " + st.gpu_types[static_cast<size_t>(type)] +
                                  " and " + st.gpu_types[static_cast<size_t>(t)] +
                                  " (SchedulerConfig.mix_gpu_types is off)");
            type = t;
            out.emplace_back(s, k);
            w += k;
        }
        const i64 lo = pol.base_workers(st, j);
        const i64 hi = (pol.elastic && st.elastic[u]) ? st.max_workers[u] : st.ref_workers[u];
        if (w < lo || w > hi)
            fail(what, j, std::to_string(w) + " workers outside the job's range [" + std::to_string(lo) +
                              ", " + std::to_string(hi) + "]");
        for (const auto& e : out) {
            const auto su = static_cast<size_t>(e.first);
            if (e.second * g > scratch[su])
                fail(what, j, "over-commits server " + std::to_string(e.first) + ": " +
                                  std::to_string(e.second) + " worker(s) x " + std::to_string(g) +
                                  " GPU(s) > " + std::to_string(scratch[su]) + " GPU(s) free there");
            scratch[su] -= e.second * g;
        }
    };
    for (i64 i = 0; i < d.n_preemptions; ++i) {
        const i64 j = d.preempt_job[i];
        check_job("preemption", j, RUNNING);
        free_back(j);
        plan.preemptions.emplace_back(j, POLICY_DECISION);
    }
    for (i64 i = 0; i < d.n_resizes; ++i) {
        const i64 j = d.resize_job[i];
        check_job("resize", j, RUNNING);
        free_back(j);
    }
    Placement p;
    auto check_ptr = [&](const char* what, const i64* ptr, i64 i, i64 m) {
        if (ptr[i] < 0 || ptr[i] > ptr[i + 1] || ptr[i + 1] > m)
            throw PolicyDecisionError("policy '" + pol.label() + "' at t = " + detail::time_repr(st.now_s) +
                                      " s: " + what + " placements: offsets not ascending within the entries");
    };
    for (i64 i = 0; i < d.n_resizes; ++i) {
        check_ptr("resize", d.resize_ptr, i, d.n_resize_entries);
        take_place("resize", d.resize_job[i], d.resize_server, d.resize_workers, d.resize_ptr[i],
                   d.resize_ptr[i + 1], p);
        plan.resizes.push_back(JobMove{d.resize_job[i], p, POLICY_DECISION});
    }
    for (i64 i = 0; i < d.n_starts; ++i) {
        const i64 j = d.start_job[i];
        check_job("start", j, QUEUED);
        check_ptr("start", d.start_ptr, i, d.n_start_entries);
        take_place("start", j, d.start_server, d.start_workers, d.start_ptr[i], d.start_ptr[i + 1], p);
        plan.starts.push_back(JobMove{j, p, POLICY_DECISION});
    }
}

}  // namespace sched
}  // namespace aryl
