// The discrete-event loop of the simulator in C++: the twin of
// src/aryl/sim/engine.py (Engine: events, accounting, the pass, the stall
// watchdog) and of the invariant checks of src/aryl/sim/check.py
// (Checker.after_pass, Checker.at_end).
//
// Header-only C++17, no Python dependency (bound by _sched.cpp, driven by
// aryl/sim/native.py).  No object per job or per event beyond fixed-width
// vectors: the event log and the time series are columnar; a finished job's
// placement memory is released.  The loop runs in chunks of iterations
// (run(max_iterations)) so that Python can call a progress callback and see
// Ctrl-C in between.
//
// The event heap is CPython's heapq algorithm (same array layout, so even the
// stall diagnostic, which lists the due events in heap order, is identical).
#pragma once

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sched_pass.hpp"
#include "sched_state.hpp"

namespace aryl {
namespace sim {

using sched::i64;
using sched::kInf;
using sched::kNaN;

// A replay stopped making progress or hit an impossible state: RuntimeError.
struct SimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// An invariant of check.py does not hold: aryl.sim.check.InvariantError.
struct InvariantFailure : std::logic_error {
    using std::logic_error::logic_error;
};

// repr() of a Python float (shortest round-trip digits; fixed notation for
// exponents -4 .. 15, else d.ddde+XX), for messages identical to the Python engine's.
inline std::string py_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
    std::string s(buf, res.ptr);
    // s = [-]d[.ddd]e[+-]XX
    std::string sign;
    if (s[0] == '-') {
        sign = "-";
        s = s.substr(1);
    }
    const size_t epos = s.find('e');
    std::string mant = s.substr(0, epos);
    const int exp = std::stoi(s.substr(epos + 1));
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    const int nd = static_cast<int>(digits.size());
    std::string out;
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            if (nd <= exp + 1) {
                out = digits + std::string(static_cast<size_t>(exp + 1 - nd), '0') + ".0";
            } else {
                out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
                      digits.substr(static_cast<size_t>(exp + 1));
            }
        } else {
            out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        }
    } else {
        out = digits.substr(0, 1);
        if (nd > 1) out += "." + digits.substr(1);
        char e[16];
        std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += e;
    }
    return sign + out;
}
// f"{x:.6g}"
inline std::string fmt_g6(double x) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", x);
    return buf;
}

// A column that grows in fixed blocks (no reallocation peaks, no copies while it
// grows); drain() copies it out block by block, freeing each block as it goes.
template <typename T>
class ChunkedColumn {
public:
    static constexpr size_t kBlock = size_t(1) << 16;
    ChunkedColumn() = default;
    ChunkedColumn(const ChunkedColumn&) = delete;  // (next_ points into its own blocks)
    ChunkedColumn& operator=(const ChunkedColumn&) = delete;
    void push_back(const T& x) {
        if (full()) grow();
        put(x);
    }
    // push_back in two steps (columns that grow in lockstep check one of them):
    // a full column grows, then takes values
    bool full() const { return next_ == end_; }
    void grow() {
        blocks_.emplace_back(new T[kBlock]);
        next_ = blocks_.back().get();
        end_ = next_ + kBlock;
    }
    void put(const T& x) { *next_++ = x; }  // (not full())
    size_t size() const {
        return blocks_.empty() ? 0
                               : (blocks_.size() - 1) * kBlock +
                                     static_cast<size_t>(next_ - blocks_.back().get());
    }
    const T& operator[](size_t i) const { return blocks_[i / kBlock][i % kBlock]; }
    // copy out (converting to U) and release the blocks one by one
    template <typename U>
    void drain(U* out) {
        const size_t n = size();
        for (size_t b = 0; b < blocks_.size(); ++b) {
            const size_t m = std::min(kBlock, n - b * kBlock);
            std::copy(blocks_[b].get(), blocks_[b].get() + m, out + b * kBlock);
            blocks_[b].reset();
        }
        blocks_.clear();
        next_ = end_ = nullptr;
    }

private:
    std::vector<std::unique_ptr<T[]>> blocks_;
    T* next_ = nullptr;  // the next free slot of the last block
    T* end_ = nullptr;   // the end of the last block
};

// event kinds = priorities (engine.py FINISH .. TICK)
enum EventKind : int { FINISH = 0, DEMAND = 1, WAKE = 2, ARRIVAL = 3, TICK = 4 };
// event log codes (labels in aryl/sim/metrics.py EVENT_NAMES)
enum LogCode : int8_t { EV_ARRIVE = 0, EV_INFEASIBLE = 1, EV_START = 2, EV_SCALE_OUT = 3,
                        EV_SCALE_IN = 4, EV_MOVE = 5, EV_PREEMPT = 6, EV_FINISH = 7,
                        EV_LOAN = 8, EV_LOAN_RETURN = 9, EV_RECLAIM = 10 };

