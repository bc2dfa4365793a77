// What one scheduling pass decides, and the policy interface: the twin of
// src/aryl/scheduling/plan.py (SchedulePlan, Reason, apply) and
// scheduling/policy.py (PassContext, Policy).
//
// Header-only C++17, no Python dependency.  See sched_state.hpp for the
// bit-identity rules.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sched_state.hpp"

namespace aryl {
namespace sched {

// plan.py Reason (same numeric values)
enum Reason : int {
    FIFO_HEAD = 1,
    SJF_ORDER = 2,
    BACKFILL = 3,
    STARVATION_GUARD = 4,
    LAS_PRIORITY = 5,
    LAS_PREEMPT = 6,
    MCKP_SCALE_OUT = 7,
    MCKP_SCALE_IN = 8,
    MCKP_MOVE = 9,
    GREEDY_SCALE_OUT = 10,
    GREEDY_SCALE_IN = 11,
    RECLAIM_PREEMPT = 12,
    RECLAIM_SCALE_IN = 13,
    NEVER_FITS = 14,
    LOAN_FOR_BASE = 15,
    LOAN_FOR_EXTRA = 16,
    LOAN_KEPT = 17,
    RECLAIMED = 18,
    IDLE_LOAN = 19,
    POLICY_DECISION = 20,  // a start, resize or preemption of a Python callback policy
};

// (job, placement, reason): a start or a resize
struct JobMove {
    i64 job;
    Placement place;
    int reason;
};
// (job, placement or None, reason): a reclaim action (preempt = Python's None)
struct ReclaimMove {
    i64 job;
    bool preempt;
    Placement place;
    int reason;
};

// plan.py SchedulePlan
struct Plan {
    double now_s = 0.0;
    std::vector<ReclaimMove> reclaim_actions;
    std::vector<i64> reclaimed_servers;
    i64 reclaim_shortfall = 0;
    std::vector<std::pair<i64, int>> borrowed_servers;  // (server, reason)
    std::vector<std::pair<i64, int>> preemptions;       // (job, reason)
    std::vector<JobMove> resizes;
    std::vector<JobMove> starts;
    std::vector<std::pair<i64, int>> returned_servers;  // (server, reason)
    i64 memo_left = -1, memo_loaned = -1;               // elastic_memo
    i64 n_extra_repairs = 0;
    double next_wakeup_s = kInf;  // when a timed rule could change a decision (plan.py)
    // the placement buffers of the resizes and starts of the last plan (clear()
    // keeps up to kMaxSpare of them): take_place() hands one out for a new move (no
    // allocation once grown).  The cap bounds the list when a policy builds its moves
    // without take_place (fifo, a Python callback).
    static constexpr size_t kMaxSpare = 64;
    std::vector<Placement> spare;