// An event: engine.py's (t, kind, seq, payload) tuple.  kind and seq are packed
// into one key, kind * 2^60 + (seq + 1) (seq >= -1: the first demand event has
// -1), so that comparing keys compares (kind, seq) as the tuple does.
struct Event {
    static constexpr int kKindShift = 60;
    static constexpr i64 kSeqMask = (i64(1) << kKindShift) - 1;
    double t;
    i64 key;
    i64 payload;
    Event(double t_, int kind, i64 seq, i64 payload_)
        : t(t_), key((i64(kind) << kKindShift) + (seq + 1)), payload(payload_) {}
    int kind() const { return static_cast<int>(key >> kKindShift); }
    i64 seq() const { return (key & kSeqMask) - 1; }
    bool operator<(const Event& o) const { return t < o.t || (t == o.t && key < o.key); }
};
// the keys of kinds below `kind` are below this
constexpr i64 kind_key(int kind) { return i64(kind) << Event::kKindShift; }

// CPython heapq on a vector of Events
inline void heap_siftdown(std::vector<Event>& h, size_t startpos, size_t pos) {
    const Event item = h[pos];
    while (pos > startpos) {
        const size_t parentpos = (pos - 1) >> 1;
        if (item < h[parentpos]) {
            h[pos] = h[parentpos];
            pos = parentpos;
            continue;
        }
        break;
    }
    h[pos] = item;
}
inline void heap_siftup(std::vector<Event>& h, size_t pos) {
    const size_t endpos = h.size();
    const size_t startpos = pos;
    const Event item = h[pos];
    size_t childpos = 2 * pos + 1;
    while (childpos < endpos) {
        const size_t rightpos = childpos + 1;
        if (rightpos < endpos && !(h[childpos] < h[rightpos])) childpos = rightpos;
        h[pos] = h[childpos];
        pos = childpos;
        childpos = 2 * pos + 1;
    }
    h[pos] = item;
    heap_siftdown(h, startpos, pos);
}
inline void heap_push(std::vector<Event>& h, const Event& e) {
    h.push_back(e);
    heap_siftdown(h, 0, h.size() - 1);
}
inline Event heap_pop(std::vector<Event>& h) {
    const Event last = h.back();
    h.pop_back();
    if (!h.empty()) {
        const Event ret = h[0];
        h[0] = last;
        heap_siftup(h, 0);
        return ret;
    }
    return last;
}

// What the engine needs beyond the cluster state (engine.py Engine.__init__).
struct EngineSetup {
    double t0 = 0.0;
    bool has_horizon = false;
    double horizon_s = 0.0;
    double tick_s = 0.0;  // 0: the policy gets no ticks
    double reclaim_grace_s = 0.0;
    double ts_step_s = 300.0;  // the time series' step (SimConfig.timeseries_step_s)
    bool record_events = true;
    bool check = false;
    i64 n_inf = 0;
    // inference demand (InferenceSchedule); has_inference false = None
    bool has_inference = false;
    std::vector<double> inf_offsets_s;
    std::vector<i64> inf_servers_needed;
    double inf_period_s = kInf;
    // whole-worker slots of the training servers per GPU type: (n_servers, gpus per server)
    std::vector<std::vector<std::pair<i64, i64>>> slots;
    std::vector<double> duration_s;    // traced durations (the finish check)
};

// engine.py Engine
class Engine {
public:
    sched::State st;
    sched::Policy pol;
    EngineSetup cfg;
    sched::ReclaimHook reclaim_hook;
    sched::PassWorkspace ws;
    sched::Plan plan;

    // per-job results (a running job's live finish event: st.records' fin_seq)
    std::vector<double> first_start, finish_t;
    sched::I32Column n_preempt, n_scale_in, n_scale_out, n_move;  // int32: 4 bytes a job
    // per job: GPU-seconds per pool, pools in order of first use (engine.py
    // job_pool_gpu_s): the first pool inline, further ones in a chain of entries
    // of one shared list (no allocation of its own per job)
    struct PoolAcc {
        int32_t pool = -1;  // -1: none yet
        int32_t more = -1;  // the job's first entry in pool_more, -1: none
        double v = 0.0;
    };
    struct PoolMore {
        int32_t pool;
        int32_t next;  // the job's next entry, -1: none
        double v;
    };
    std::vector<PoolAcc> pool_acc;
    std::vector<PoolMore> pool_more;
    // clock and accounting
    double t0 = 0.0, now = 0.0;
    double busy_int = 0.0, busy_loaned_int = 0.0, loan_gpu_int = 0.0, cap_int = 0.0,
           loan_int = 0.0, serving_int = 0.0;
    std::vector<double> busy_pool_int, loan_pool_int;
    i64 n_loans = 0, n_loan_returns = 0, n_reclaims = 0, n_reclaim_preempt = 0,
        reclaim_deadline_misses = 0, n_decisions = 0;
    i64 wake_seq = -1;     // seq of the live wake-up event (-1: none)
    double wake_t = kInf;  // its time
    double sched_time_s = 0.0;
    std::vector<Event> heap;
    i64 seq = 0;
    // event log (columnar)
    ChunkedColumn<double> ev_time;
    // job index (-1: a server event) and workers or server index, as int32 (checked)
    ChunkedColumn<int32_t> ev_job, ev_workers;
    ChunkedColumn<int8_t> ev_what;
    // time series rows (t, queue, busy, loaned, running, needed), only those that
    // hold at a point of the output grid t0 + k * ts_step_s (and the last one):
    // metrics.py build_result reads nothing else
    std::vector<double> ts_t;
    std::vector<i64> ts_q, ts_busy, ts_loaned, ts_running, ts_needed;
    double ts_grid_next = kNaN;  // first_grid_point(ts_t.back()) (kept with the last row)
    i64 n_open = 0, n_arrived = 0, n_infeasible = 0;
    bool have_last_plan = false;
    i64 last_starts = 0, last_resizes = 0, last_preemptions = 0;
    // loop state (run() continues where it stopped)
    bool started = false, finished = false;
    bool results_taken = false, pools_split = false;  // (_sched.cpp engine_results, engine_pool_split)
    i64 ptr = 0, n_iter = 0, n_same_t = 0, n_idle = 0, same_t_limit = 0;
    double last_t = kNaN;
    int last_kind = -1;

    static constexpr double kEps = 1e-9;
    static constexpr i64 kIdlePassLimit = 1000;

    void init() {
        const i64 n = st.n_jobs();
        first_start.assign(static_cast<size_t>(n), kNaN);
        finish_t.assign(static_cast<size_t>(n), kNaN);
        n_preempt.assign(static_cast<size_t>(n), 0);
        n_scale_in.assign(static_cast<size_t>(n), 0);
        n_scale_out.assign(static_cast<size_t>(n), 0);
        n_move.assign(static_cast<size_t>(n), 0);
        pool_acc.assign(static_cast<size_t>(n), PoolAcc());
        busy_pool_int.assign(static_cast<size_t>(st.n_pools), 0.0);
        loan_pool_int.assign(static_cast<size_t>(st.n_pools), 0.0);
        t0 = cfg.t0;
        now = t0;
        st.now_s = t0;
        n_open = n;
    }

    // ------------------------------------------------------------- events
    i64 push(double t, int kind, i64 payload) {
        const i64 s = seq++;
        heap_push(heap, Event{t, kind, s, payload});
        return s;
    }
    [[noreturn]] static void log_overflow(i64 x) {
        throw std::overflow_error("event log: a value outside the int32 range: " +
                                  std::to_string(x));
    }
    static int32_t log_int(i64 x) {
        if (x < static_cast<i64>(INT32_MIN) || x > static_cast<i64>(INT32_MAX)) log_overflow(x);
        return static_cast<int32_t>(x);
    }
    void log(i64 j, int8_t what, i64 w) {
        if (!cfg.record_events) return;
        const int32_t j32 = log_int(j), w32 = log_int(w);
        if (ev_time.full()) {  // (the four columns grow in lockstep)
            ev_time.grow();
            ev_job.grow();
            ev_what.grow();
            ev_workers.grow();
        }
        ev_time.put(now);
        ev_job.put(j32);
        ev_what.put(what);
        ev_workers.put(w32);
    }
    void schedule_finish(i64 j) {
        sched::JobRecord& R = st.rec(j);  // (a started job has one: its values as the columns')
        R.fin_seq = push(R.progress_at_s + st.remaining_s[static_cast<size_t>(j)] / R.speed, FINISH, j);
    }