    void clear(double now) {
        now_s = now;
        reclaim_actions.clear();
        reclaimed_servers.clear();
        reclaim_shortfall = 0;
        borrowed_servers.clear();
        preemptions.clear();
        for (auto& r : resizes) give_place(std::move(r.place));
        resizes.clear();
        for (auto& s : starts) give_place(std::move(s.place));
        starts.clear();
        returned_servers.clear();
        memo_left = memo_loaned = -1;
        n_extra_repairs = 0;
        next_wakeup_s = kInf;
    }
    // an empty placement for a new move: a kept buffer when there is one
    Placement take_place() {
        if (spare.empty()) return Placement();
        Placement p = std::move(spare.back());
        spare.pop_back();
        return p;
    }
    // keep a placement's buffer for a later take_place (dropped past kMaxSpare)
    void give_place(Placement&& p) {
        if (spare.size() >= kMaxSpare || p.capacity() == 0) return;
        p.clear();
        spare.push_back(std::move(p));
    }
    bool any() const {
        return !reclaim_actions.empty() || !reclaimed_servers.empty() ||
               !borrowed_servers.empty() || !preemptions.empty() || !resizes.empty() ||
               !starts.empty() || !returned_servers.empty();
    }
};

// plan.py PlanObserver: the hooks apply() calls (the simulator's accounting).
// Any class with these members works (apply is a template); NoObserver does nothing.
struct NoObserver {
    void before_job_change(i64) {}
    void job_started(i64, int) {}
    void job_resized(i64, i64, int) {}
    void job_preempted(i64, int) {}
    void server_lent(i64, int) {}
    void server_returned(i64, int) {}
};

namespace detail {
// plan.py _check_fits
inline void check_fits(const State& st, i64 j, const Placement& place) {
    const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
    for (const auto& e : place) {
        const i64 s = e.first, k = e.second;
        if (!(0 <= s && s < st.n_servers()) || k < 1 || k * g > st.free[static_cast<size_t>(s)])
            throw InvalidInput("placement of job index " + std::to_string(j) + ": " +
                               std::to_string(k) + " worker(s) of " + std::to_string(g) +
                               " GPU(s) do not fit server " + std::to_string(s));
    }
}
}  // namespace detail

// The reclaim part of plan.py SchedulePlan.apply (steps 1-2 and set_serving):
// what api.py's schedule() applies to its copy before the policy decides.
template <class Obs>
void apply_reclaim(State& st, const Plan& plan, Obs* obs, bool validate) {
    const double now = plan.now_s;
    for (const auto& a : plan.reclaim_actions) {
        if (!st.running.contains(a.job))
            throw InvalidInput("reclaim action on job index " + std::to_string(a.job) +
                               ", not running");
        if (obs) obs->before_job_change(a.job);
        if (a.preempt) {
            st.preempt(a.job, now);
            if (obs) obs->job_preempted(a.job, a.reason);
        } else if (!validate) {  // (one step: the same state, see apply_rest)
            const i64 old = st.resize(a.job, a.place, now);
            if (obs) obs->job_resized(a.job, old, a.reason);
        } else {
            const i64 old = st.unplace_for_resize(a.job, now);
            detail::check_fits(st, a.job, a.place);
            st.place_resized(a.job, a.place, now);
            if (obs) obs->job_resized(a.job, old, a.reason);
        }
    }
    for (i64 s : plan.reclaimed_servers) {
        st.give_back(s, true, now);
        if (obs) obs->server_returned(s, RECLAIMED);
    }
}

// plan.py SchedulePlan.apply(inplace=True) from step 3 on (borrowed servers,
// preemptions, resizes, starts, returned servers, set_serving, memo).
// `reclaimed` tells whether steps 1-2 returned servers (for set_serving).
// The state takes the placements of the plan's resizes and starts (their buffers
// swapped, State::resize and State::start): afterwards each of those moves holds
// an unspecified placement, whose buffer Plan::clear keeps for take_place.
template <class Obs>
void apply_rest(State& st, Plan& plan, Obs* obs, bool validate, bool reclaimed) {
    const double now = plan.now_s;
    for (const auto& b : plan.borrowed_servers) {
        st.lend(b.first);
        if (obs) obs->server_lent(b.first, b.second);
    }
    for (const auto& p : plan.preemptions) {
        if (!st.running.contains(p.first))
            throw InvalidInput("preemption of job index " + std::to_string(p.first) +
                               ", not running");
        if (obs) obs->before_job_change(p.first);
        st.preempt(p.first, now);
        if (obs) obs->job_preempted(p.first, p.second);
    }
    if (!validate) {
        // Each resize in one step (State::resize): the state of plan.py's two loops
        // (unplace every resized job, then place each).  Integer counts add up the
        // same in any order; a per-server job list and `below` end with the resized
        // jobs in resize order either way (each is removed, then appended); a plan
        // names a job at most once (the passes and plan_decision see to it).  Only
        // the checks need every resized job's GPUs back first, and the observer's
        // hooks of job j (the engine's accounting) read and write job j's values only.
        for (auto& r : plan.resizes) {
            if (!st.running.contains(r.job))
                throw InvalidInput("resize of job index " + std::to_string(r.job) +
                                   ", not running");
            if (obs) obs->before_job_change(r.job);
            const i64 old = st.resize(r.job, std::move(r.place), now);
            if (obs) obs->job_resized(r.job, old, r.reason);
        }
    } else if (!plan.resizes.empty()) {
        std::vector<i64> olds;
        olds.reserve(plan.resizes.size());
        for (const auto& r : plan.resizes) {
            if (!st.running.contains(r.job))
                throw InvalidInput("resize of job index " + std::to_string(r.job) +
                                   ", not running");
            if (obs) obs->before_job_change(r.job);
            olds.push_back(st.unplace_for_resize(r.job, now));
        }
        for (size_t i = 0; i < plan.resizes.size(); ++i) {
            const auto& r = plan.resizes[i];
            if (validate) detail::check_fits(st, r.job, r.place);
            st.place_resized(r.job, r.place, now);
            if (obs) obs->job_resized(r.job, olds[i], r.reason);
        }
    }
    for (auto& s : plan.starts) {
        if (!st.queued.contains(s.job))
            throw InvalidInput("start of job index " + std::to_string(s.job) + ", not queued");
        if (validate) detail::check_fits(st, s.job, s.place);
        st.start(s.job, std::move(s.place), now);
        if (obs) obs->job_started(s.job, s.reason);
    }
    for (const auto& r : plan.returned_servers) {
        st.give_back(r.first, false, now);
        if (obs) obs->server_returned(r.first, r.second);
    }
    if (reclaimed || !plan.returned_servers.empty()) st.set_serving();
    st.memo_left = plan.memo_left;
    st.memo_loaned = plan.memo_loaned;
}

// plan.py SchedulePlan.apply(inplace=True): the whole plan in its order (taking
// the placements of its resizes and starts, see apply_rest).
template <class Obs>
void apply(State& st, Plan& plan, Obs* obs, bool validate = true) {
    if (plan.now_s < st.now_s) throw InvalidInput("plan is older than the state");
    st.now_s = plan.now_s;
    apply_reclaim(st, plan, obs, validate);
    apply_rest(st, plan, obs, validate, !plan.reclaimed_servers.empty());
}
inline void apply(State& st, Plan& plan) { apply<NoObserver>(st, plan, nullptr, true); }

// ---------------------------------------------------------------- policy interface
// policy.py PassContext: this pass's view of capacity.
struct PassContext {
    const std::vector<i64>* free = nullptr;  // free GPUs per server, offered servers' GPUs free
    std::vector<i64> loaned;                 // servers on loan or offered, ascending
    std::vector<i64> offered;                // idle inference servers offered, ascending
    i64 capacity_gpus = 0;                   // training GPUs + GPUs of `loaned`
    // when servers are offered: `loaned` less them (the servers on loan, status
    // LOANED), if the caller has that list (nullptr: not given)
    const std::vector<i64>* held = nullptr;
};

// The policies (registry.py names).
enum PolicyKind : int {
    P_FIFO = 0,
    P_FIFO_BACKFILL = 1,
    P_SJF = 2,
    P_TIRESIAS = 3,
    P_ARYL = 4,
    P_ARYL_NO_LOAN = 5,
    P_ARYL_NO_ELASTIC = 6,
    P_ELASTIC_GREEDY = 7,
    P_CALLBACK = 8,  // a Python policy (aryl.Policy): Policy::callback decides
};

inline const char* policy_name(int kind) {
    static const char* names[] = {"fifo", "fifo-backfill", "sjf", "tiresias", "aryl",
                                  "aryl-no-loan", "aryl-no-elastic", "elastic-greedy"};
    return kind >= 0 && kind < 8 ? names[kind] : "";
}
inline int policy_kind(const std::string& name) {
    for (int k = 0; k < 8; ++k)
        if (name == policy_name(k)) return k;
    return -1;
}

struct Policy;
// The decide step of a P_CALLBACK policy (sched_callback.hpp validates what it returns).
using DecideFn = std::function<void(const Policy&, const State&, const PassContext&, Plan&)>;

// policy.py Policy + the class attributes and options of each policy class
// (fifo.py, fifo_backfill.py, sjf.py, tiresias.py, aryl.py).  Immutable.
struct Policy {
    int kind = P_FIFO;
    bool loans = false;
    bool elastic = false;
    bool uses_tick = false;
    bool return_idle_loans = true;
    // P_CALLBACK: aryl.Policy.loans_for_growth (offers also while a running
    // elastic job is below its maximum, as ArylPolicy.wants_loan)
    bool loans_for_growth = false;
    // sjf family: option starvation_bound_s (else the state's config)
    bool has_bound = false;
    double bound_option = 0.0;
    // tiresias: option las_thresholds_gpu_s, sorted ascending
    std::vector<double> las_thresholds{3600.0, 36000.0};
    // aryl family
    bool greedy_solver = false;  // elastic-greedy: the marginal-gain greedy, else the MCKP
    int scale_out_reason = MCKP_SCALE_OUT;
    int scale_in_reason = MCKP_SCALE_IN;
    // P_CALLBACK: its name (messages) and decide step
    std::string name;
    DecideFn callback;