    // ------------------------------------------- plan observer (accounting)
    void before_job_change(i64 j) { flush_pools(j, now); }
    void flush_pools(i64 j, double t) {
        const auto u = static_cast<size_t>(j);
        const sched::Placement& place = st.placement[u];
        const double dt = t - st.attained_at_s[u];
        if (place.empty() || dt <= 0) return;
        PoolAcc& d = pool_acc[u];
        const double g = static_cast<double>(st.gpus_per_worker[u]) * dt;
        for (const auto& e : place) {
            const i64 p = st.server_pool_idx[static_cast<size_t>(e.first)];
            const double x = static_cast<double>(e.second) * g;
            if (d.pool == p) {
                d.v = d.v + x;
            } else if (d.pool < 0) {
                d.pool = static_cast<int32_t>(p);
                d.v = 0.0 + x;
            } else {
                int32_t q = d.more, last = -1;
                while (q >= 0 && pool_more[static_cast<size_t>(q)].pool != p) {
                    last = q;
                    q = pool_more[static_cast<size_t>(q)].next;
                }
                if (q >= 0) {
                    PoolMore& pe = pool_more[static_cast<size_t>(q)];
                    pe.v = pe.v + x;
                } else {  // a new pool of the job: last in its chain
                    if (pool_more.size() >= static_cast<size_t>(INT32_MAX))
                        throw std::overflow_error("more than 2**31 - 1 (job, pool) entries");
                    const auto nq = static_cast<int32_t>(pool_more.size());
                    pool_more.push_back(PoolMore{static_cast<int32_t>(p), -1, 0.0 + x});
                    if (last < 0) d.more = nq;
                    else pool_more[static_cast<size_t>(last)].next = nq;
                }
            }
        }
    }
    // The pools of job j in order of first use, (pool, GPU-seconds).
    void pools_of(size_t j, std::vector<std::pair<i64, double>>& out) const {
        out.clear();
        const PoolAcc& d = pool_acc[j];
        if (d.pool < 0) return;
        out.emplace_back(d.pool, d.v);
        for (int32_t q = d.more; q >= 0; q = pool_more[static_cast<size_t>(q)].next)
            out.emplace_back(pool_more[static_cast<size_t>(q)].pool, pool_more[static_cast<size_t>(q)].v);
    }
    void job_started(i64 j, int) {
        const auto u = static_cast<size_t>(j);
        if (std::isnan(first_start[u])) first_start[u] = now;
        schedule_finish(j);
        log(j, EV_START, st.workers[u]);
    }
    void job_resized(i64 j, i64 old_workers, int) {
        const auto u = static_cast<size_t>(j);
        const i64 w = st.workers[u];
        int8_t what;
        if (w > old_workers) {
            n_scale_out.add(u, 1);
            what = EV_SCALE_OUT;
        } else if (w < old_workers) {
            n_scale_in.add(u, 1);
            what = EV_SCALE_IN;
        } else {
            n_move.add(u, 1);
            what = EV_MOVE;
        }
        schedule_finish(j);
        log(j, what, w);
    }
    void job_preempted(i64 j, int reason) {
        const auto u = static_cast<size_t>(j);
        st.rec(j).fin_seq = -1;
        n_preempt.add(u, 1);
        if (reason == sched::RECLAIM_PREEMPT) ++n_reclaim_preempt;
        log(j, EV_PREEMPT, 0);
    }
    void server_lent(i64 s, int) {
        ++n_loans;
        log(-1, EV_LOAN, s);
    }
    void server_returned(i64 s, int reason) {
        if (reason == sched::RECLAIMED) {
            ++n_reclaims;
            log(-1, EV_RECLAIM, s);
        } else {
            ++n_loan_returns;
            log(-1, EV_LOAN_RETURN, s);
        }
    }

    // ------------------------------------------------------------ lifecycle
    void finish_job(i64 j) {
        const auto u = static_cast<size_t>(j);
        flush_pools(j, now);
        st.advance(j, now);
        if (st.remaining_s[u] > 1e-6 * sched::py_max(1.0, cfg.duration_s[u]))
            throw SimError("job " + std::to_string(j) + " finished with " +
                           py_repr(st.remaining_s[u]) + " s of work left");
        st.finish(j, now);
        finish_t[u] = now;
        // a finished job's record is read by nothing but a Python policy's view
        // of the state's changes (PassView.changes): freed unless one may read it
        if (pol.callback) st.rec(j).fin_seq = -1;
        else st.records.release(u);
        --n_open;
        log(j, EV_FINISH, 0);
    }
    // engine.py fits_ever
    bool fits_ever(i64 base, i64 g) const {
        const auto& slots = cfg.slots;
        if (slots.size() == 1 || st.config.mix_gpu_types) {
            i64 tot = 0;
            for (const auto& v : slots)
                for (const auto& ns : v) tot += ns.first * sched::floordiv(ns.second, g);
            return base <= tot;
        }
        for (const auto& v : slots) {
            i64 tot = 0;
            for (const auto& ns : v) tot += ns.first * sched::floordiv(ns.second, g);
            if (base <= tot) return true;
        }
        return false;
    }
    void arrive(i64 j) {
        const auto u = static_cast<size_t>(j);
        const i64 base = pol.base_workers(st, j);
        const i64 g = st.gpus_per_worker[u];
        if (!fits_ever(base, g)) {
            st.status[u] = sched::INFEASIBLE;
            st.queued_since_s[u] = now;
            ++n_infeasible;
            --n_open;
            log(j, EV_INFEASIBLE, 0);
            return;
        }
        st.enqueue(j, now);
        log(j, EV_ARRIVE, 0);
    }

    // ---------------------------------------------------- demand / reclaim
    // engine.py InferenceSchedule.at
    std::pair<double, i64> inference_at(i64 k) const {
        const i64 n = static_cast<i64>(cfg.inf_offsets_s.size());
        if (std::isinf(cfg.inf_period_s)) {
            if (k >= n) return {kInf, cfg.inf_servers_needed.back()};
            return {cfg.inf_offsets_s[static_cast<size_t>(k)],
                    cfg.inf_servers_needed[static_cast<size_t>(k)]};
        }
        const i64 c = sched::floordiv(k, n), i = sched::floormod(k, n);
        return {static_cast<double>(c) * cfg.inf_period_s + cfg.inf_offsets_s[static_cast<size_t>(i)],
                cfg.inf_servers_needed[static_cast<size_t>(i)]};
    }
    void demand(i64 k) {
        const i64 value = inference_at(k).second;
        const i64 needed = sched::py_min(sched::py_max(i64(0), value), cfg.n_inf);
        const double off = inference_at(k + 1).first;
        if (std::isfinite(off)) push(t0 + off, DEMAND, k + 1);
        st.set_demand(needed, now + cfg.reclaim_grace_s);
    }

    // ------------------------------------------------------------ the pass
    bool handle(int kind, i64 sq, i64 p) {
        if (kind == FINISH) {
            const sched::JobRecord* r = st.records.get(static_cast<size_t>(p));
            if (!r || r->fin_seq != sq) return false;
            finish_job(p);
        } else if (kind == DEMAND) {
            demand(p);
        } else {
            if (wake_seq != sq) return false;
            wake_seq = -1;
            wake_t = kInf;
        }
        return true;
    }
    void do_pass() {
        st.now_s = now;
        const auto t_start = std::chrono::steady_clock::now();
        sched::schedule(st, pol, plan, this, reclaim_hook, ws);
        sched_time_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        ++n_decisions;
        have_last_plan = true;
        last_starts = static_cast<i64>(plan.starts.size());
        last_resizes = static_cast<i64>(plan.resizes.size());
        last_preemptions = static_cast<i64>(plan.preemptions.size());
        if (plan.reclaim_shortfall) ++reclaim_deadline_misses;
        sched::apply_rest(st, plan, this, false, !plan.reclaimed_servers.empty());
        const double w = plan.next_wakeup_s;
        if (w != wake_t) {
            if (!(w > now))
                throw SimError("pass at " + py_repr(now) + " s asked to be woken at " + py_repr(w) +
                               " s");
            wake_t = w;
            wake_seq = w < kInf ? push(w, WAKE, 0) : -1;
        }
        if (cfg.check) after_pass();
    }
    [[noreturn]] void stalled(const std::string& what, int kind = -1) {
        static const char* kinds[] = {"finish", "demand", "wake", "3", "tick"};
        std::vector<std::pair<std::string, i64>> due;
        for (const auto& e : heap) {
            if (e.t <= now) {
                const int k = e.kind();
                const std::string name = (k >= 0 && k <= 4) ? kinds[k] : std::to_string(k);
                bool found = false;
                for (auto& d : due)
                    if (d.first == name) {
                        ++d.second;
                        found = true;
                    }
                if (!found) due.emplace_back(name, 1);
            }
        }
        std::string due_s = "none";
        if (!due.empty()) {
            due_s = "{";
            for (size_t i = 0; i < due.size(); ++i) {
                if (i) due_s += ", ";
                due_s += "'" + due[i].first + "': " + std::to_string(due[i].second);
            }
            due_s += "}";
        }
        const std::string last =
            !have_last_plan ? "none"
                            : std::to_string(last_starts) + " starts, " + std::to_string(last_resizes) +
                                  " resizes, " + std::to_string(last_preemptions) + " preemptions";
        std::string ev;
        if (kind >= 0)
            ev = std::string("last event: ") +
                 ((kind <= 4) ? std::string(kinds[kind]) : std::to_string(kind)) + "; ";
        throw SimError("simulation stalled at t = " + fmt_g6(now) + " s: " + what + "; policy " +
                       pol.label() + ", queue length " +
                       std::to_string(st.queued.size()) + ", " + std::to_string(st.running.size()) +
                       " running, " + std::to_string(n_open) + " jobs open, " +
                       std::to_string(st.n_loaned) + " servers on loan; events due now: " + due_s +
                       "; " + ev + "last decision: " + last + "; " + std::to_string(n_decisions) +
                       " passes so far");
    }
    void advance_clock(double t) {
        const double dt = t - now;
        if (dt > 0) {
            const i64 nl = st.n_loaned;
            busy_int += static_cast<double>(st.busy) * dt;
            busy_loaned_int += static_cast<double>(st.busy_loaned) * dt;
            const i64 lg = st.loaned_gpus;
            cap_int += static_cast<double>(st.training_gpus + lg) * dt;
            loan_int += static_cast<double>(nl) * dt;
            loan_gpu_int += static_cast<double>(lg) * dt;
            for (size_t p = 0; p < st.busy_by_pool.size(); ++p) {
                const i64 b = st.busy_by_pool[p];
                if (b) busy_pool_int[p] += static_cast<double>(b) * dt;
            }
            if (lg) {
                for (size_t p = 0; p < st.loaned_gpus_by_pool.size(); ++p) {
                    const i64 x = st.loaned_gpus_by_pool[p];
                    if (x) loan_pool_int[p] += static_cast<double>(x) * dt;
                }
            }
            const i64 free_inf = cfg.n_inf - nl;
            const i64 need = st.servers_needed;
            serving_int += static_cast<double>(need < free_inf ? need : free_inf) * dt;
            now = t;
        }
    }
    void record() {
        const i64 q = st.queued.size(), b = st.busy, l = st.n_loaned, r = st.running.size(),
                  nd = st.servers_needed;
        if (!ts_t.empty()) {
            const size_t k = ts_t.size() - 1;
            if (ts_q[k] == q && ts_busy[k] == b && ts_loaned[k] == l && ts_running[k] == r &&
                ts_needed[k] == nd)
                return;
            if (ts_t[k] == now) {
                ts_q[k] = q;
                ts_busy[k] = b;
                ts_loaned[k] = l;
                ts_running[k] = r;
                ts_needed[k] = nd;
                return;
            }
        }
        if (!ts_t.empty() && !(ts_grid_next < now)) {
            // the last row holds at no grid point (none in [its time, now)): replace
            // it (the first grid point at or after its time stays ts_grid_next: it
            // is at or after now)
            const size_t k = ts_t.size() - 1;
            ts_t[k] = now;
            ts_q[k] = q;
            ts_busy[k] = b;
            ts_loaned[k] = l;
            ts_running[k] = r;
            ts_needed[k] = nd;
            return;
        }
        ts_t.push_back(now);
        ts_q.push_back(q);
        ts_busy.push_back(b);
        ts_loaned.push_back(l);
        ts_running.push_back(r);
        ts_needed.push_back(nd);
        ts_grid_next = first_grid_point(now);
    }