    // the name in messages
    std::string label() const { return kind == P_CALLBACK ? name : std::string(policy_name(kind)); }

    static Policy make(int kind) {
        Policy p;
        p.kind = kind;
        switch (kind) {
            case P_TIRESIAS:
                p.uses_tick = true;
                break;
            case P_ARYL:
                p.loans = p.elastic = true;
                break;
            case P_ARYL_NO_LOAN:
                p.elastic = true;
                break;
            case P_ARYL_NO_ELASTIC:
                p.loans = true;
                break;
            case P_ELASTIC_GREEDY:
                p.elastic = true;
                p.greedy_solver = true;
                p.scale_out_reason = GREEDY_SCALE_OUT;
                p.scale_in_reason = GREEDY_SCALE_IN;
                break;
            default:
                break;
        }
        return p;
    }
    bool is_aryl_family() const { return kind >= P_ARYL && kind <= P_ELASTIC_GREEDY; }
    bool is_sjf_family() const { return kind == P_SJF || is_aryl_family(); }

    // Policy.base_workers
    i64 base_workers(const State& st, i64 j) const {
        const auto u = static_cast<size_t>(j);
        return (elastic && st.elastic[u]) ? st.min_workers[u] : st.ref_workers[u];
    }
    // Policy.scalable
    bool scalable(const State& st, i64 j) const {
        const auto u = static_cast<size_t>(j);
        return elastic && st.elastic[u] && st.max_workers[u] > st.min_workers[u];
    }
    // Policy.wants_loan / ArylPolicy.wants_loan
    bool wants_loan(const State& st) const {
        if (!st.queued.empty()) return true;
        if (!(is_aryl_family() || loans_for_growth) || !elastic) return false;
        return !st.below.empty();
    }
    // SjfPolicy.queue_key
    int sjf_queue_key() const { return elastic ? Q_SJF_ELASTIC : Q_SJF_RIGID; }
    // SjfPass.bound
    double bound(const State& st) const {
        return has_bound ? bound_option : st.config.starvation_bound_s;
    }
};

}  // namespace sched
}  // namespace aryl