    // The first grid point t0 + step * k (k >= 0, metrics.py's float arithmetic) at
    // or after a: a row at a holds at a grid point in [a, b) when it is below b.
    double first_grid_point(double a) const {
        const double step = cfg.ts_step_s;
        double kf = std::floor((a - t0) / step) - 1.0;
        if (!(kf > 0.0)) kf = 0.0;
        auto k = static_cast<i64>(kf);
        while (t0 + step * static_cast<double>(k) < a) ++k;
        return t0 + step * static_cast<double>(k);
    }

    // engine.py Engine.run, in chunks: runs at most `max_iterations` loop
    // iterations (<= 0: no limit) and returns true when the replay has ended.
    bool run(i64 max_iterations) {
        if (finished) return true;
        const i64 n = st.n_jobs();
        const std::vector<double>& sub = st.arrival_s;
        if (!started) {
            started = true;
            if (cfg.has_inference) heap.push_back(Event{t0, DEMAND, -1, 0});
            if (cfg.tick_s != 0.0 && n) push(t0 + cfg.tick_s, TICK, 0);
            record();
            same_t_limit = 2 * n + 1000;
        }
        i64 done_iter = 0;
        while (n_open > 0) {
            if (max_iterations > 0 && done_iter >= max_iterations) return false;
            double t = heap.empty() ? kInf : heap[0].t;
            if (ptr < n && sub[static_cast<size_t>(ptr)] <= t) t = sub[static_cast<size_t>(ptr)];
            if (t == kInf) throw SimError("simulation stalled: jobs open but no event left");
            if (cfg.has_horizon && t > cfg.horizon_s) {
                advance_clock(cfg.horizon_s);
                break;
            }
            if (t < now) {
                if (now - t > kEps * sched::py_max(1.0, std::fabs(now)))
                    throw SimError("event at " + py_repr(t) + " is before the clock " + py_repr(now));
                t = now;
            }
            advance_clock(t);
            if (t == last_t) {
                ++n_same_t;
            } else {
                last_t = t;
                n_same_t = 0;
            }
            bool changed = false, ticked = false;
            while (!heap.empty() && heap[0].t <= t && heap[0].key < kind_key(ARRIVAL)) {
                const Event e = heap_pop(heap);
                last_kind = e.kind();
                if (handle(e.kind(), e.seq(), e.payload)) {
                    changed = true;
                    ++n_same_t;
                }
            }
            while (ptr < n && sub[static_cast<size_t>(ptr)] <= t) {
                arrive(ptr);
                ++ptr;
                changed = true;
            }
            n_arrived = ptr;
            while (!heap.empty() && heap[0].t <= t) {
                const Event e = heap_pop(heap);
                last_kind = e.kind();
                ++n_same_t;
                if (n_same_t > same_t_limit) break;
                if (e.kind() == TICK) {
                    ticked = true;
                    if (n_open > 0) push(t + cfg.tick_s, TICK, 0);
                } else {
                    changed |= handle(e.kind(), e.seq(), e.payload);
                }
            }
            if (n_same_t > same_t_limit)
                stalled(std::to_string(n_same_t) +
                            " events and iterations at the same time without the clock advancing",
                        last_kind);
            if (changed || ticked) {
                do_pass();
                record();
                if (st.running.empty() && ptr >= n && n_open > 0) {
                    ++n_idle;
                    if (n_idle > kIdlePassLimit)
                        stalled(std::to_string(n_idle) +
                                " passes in a row with nothing running, no arrival left and jobs "
                                "waiting (no job can ever start)");
                } else {
                    n_idle = 0;
                }
            }
            ++n_iter;
            ++done_iter;
            if (max_iterations > 0 && n_iter % max_iterations == 0) return false;
        }
        finished = true;
        if (cfg.check) at_end();
        // close the per-job GPU-second accounting of jobs still running
        for (i64 j : st.running) {
            flush_pools(j, now);
            st.advance(j, now);
            st.close_attained(j, now);
        }
        return true;
    }

    // ----------------------------------------------------------- results
    // Free the per-job and loop state that no result reads (placements, the
    // job sets, the queue indexes, the speeds and checkpoint columns, the event
    // heap), before the results are moved out: an ended replay only.
    void release_loop_state() {
        auto drop = [](auto& v) {
            using V = std::decay_t<decltype(v)>;
            v = V();  // move-assigning an empty one frees the storage
        };
        drop(st.placement);
        drop(st.ex_job);
        drop(st.jobs_on);
        drop(st.records);
        drop(st.ref_throughput);
        drop(st.queued);
        drop(st.running);
        drop(st.below);
        drop(st.elastic_running);
        drop(st.gather);
        for (auto& q : st.qidx) q.clear();
        st.workers.release();
        st.family.release();
        drop(heap);
    }
    // free the per-job pool accounting (after _sched.cpp engine_pool_split read it)
    void release_pools() {
        std::vector<PoolAcc>().swap(pool_acc);
        std::vector<PoolMore>().swap(pool_more);
    }

    // ------------------------------------------------------------ checks
    // check.py Checker.after_pass
    void after_pass() const {
        auto fail = [](const std::string& m) { throw InvariantFailure(m); };
        const i64 ns = st.n_servers();
        std::vector<i64> used(static_cast<size_t>(ns), 0);
        i64 busy = 0;
        for (i64 j : st.running) {
            const auto u = static_cast<size_t>(j);
            const std::string js = std::to_string(j);
            if (st.status[u] != sched::RUNNING)
                fail("job " + js + " in the running set but status " + std::to_string(st.status[u]));
            const auto& place = st.placement[u];
            if (place.empty()) fail("running job " + js + " has no placement");
            const i64 w = sched::place_workers(place);
            if (w != st.workers[u])
                fail("job " + js + ": workers " + std::to_string(st.workers[u]) + " != placement " +
                     std::to_string(w));
            // engine.py base_workers / max_workers: the size range under the policy
            const i64 lo = pol.base_workers(st, j);
            const i64 hi = (pol.elastic && st.elastic[u]) ? st.max_workers[u] : st.ref_workers[u];
            if (!(lo <= w && w <= hi))
                fail("job " + js + ": " + std::to_string(w) + " workers outside [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
            const i64 g = st.gpus_per_worker[u];
            for (const auto& e : place) {
                const auto& on = st.jobs_on[static_cast<size_t>(e.first)];
                if (e.second <= 0 || !sched::place_has(on, j) || sched::place_get(on, j) != e.second)
                    fail("job " + js + ": placement on server " + std::to_string(e.first) +
                         " inconsistent");
                used[static_cast<size_t>(e.first)] += e.second * g;
            }
            busy += w * g;
        }
        for (i64 j : st.queued)
            if (st.status[static_cast<size_t>(j)] != sched::QUEUED ||
                !st.placement[static_cast<size_t>(j)].empty())
                fail("job " + std::to_string(j) + " in the queue but status " +
                     std::to_string(st.status[static_cast<size_t>(j)]));
        const i64 n_train = st.n_training();
        for (i64 s = 0; s < ns; ++s) {
            const auto su = static_cast<size_t>(s);
            const int8_t status = st.server_status[su];
            const bool usable = status == sched::TRAINING || status == sched::LOANED;
            const i64 cap = usable ? st.server_gpus[su] : 0;
            if (st.free[su] < 0)
                fail("server " + std::to_string(s) + " over-committed (free " +
                     std::to_string(st.free[su]) + ")");
            if (used[su] + st.free[su] != cap)
                fail("server " + std::to_string(s) + ": used " + std::to_string(used[su]) +
                     " + free " + std::to_string(st.free[su]) + " != capacity " +
                     std::to_string(cap));
            if (!usable && used[su])
                fail("inference server " + std::to_string(s) +
                     " not on loan but hosts training work");
        }
        if (pol.loans && pol.return_idle_loans)
            for (i64 s : st.loaned_servers())
                if (st.jobs_on[static_cast<size_t>(s)].empty())
                    fail("loaned server " + std::to_string(s) + " idle after a pass");
        i64 loaned_busy = 0;
        for (i64 s = n_train; s < ns; ++s) loaned_busy += used[static_cast<size_t>(s)];
        if (loaned_busy != st.busy_loaned)
            fail("busy-on-loans counter " + std::to_string(st.busy_loaned) + " != placements " +
                 std::to_string(loaned_busy));
        const i64 n_closed = st.n_jobs() - n_open;
        if (st.queued.size() + st.running.size() + n_closed != n_arrived)
            fail("job states do not partition: " + std::to_string(st.queued.size()) +
                 " queued + " + std::to_string(st.running.size()) + " running + " +
                 std::to_string(n_closed) + " closed != " + std::to_string(n_arrived) + " arrived");
        if (busy != st.busy)
            fail("busy counter " + std::to_string(st.busy) + " != placements " + std::to_string(busy));
        if (st.n_loaned > sched::py_max(i64(0), cfg.n_inf - st.servers_needed) &&
            cfg.reclaim_grace_s == 0)
            fail(std::to_string(st.n_loaned) + " servers on loan while inference needs " +
                 std::to_string(st.servers_needed) + " of " + std::to_string(cfg.n_inf));
        for (i64 j : st.queued)
            if (st.waited_s[static_cast<size_t>(j)] < 0 || st.queue_age_s(j, st.now_s) < -1e-6)
                fail("job " + std::to_string(j) + ": negative queue age");
        const std::string drift = st.check_indexes();
        if (!drift.empty()) fail("cluster state: " + drift);
        if (reclaim_deadline_misses)
            fail("a reclaim returned fewer servers than asked by the deadline");
    }

    // check.py Checker.at_end (engine state, before the result is built)
    void at_end() const {
        auto fail = [](const std::string& m) { throw InvariantFailure(m); };
        if (now < t0) fail("clock " + py_repr(now) + " before its start " + py_repr(t0));
        if (cfg.has_horizon && now > cfg.horizon_s)
            fail("clock " + py_repr(now) + " past the horizon " + py_repr(cfg.horizon_s));
        const i64 n = st.n_jobs();
        if (cfg.record_events) {
            std::map<i64, i64> finishes;  // first occurrence order does not matter: ascending
            std::vector<i64> order;
            for (size_t k = 0; k < ev_what.size(); ++k)
                if (ev_what[k] == EV_FINISH) {
                    if (!finishes.count(ev_job[k])) order.push_back(ev_job[k]);
                    ++finishes[ev_job[k]];
                }
            for (i64 j : order) {
                const i64 c = finishes[j];
                if (c != 1 || st.status[static_cast<size_t>(j)] != sched::DONE)
                    fail("job " + std::to_string(j) + " finished " + std::to_string(c) + " times");
            }
        }
        i64 n_queued = 0;
        for (i64 j = 0; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            const int8_t status = st.status[u];
            const double sub = st.arrival_s[u];
            const std::string js = std::to_string(j);
            if (status == sched::DONE) {
                if (std::isnan(finish_t[u]) || !(sub <= first_start[u] && first_start[u] <= finish_t[u]))
                    fail("job " + js + " done with times " + py_repr(first_start[u]) + ", " +
                         py_repr(finish_t[u]) + " (arrival " + py_repr(sub) + ")");
            } else if (status == sched::PENDING) {
                if (j < n_arrived || sub <= now)
                    fail("job " + js + " never arrived (arrival " + py_repr(sub) + ", end " +
                         py_repr(now) + ")");
            } else if (status == sched::QUEUED || status == sched::RUNNING) {
                if (!cfg.has_horizon) fail("job " + js + " never finished");
                if (sub > now || st.running.contains(j) != (status == sched::RUNNING))
                    fail("job " + js + " in state " + std::to_string(status) +
                         " inconsistent at the end");
                n_queued += status == sched::QUEUED;
            } else if (status != sched::INFEASIBLE) {
                fail("job " + js + " in unknown state " + std::to_string(status));
            }
            if (st.waited_s[u] < 0 || st.attained_gpu_s[u] < 0)
                fail("job " + js + ": negative wait or GPU-seconds");
        }
        if (n_queued != st.queued.size())
            fail(std::to_string(n_queued) + " jobs queued but the queue holds " +
                 std::to_string(st.queued.size()));
        double total = 0.0;
        for (i64 j = 0; j < n; ++j) total += st.attained_at(j, now);
        const double tol = sched::py_max(1e-9 * sched::py_max(std::fabs(total), std::fabs(busy_int)), 1e-6);
        if (!(std::fabs(total - busy_int) <= tol))
            fail("GPU-seconds of jobs " + py_repr(total) + " != busy integral " + py_repr(busy_int));
    }
};

}  // namespace sim
}  // namespace aryl
